"""SIGKILL `fleetmem serve` in the middle of a six-writer burst of `remember` / `put_page` calls,
each with an idempotency key; restart it on the same data directory and check what survived:

- every acknowledged write is stored exactly once, as acknowledged;
- every call the kill cut off, retried with its key after the restart, succeeds (never the
  `unavailable` of a key held by a dead call), and its memory is stored exactly once — including
  calls killed between their claim and their result (the test makes sure there is at least one);
- delta from 1970 (session-less, drained with next_cursor) and recall list what the store holds;
- `PRAGMA integrity_check` is ok.

The server runs with a 1 s idempotency lease (FLEETMEM_IDEMPOTENCY_LEASE_S), so the claims the kill
leaves behind have lapsed (or lapse while the retry waits) by the time the retries arrive. Real
subprocess, real HTTP on 127.0.0.1, SQLite in tmp_path, the hash embedder.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetmem.adapters.local.sqlite import DB_FILENAME
from fleetmem.protocol import request_uuid
from tests.mcp.served import Served, server_env

pytestmark = pytest.mark.slow

WRITERS = 6
#: acknowledged writes before the kill (so there is something to lose)
ACKED_BEFORE_KILL = 24
LEASE_S = "1"


@dataclass
class Write:
    tool: str
    args: dict[str, Any]
    marker: str  # a word only this write's text contains
    body: dict[str, Any] | None = None  # the acknowledged answer
    cut_off: bool = False  # no answer: the kill (or the server being down) cut it off


def _write(writer: int, n: int) -> Write:
    marker = f"kb{uuid.uuid4().hex[:10]}"
    key = f"w{writer}-n{n}"
    if n % 2 == 0:
        text = f"Writer {writer} recorded {marker} {uuid.uuid4().hex[:8]} {uuid.uuid4().hex[:8]}"
        return Write("remember", {"fact": text, "provenance": "kill test", "idempotency_key": key}, marker)
    content = f"# Burst page {writer} {n}\n\nWriter {writer} wrote {marker} {uuid.uuid4().hex[:8]}."
    return Write("put_page", {"slug": f"kill/w{writer}-n{n}", "content": content, "idempotency_key": key}, marker)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path, server_env(FLEETMEM_IDEMPOTENCY_LEASE_S=LEASE_S))
    try:
        yield server.start()
    finally:
        server.stop()


def _burst(
    served: Served,
    writes: list[Write],
    guard: threading.Lock,
    stop: threading.Event,
    make: Callable[[int, int], Write] = _write,
) -> list[threading.Thread]:
    def writer(w: int) -> None:
        with httpx.Client(timeout=60) as client:
            for n in range(10_000):
                if stop.is_set():
                    return
                item = make(w, n)
                with guard:
                    writes.append(item)
                try:
                    r = client.post(
                        f"{served.url}/v1/{item.tool}",
                        json=item.args,
                        headers={"Authorization": f"Bearer {served.token}"},
                    )
                except httpx.TransportError:
                    item.cut_off = True
                    return
                assert r.status_code == 200, r.text
                item.body = r.json()

    threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(WRITERS)]
    for t in threads:
        t.start()
    return threads


def _kill_with_a_claim_in_flight(served: Served, writes: list[Write], guard: threading.Lock) -> set[str]:
    """SIGKILL the server while at least one call holds its idempotency claim without a result.
    Taking the database's write lock first freezes the server's writes, so the claims seen in
    flight under it are the ones the kill leaves behind. Returns their keys."""
    assert served.proc is not None
    end = time.monotonic() + 120
    while True:
        assert time.monotonic() < end, "the burst never got going"
        assert served.proc.poll() is None, served.log_text()
        with guard:
            acked = sum(1 for w in writes if w.body is not None)
        if acked >= ACKED_BEFORE_KILL:
            db = sqlite3.connect(served.data_dir / DB_FILENAME, isolation_level=None, timeout=30)
            try:
                db.execute("BEGIN IMMEDIATE")
                stuck = {k for (k,) in db.execute("SELECT key FROM idempotency WHERE result IS NULL")}
                if stuck:
                    served.proc.kill()
                    served.proc.wait()
                db.execute("ROLLBACK")
            finally:
                db.close()
            if stuck:
                return stuck
        time.sleep(0.005)  # poll again (a readiness loop: what it waits for is checked above)


def _store(data_dir: Path) -> tuple[dict[str, list[tuple[str, bool]]], dict[str, str]]:
    """fact text -> [(fact_id, active)], page slug -> body, read from the database file itself."""
    with sqlite3.connect(data_dir / DB_FILENAME) as db:
        facts: dict[str, list[tuple[str, bool]]] = {}
        for fact_id, text, active in db.execute(
            "SELECT fact_id, text, expired_at IS NULL AND superseded_by IS NULL AND valid_until IS NULL FROM facts"
        ):
            facts.setdefault(text, []).append((fact_id, bool(active)))
        pages = dict(db.execute("SELECT slug, body FROM pages"))
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    return facts, pages


def _drain_delta(served: Served) -> tuple[list[str], list[str]]:
    args: dict[str, Any] = {"since": "1970-01-01T00:00:00Z", "budget_tokens": 4000}
    fact_ids: list[str] = []
    slugs: list[str] = []
    for _ in range(500):
        body = served.call("delta", args).json()
        assert "code" not in body, body
        fact_ids += [f["fact_id"] for f in body["facts"]]
        slugs += [p["slug"] for p in body["pages"]]
        if not body["has_more"]:
            return fact_ids, slugs
        cur = body["next_cursor"]
        args = {
            "since": cur["since"],
            "since_slug": cur["slug"],
            "since_page_seq": cur["page_seq"],
            "since_fact_seq": cur["fact_seq"],
            "budget_tokens": 4000,
        }
    raise AssertionError("delta never finished draining")


def test_a_kill_mid_burst_loses_no_acknowledged_write_and_every_cut_off_call_succeeds_on_retry(
    served: Served,
) -> None:
    writes: list[Write] = []
    guard = threading.Lock()
    stop = threading.Event()
    threads = _burst(served, writes, guard, stop)
    stuck_keys = _kill_with_a_claim_in_flight(served, writes, guard)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)

    cut_off = [w for w in writes if w.cut_off]
    acked = [w for w in writes if w.body is not None]
    assert len(acked) + len(cut_off) == len(writes)
    # a claim left in flight belongs to a call that got no answer
    assert stuck_keys <= {request_uuid(w.args["idempotency_key"])[0] for w in cut_off}  # D22: stored by request id

    served.start()  # the same data directory
    for w in cut_off:
        r = served.call(w.tool, w.args)
        body = r.json()
        assert r.status_code == 200, body  # not the `unavailable` of a key held by a dead call
        w.body = body

    facts, pages = _store(served.data_dir)
    for w in writes:  # acknowledged before the kill, or retried after it: stored exactly once
        assert w.body is not None
        if w.tool == "remember":
            assert facts.get(w.args["fact"]) == [(w.body["id"], True)], (w, facts.get(w.args["fact"]))
        else:
            assert pages.get(w.args["slug"], "").count(w.marker) == 1, w

    delta_facts, delta_slugs = _drain_delta(served)
    active = sorted(fid for rows in facts.values() for fid, live in rows if live)
    assert sorted(delta_facts) == active  # each once, none missing
    assert sorted(delta_slugs) == sorted(pages)

    for w in writes:
        body = served.call("recall", {"query": w.marker, "limit": 5}).json()
        if w.tool == "remember":
            assert w.body["id"] in [f["fact_id"] for f in body["facts"]], (w, body)  # type: ignore[index]
        else:
            assert w.args["slug"] in {hit["slug"] for hit in body["results"]}, (w, body)

    served.stop()
    _store(served.data_dir)  # integrity after the second server's writes too
