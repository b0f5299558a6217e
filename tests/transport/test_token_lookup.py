"""The local token check: a lookup map that any commit empties, checked on the event loop.

Real SQLite files throughout (two `open_local` on one file stand for the server and a CLI process);
the read count is taken by wrapping the store's real `Database.one`, which still runs.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.tokens import ApiTokenAuth, create_client, hash_token
from fleetmem.transport.http_local import serve_in_thread
from fleetmem.transport.mcp_app import build_mcp_app
from fleetmem.wiring import HashEmbedder, SortableIds

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _count_reads(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = store.db.one

    def one(sql: str, args: Any = ()) -> Any:
        reads.append(sql)
        return real(sql, args)

    monkeypatch.setattr(store.db, "one", one)
    return reads


@pytest.mark.parametrize("where", ["file", ":memory:"])
def test_an_unchanged_store_answers_a_repeated_token_from_memory_and_any_commit_empties_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    clock = FixedClock(NOW)
    server = open_local(tmp_path / "data" if where == "file" else ":memory:")
    auth = ApiTokenAuth(server.clients, clock)
    # recording a token's use is a commit of its own (test_recording_a_use_refills_the_map_once below);
    # here the map alone is under test
    monkeypatch.setattr(auth, "_note_use", lambda digest, now: None)
    token, record = create_client(server.clients, clock, tenant="t1", client_id="a", scopes=("read",))
    reads = _count_reads(server.clients, monkeypatch)

    assert [auth.verify(token) for _ in range(3)] == [
        Caller(tenant="t1", client_id="a", scopes=frozenset({"read"}))
    ] * 3
    assert len(reads) == 1  # one table read, then the map while nothing was committed

    # the map holds records, not verdicts: a revoke dated later is compared with the clock each time
    server.clients.revoke(record.token_id, at=NOW + timedelta(minutes=5))
    assert auth.verify(token) is not None and auth.verify(token) is not None and len(reads) == 2
    clock.advance(minutes=5)
    assert auth.verify(token) is None and len(reads) == 2

    # a revoke through this process's own store (the revoke_token verb, the console)
    token, record = create_client(server.clients, clock, tenant="t1", client_id="b", scopes=("read",))
    before = len(reads)
    assert auth.verify(token) is not None and auth.verify(token) is not None and len(reads) == before + 1
    server.clients.revoke(record.token_id, at=NOW - timedelta(seconds=1))
    assert auth.verify(token) is None and len(reads) == before + 2

    if where == "file":
        # a token minted and then revoked by another process (the CLI) on the same file
        late_token, _ = create_client(server.clients, clock, tenant="t1", client_id="late", scopes=("read",))
        assert auth.verify(late_token) is not None
        with open_local(tmp_path / "data") as cli:
            late = next(r for r in cli.clients.list("t1") if r.client_id == "late")
            cli.clients.revoke(late.token_id, at=NOW - timedelta(seconds=1))
        assert auth.verify(late_token) is None  # from the very next lookup
        unknown = "fm_" + "y" * 43
        assert auth.verify(unknown) is None
        with open_local(tmp_path / "data") as cli:  # a miss is forgotten once anything is committed
            cli.clients.create(
                record.model_copy(
                    update={"token_hash": hash_token(unknown), "token_id": "tok_yyyy", "revoked_at": None}
                )
            )
        assert auth.verify(unknown) == Caller(tenant="t1", client_id="b", scopes=frozenset({"read"}))
    server.close()


def test_recording_a_use_refills_the_map_once_a_minute_per_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token's first use in a minute is written (`last_used_at`): like any commit it empties the
    map, so the next lookup reads the table once more; further uses within the minute read nothing."""
    clock = FixedClock(NOW)
    server = open_local(tmp_path / "data")
    auth = ApiTokenAuth(server.clients, clock)
    token, _ = create_client(server.clients, clock, tenant="t1", client_id="a", scopes=("read",))
    reads = _count_reads(server.clients, monkeypatch)
    assert all(auth.verify(token) is not None for _ in range(4))
    assert len(reads) == 2  # the first lookup, and one after the recorded use
    assert next(r for r in server.clients.list("t1")).last_used_at == NOW
    clock.advance(seconds=61)  # the map is still current: only the second recorded use empties it
    assert all(auth.verify(token) is not None for _ in range(3))
    assert len(reads) == 3 and next(r for r in server.clients.list("t1")).last_used_at == NOW + timedelta(seconds=61)
    server.close()


def test_the_local_server_records_a_use_off_the_calling_thread(tmp_path: Path) -> None:
    """`record_in_background`: the write runs on the recorder's own thread, never the caller's."""
    server = open_local(tmp_path / "data")
    clock = FixedClock(NOW)
    threads: list[str] = []
    real = server.clients.touch

    def touch(digest: str, *, at: datetime) -> None:
        threads.append(threading.current_thread().name)
        real(digest, at=at)

    server.clients.touch = touch  # type: ignore[method-assign]
    auth = ApiTokenAuth(server.clients, clock, record_in_background=True)
    token, _ = create_client(server.clients, clock, tenant="t1", client_id="a", scopes=("read",))
    assert auth.verify(token) is not None
    assert auth._recorder is not None
    auth._recorder.shutdown(wait=True)
    assert threads == ["fleetmem-token-use_0"]
    assert next(r for r in server.clients.list("t1")).last_used_at == NOW
    server.close()


def test_the_guard_checks_the_bearer_token_on_the_event_loop_without_a_worker_thread(tmp_path: Path) -> None:
    """A real app on 127.0.0.1: the caller is resolved on the thread that runs the event loop."""
    stores = open_local(tmp_path / "data")
    deps = Deps.over(stores, clock=FixedClock(NOW), ids=SortableIds(), embedder=HashEmbedder())
    threads: list[str] = []

    def caller_from_request(request: Any) -> Caller:
        threads.append(threading.current_thread().name)
        return Caller(tenant="t1", client_id="a", scopes=frozenset({"read"}))

    app = build_mcp_app(lambda: deps, caller_from_request=caller_from_request)
    with serve_in_thread(app) as url:
        r = httpx.post(f"{url}/v1/whoami", json={}, timeout=10)
        assert r.status_code == 200 and r.json()["client_id"] == "a"
    stores.close()
    assert threads and all(name.startswith("fleetmem-http-") for name in threads), threads
