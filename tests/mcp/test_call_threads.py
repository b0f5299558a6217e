"""The served app runs at most `call_threads` calls at once, and the SDK finds tool schemas without
serving a tools/list inside every tools/call. Real uvicorn on 127.0.0.1, real stores."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import httpx
import pytest

from fleetmem.contract.result import DispatchResult
from fleetmem.memory.registry import REGISTRY
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.http_local import build_local_app, serve_in_thread
from fleetmem.transport.invoker import InProcessInvoker
from fleetmem.transport.mcp_app import bearer_caller, build_mcp_app, list_tool_definitions, tool_input_schema
from fleetmem.wiring import build_auth
from tests.mcp.conftest import mcp_session

CALLS = 8


class CountingInvoker:
    """The real in-process invoker, counting how many calls run at the same moment. Each call waits
    until `expect` calls run at once (however slow the machine), then lingers a little so that any
    call the bound should have held back would be counted too."""

    def __init__(self, deps: Deps, expect: int) -> None:
        self.inner = InProcessInvoker(lambda: deps)
        self.lock = threading.Lock()
        self.expect = expect
        self.running = 0
        self.most = 0
        self.all_in = threading.Event()

    def invoke(self, tool: str, arguments: dict[str, Any] | None, caller: Caller, cid: str) -> DispatchResult:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            if self.running >= self.expect:
                self.all_in.set()
        try:
            assert self.all_in.wait(60), f"never {self.expect} calls at once"
            time.sleep(0.2)
            return self.inner.invoke(tool, arguments, caller, cid)
        finally:
            with self.lock:
                self.running -= 1


def _overlapping_calls(url: str, token: str) -> list[httpx.Response]:
    start = threading.Barrier(CALLS)

    def post(i: int) -> httpx.Response:
        with httpx.Client(timeout=60) as client:
            start.wait()
            return client.post(
                f"{url}/v1/recall", json={"query": f"tea {i}"}, headers={"Authorization": f"Bearer {token}"}
            )

    with ThreadPoolExecutor(max_workers=CALLS) as pool:
        return list(pool.map(post, range(CALLS)))


@pytest.mark.parametrize(("call_threads", "bound"), [(2, 2), (None, CALLS)])
def test_calls_beyond_the_thread_bound_wait_their_turn_and_all_succeed(
    http_deps: Deps, tokens: dict[str, str], call_threads: int | None, bound: int
) -> None:
    invoker = CountingInvoker(http_deps, expect=bound)
    app = build_mcp_app(
        None,
        invoker=invoker,
        caller_from_request=bearer_caller(lambda: build_auth(http_deps)),
        call_threads=call_threads,
    )
    with serve_in_thread(app) as url:
        responses = _overlapping_calls(url, tokens["read"])
    assert [r.status_code for r in responses] == [200] * CALLS, [r.text for r in responses]
    # bounded: never more than the bound at once; unbounded (anyio's 40): all eight overlap
    assert invoker.most == bound


def test_the_local_app_bounds_its_call_threads_by_default(http_deps: Deps, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleetmem serve`'s app (build_local_app) passes its bound through: 8 unless configured."""
    import fleetmem.transport.http_local as http_local

    seen: list[int] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["call_threads"])
        return build_mcp_app(*args, **kwargs)

    monkeypatch.setattr(http_local, "build_mcp_app", spy)
    build_local_app(lambda: http_deps)
    build_local_app(lambda: http_deps, call_threads=3)
    assert seen == [8, 3]


@pytest.mark.parametrize("surface", ["full", "verbs"])
def test_the_schema_lookup_answers_exactly_what_tools_list_shows(surface: str) -> None:
    lookup: Callable[[str], Any] = tool_input_schema(surface)  # type: ignore[arg-type]
    everyone = Caller(tenant="t1", client_id="all", scopes=frozenset({"read", "write", "admin"}))
    listed = {t.name: t.input_schema for t in list_tool_definitions(surface, everyone)}  # type: ignore[arg-type]
    assert listed and all(lookup(name) == schema for name, schema in listed.items())
    hidden = set(REGISTRY) - set(listed)
    assert all(lookup(name) is None for name in hidden)
    assert (surface == "verbs") == bool(hidden)  # the verbs surface hides the full surface's extras
    assert lookup("no_such_tool") is None


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_tools_call_does_not_serve_a_tools_list(
    mode: str, server_url: str, tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The official client in both eras: listing tools is counted, calling a tool lists nothing
    (the stateless era's SDK used to serve a tools/list per tools/call to find the schema)."""
    import fleetmem.transport.mcp_app as mcp_app

    listings: list[str] = []
    original = mcp_app.list_tool_definitions

    def counted(surface: Any, caller: Any) -> Any:
        listings.append(surface)
        return original(surface, caller)

    monkeypatch.setattr(mcp_app, "list_tool_definitions", counted)

    async def scenario() -> None:
        async with mcp_session(server_url, tokens["write"], mode) as client:
            await client.list_tools()
            assert listings == ["full"]  # the spy sees a real listing
            for query in ("tea", "coffee", "water"):
                result = await client.call_tool("recall", {"query": query})
                assert not result.is_error
            assert listings == ["full"]

    anyio.run(scenario)
