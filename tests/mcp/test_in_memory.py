"""The MCP server in-process (no HTTP): the SDK `Client(server)` in both modes, for fast checks of
framing and of list/call agreement across every scope and surface."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.client.client import Client

from fleetmem.contract.result import DispatchResult
from fleetmem.errors import Notice
from fleetmem.memory.registry import REGISTRY
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.invoker import InProcessInvoker
from fleetmem.transport.mcp_app import build_mcp_server, to_call_tool_result

SCOPE_SETS = [("read",), ("write",), ("read", "write"), ("admin",)]


def server_for(deps: Deps, who: Caller | None, surface: str = "full") -> Any:
    return build_mcp_server(
        InProcessInvoker(lambda: deps, surface=surface),
        surface=surface,  # type: ignore[arg-type]
        caller_from_context=lambda ctx: who,
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("surface", ["verbs", "full"])
def test_list_and_call_agree_for_every_scope(deps: Deps, mode: str, surface: str) -> None:
    async def scenario() -> None:
        for scopes in SCOPE_SETS:
            who = Caller(tenant="t1", client_id="c", scopes=frozenset(scopes), remote=True)  # type: ignore[arg-type]
            async with Client(server_for(deps, who, surface), mode=mode) as client:  # type: ignore[arg-type]
                listed = {t.name for t in (await client.list_tools()).tools}
                for tool in REGISTRY:
                    r = await client.call_tool(tool, {})
                    code = json.loads(r.content[0].text).get("code") if r.is_error else None
                    assert (code in ("unknown_tool", "scope_denied")) == (tool not in listed), (scopes, tool)

    anyio.run(scenario)


def test_without_a_caller_nothing_is_listed_and_calls_are_unauthorized(deps: Deps) -> None:
    async def scenario() -> None:
        async with Client(server_for(deps, None)) as client:
            assert (await client.list_tools()).tools == []
            r = await client.call_tool("recall", {"query": "x"})
            assert r.is_error and json.loads(r.content[0].text)["code"] == "unauthorized"

    anyio.run(scenario)


def test_annotations_follow_the_registry(deps: Deps, admin_caller: Caller) -> None:
    async def scenario() -> None:
        async with Client(server_for(deps, admin_caller)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name, tool in tools.items():
                expected = REGISTRY[name].annotations
                got = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
                assert {k: v for k, v in got.items() if k in expected} == expected, name

    anyio.run(scenario)


def test_a_tool_that_takes_an_idempotency_key_advertises_it(deps: Deps, admin_caller: Caller) -> None:
    async def scenario() -> None:
        async with Client(server_for(deps, admin_caller)) as client:
            for tool in (await client.list_tools()).tools:
                if REGISTRY[tool.name].idempotency:
                    assert "idempotency_key" in tool.input_schema["properties"]

    anyio.run(scenario)


def test_notices_ride_inside_the_one_block_in_kind_order() -> None:
    result = DispatchResult(
        {"a": 1},
        False,
        [Notice("i", "info", "w"), Notice("s", "safety", "w"), Notice("d", "degraded", "w")],
        "c",
    )
    framed = to_call_tool_result(result)
    assert len(framed.content) == 1  # D28
    doc = json.loads(framed.content[0].text)
    assert doc["a"] == 1 and [n["code"] for n in doc["notices"]] == ["s", "d", "i"]
    assert framed.structured_content == doc
    assert framed.meta["fleetmem/notices"] == framed.meta["gbrain_notices"] == doc["notices"]
    plain = to_call_tool_result(DispatchResult({"a": 1}, False, [], "c"))
    assert json.loads(plain.content[0].text) == {"a": 1}
    assert plain.meta is None


def test_an_invoker_that_raises_becomes_an_internal_result_without_its_text(admin_caller: Caller) -> None:
    class Broken:
        def invoke(self, *args: Any) -> DispatchResult:
            raise RuntimeError("password=hunter2")

    async def scenario() -> None:
        server = build_mcp_server(Broken(), caller_from_context=lambda ctx: admin_caller)
        async with Client(server) as client:
            r = await client.call_tool("recall", {})
            assert r.is_error and len(r.content) == 1
            assert json.loads(r.content[0].text)["code"] == "internal"
            assert "hunter2" not in r.content[0].text

    anyio.run(scenario)
