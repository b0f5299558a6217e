"""The official `mcp` SDK client over real HTTP, in both protocol eras: handshake (mode="legacy",
initialize) and 2026-07-28 stateless (mode="auto", server/discover)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest

from fleetmem.memory.registry import REGISTRY
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import visible_tools
from tests.mcp.conftest import caller_for, mcp_session

MODES = ["legacy", "auto"]
EXPECTED_VERSION = {"legacy": "2025-11-25", "auto": "2026-07-28"}


def body(result: Any) -> dict[str, Any]:
    return json.loads(result.content[0].text)


@pytest.mark.parametrize("mode", MODES)
def test_tools_list_and_a_remember_then_recall_by_entity_round_trip(
    mode: str, server_url: str, tokens: dict[str, str], http_deps: Deps
) -> None:
    async def scenario() -> None:
        async with mcp_session(server_url, tokens["write"], mode) as client:
            assert client.session.protocol_version == EXPECTED_VERSION[mode]
            listed = {t.name for t in (await client.list_tools()).tools}
            expected = {s.name for s in visible_tools("full", caller_for(http_deps, tokens["write"]))}
            assert listed == expected
            saved = await client.call_tool(
                "remember", {"fact": f"Alice prefers tea ({mode})", "provenance": "chat", "entity": "Alice"}
            )
            assert not saved.is_error
            fact_id = body(saved)["id"]
            recalled = await client.call_tool("recall", {"entity": "Alice"})
            assert not recalled.is_error
            assert fact_id in [f["fact_id"] for f in body(recalled)["facts"]]
            assert recalled.structured_content == body(recalled)

    anyio.run(scenario)


@pytest.mark.parametrize("mode", MODES)
def test_an_error_is_one_text_block_holding_the_envelope(mode: str, server_url: str, tokens: dict[str, str]) -> None:
    async def scenario() -> None:
        async with mcp_session(server_url, tokens["read"], mode) as client:
            result = await client.call_tool("remember", {"fact": "x", "provenance": "p"})
            assert result.is_error
            assert len(result.content) == 1
            env = body(result)
            assert env["code"] == "scope_denied"
            assert env["suggestion"] and env["correlation_id"] and env["protocol_version"] == 1

    anyio.run(scenario)


@pytest.mark.parametrize("mode", MODES)
def test_notices_ride_inside_the_body_and_meta_while_the_answer_stays_the_same(
    mode: str, server_url: str, tokens: dict[str, str]
) -> None:
    async def scenario() -> None:
        async with mcp_session(server_url, tokens["write"], mode) as client:
            await client.call_tool("remember", {"fact": "Bob plays chess", "provenance": "chat", "entity": "Bob"})
            clean = await client.call_tool("recall", {"entity": "Bob"})
            noisy = await client.call_tool("recall", {"entity": "Bob", "limt": 5})
            assert len(noisy.content) == 1  # D28
            doc = json.loads(noisy.content[0].text)
            notices = doc.pop("notices")
            assert doc == json.loads(clean.content[0].text)
            codes = [n["code"] for n in noisy.meta["fleetmem/notices"]]
            assert "unknown_param" in codes and codes == [n["code"] for n in notices]

    anyio.run(scenario)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("surface", ["verbs", "full"])
def test_tools_list_shows_exactly_what_tools_call_allows_for_every_scope(
    mode: str, surface: str, serve: Any, tokens: dict[str, str]
) -> None:
    url = serve(surface)

    async def scenario() -> None:
        for name in ("read", "write", "write_only", "admin"):
            async with mcp_session(url, tokens[name], mode) as client:
                listed = {t.name for t in (await client.list_tools()).tools}
                for tool in REGISTRY:
                    result = await client.call_tool(tool, {})
                    code = body(result).get("code") if result.is_error else None
                    gated = code in ("unknown_tool", "scope_denied")
                    assert gated == (tool not in listed), (name, surface, tool, code)

    anyio.run(scenario)


def test_every_listed_tool_has_an_object_schema_with_properties_and_required(
    server_url: str, tokens: dict[str, str]
) -> None:
    async def scenario() -> None:
        async with mcp_session(server_url, tokens["admin"], "auto") as client:
            for tool in (await client.list_tools()).tools:
                schema = tool.input_schema
                assert schema["type"] == "object"
                assert isinstance(schema["properties"], dict)
                assert isinstance(schema["required"], list)
                assert tool.description

    anyio.run(scenario)


def test_a_handshake_client_of_2025_06_18_gets_that_version(server_url: str, tokens: dict[str, str]) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    r = httpx.post(
        server_url + "/mcp",
        json=init,
        timeout=10,
        headers={
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {tokens['read']}",
        },
    )
    assert r.status_code == 200
    assert r.json()["result"]["protocolVersion"] == "2025-06-18"
    assert "mcp-session-id" not in r.headers
