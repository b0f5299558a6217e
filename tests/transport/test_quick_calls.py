"""Which thread answers a call (`quick_calls.QuickCalls`): a read whose kind has run quick
`STREAK` times in a row runs on the event loop, anything else on a worker thread.

The unit tests time calls with a scripted clock (no wall clock is compared). The app test drives a
real `fleetmem serve` app on 127.0.0.1 and records, in `dispatch`, the name of the thread each call
ran on; its budget is raised so that no call on a loaded machine can count as slow.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.ports import Deps
from fleetmem.tokens import create_client
from fleetmem.transport import invoker as invoker_module
from fleetmem.transport import quick_calls
from fleetmem.transport.http_local import build_local_app, serve_in_thread
from fleetmem.transport.quick_calls import QuickCalls, kind_of
from fleetmem.wiring import HashEmbedder, SortableIds
from tests.transport.test_token_lookup import NOW

WORKER = "AnyIO worker thread"


class Ticks:
    """A clock whose every reading advances by the next scripted step."""

    def __init__(self) -> None:
        self.now = 0.0
        self.step = 0.0001

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def _threads(quick: QuickCalls, kinds: list[Any]) -> list[str]:
    """Run one call per kind in order and say where each ran: 'loop' or 'worker'."""
    where: list[str] = []

    async def main() -> None:
        loop_thread = threading.get_ident()
        for kind in kinds:
            ident = await quick.run(kind, threading.get_ident)
            where.append("loop" if ident == loop_thread else "worker")

    anyio.run(main)
    return where


def test_a_kind_runs_inline_only_after_a_streak_of_quick_calls() -> None:
    quick = QuickCalls(streak=4, clock=Ticks())
    kind = ("mcp", "whoami", ())
    assert _threads(quick, [kind] * 7) == ["worker"] * 4 + ["loop"] * 3


def test_one_slow_call_sends_its_kind_back_to_worker_threads_for_a_fresh_streak() -> None:
    clock = Ticks()
    quick = QuickCalls(streak=3, budget_s=0.001, clock=clock)
    kind = ("mcp", "get_page", ("slug",))
    assert _threads(quick, [kind] * 4) == ["worker"] * 3 + ["loop"]
    clock.step = 0.002  # each call now reads as 2 ms apart: over the budget
    assert _threads(quick, [kind]) == ["loop"]  # it ran inline, and was slow
    clock.step = 0.0001
    assert _threads(quick, [kind] * 4) == ["worker"] * 3 + ["loop"]


def test_kinds_are_separate_and_untracked_ones_take_the_thread() -> None:
    quick = QuickCalls(streak=2, max_kinds=1, clock=Ticks())
    first, second = ("mcp", "whoami", ()), ("mcp", "recall", ("entity",))
    assert _threads(quick, [first, first, second, second, second, first]) == [
        "worker",
        "worker",
        "worker",
        "worker",
        "worker",  # a second kind is over the bound: never tracked, never inline
        "loop",
    ]
    assert _threads(quick, [None, None, None]) == ["worker"] * 3


def test_writes_unknown_tools_and_model_calls_always_take_a_worker_thread() -> None:
    assert kind_of("remember", {"fact": "x"}) is None
    assert kind_of("forget", {"id": "f"}) is None
    assert kind_of("synthesize", {"query": "q"}) is None
    assert kind_of("no_such_tool", {}) is None
    assert kind_of("recall", {"query": "q", "limit": 3}) == ("mcp", "recall", ("limit", "query"))
    assert kind_of("recall", {"entity": "e"}) != kind_of("recall", {"query": "q"})
    assert kind_of("whoami", None, lane="v1") == ("v1", "whoami", ())


@contextmanager
def _served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **app_options: Any
) -> Iterator[tuple[str, str, list[tuple[str, str]]]]:
    """A served app (url, read/write token) and the (tool, thread name) of every call it ran."""
    monkeypatch.setattr(quick_calls, "BUDGET_S", 3600.0)  # no call counts as slow, however loaded the machine
    ran: list[tuple[str, str]] = []
    real = invoker_module.dispatch

    def recording(tool: str, *args: Any, **kwargs: Any) -> Any:
        ran.append((tool, threading.current_thread().name))
        return real(tool, *args, **kwargs)

    monkeypatch.setattr(invoker_module, "dispatch", recording)
    stores = open_local(tmp_path / "data")
    clock = FixedClock(NOW)
    deps = Deps.over(stores, clock=clock, ids=SortableIds(), embedder=HashEmbedder())
    token = create_client(stores.clients, clock, tenant="t1", client_id="rw", scopes=("read", "write"))[0]
    try:
        with serve_in_thread(build_local_app(lambda: deps, data_dir=tmp_path / "data", **app_options)) as url:
            yield url, token, ran
    finally:
        stores.close()


def _mcp(client: httpx.Client, url: str, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }
    answer = client.post(f"{url}/mcp", json=body, headers=headers).json()["result"]
    assert answer["isError"] is False, answer
    return answer


def test_the_served_app_answers_proven_quick_reads_on_the_loop_and_writes_on_worker_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    streak = quick_calls.STREAK
    with _served(tmp_path, monkeypatch) as (url, token, ran), httpx.Client(timeout=20) as client:
        for _ in range(streak + 3):
            _mcp(client, url, token, "whoami", {})
        for i in range(streak + 3):
            _mcp(client, url, token, "remember", {"fact": f"Ada likes tea number {i}", "provenance": "test"})
        for _ in range(streak + 3):
            answer = client.post(f"{url}/v1/whoami", json={}, headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == 200
    whoami = [name for tool, name in ran if tool == "whoami"]
    remember = [name for tool, name in ran if tool == "remember"]
    assert all(name.startswith(WORKER) for name in whoami[:streak])
    assert not any(name.startswith(WORKER) for name in whoami[streak : streak + 3])  # MCP: inline
    assert not any(name.startswith(WORKER) for name in whoami[-3:])  # /v1 (its own kind): inline too
    assert all(name.startswith(WORKER) for name in whoami[streak + 3 : 2 * streak + 3])
    assert len(remember) == streak + 3 and all(name.startswith(WORKER) for name in remember)


def test_without_quick_calls_every_call_takes_a_worker_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _served(tmp_path, monkeypatch, quick_calls=False) as (url, token, ran), httpx.Client(timeout=20) as client:
        for _ in range(quick_calls.STREAK + 3):
            _mcp(client, url, token, "whoami", {})
    assert len(ran) == quick_calls.STREAK + 3 and all(name.startswith(WORKER) for _, name in ran)
