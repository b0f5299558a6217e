"""D28 and D29 over real HTTP on 127.0.0.1, in both protocol eras (`legacy`: the initialize handshake;
`auto`: the 2026-07-28 `server/discover`).

D28: a successful result is ONE text block whose JSON body carries its notices (mirrored under
`_meta`), so a client that joins every text block and parses it reads the answer; no notice or fix
names a tool outside the caller's tools/list. D29: the instructions are written per surface and
scopes, with the operator's addition after them."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from tests.mcp.conftest import mcp_session

MODES = ["legacy", "auto"]
PAGE_TOOLS = ("put_page", "get_page", "list_pages", "delete_page")
#: docs/protocol.md, server instructions: the operator's addition is cut at this many characters.
OPERATOR_MAX_CHARS = 2000


def joined(result: Any) -> dict[str, Any]:
    """What the reference's runner does: join every text block, parse one JSON document."""
    doc = json.loads("\n".join(c.text for c in result.content))
    assert isinstance(doc, dict)
    return doc


def named_tools(value: Any) -> set[str]:
    """Every tool an `mcp` step or a `verify` names anywhere inside `value`."""
    out: set[str] = set()
    if isinstance(value, dict):
        if isinstance(value.get("tool"), str):
            out.add(value["tool"])
        for v in value.values():
            out |= named_tools(v)
    elif isinstance(value, list):
        for v in value:
            out |= named_tools(v)
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("surface", ["verbs", "full"])
def test_a_first_remember_about_a_pageless_entity_is_one_json_document(
    mode: str, surface: str, serve: Any, tokens: dict[str, str]
) -> None:
    url = serve(surface)

    async def scenario() -> None:
        async with mcp_session(url, tokens["write"], mode) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool(
                "remember", {"fact": "Zed likes tea", "provenance": "chat", "entity": "Zed Nopage"}
            )
            assert not result.is_error and len(result.content) == 1
            doc = joined(result)
            assert [n["code"] for n in doc["notices"]] == ["new_entity"]
            assert result.meta["fleetmem/notices"] == result.meta["gbrain_notices"] == doc["notices"]
            assert named_tools(doc["notices"]) <= listed
            notice = doc["notices"][0]
            if surface == "verbs":  # no page tools here: the notice neither names nor offers one
                assert "fix" not in notice and not any(t in notice["why"] for t in PAGE_TOOLS)
            else:
                assert notice["fix"]["mcp"]["tool"] == "put_page" and notice["fix"]["next"] == "run"

    anyio.run(scenario)


@pytest.mark.parametrize("mode", MODES)
def test_an_empty_recall_and_an_unknown_parameter_are_one_json_document(
    mode: str, server_url: str, tokens: dict[str, str]
) -> None:
    async def scenario() -> None:
        async with mcp_session(server_url, tokens["read"], mode) as client:
            empty = await client.call_tool("recall", {"query": "qzxv nothing at all", "colour": "teal"})
            assert not empty.is_error and len(empty.content) == 1
            doc = joined(empty)
            assert {n["code"] for n in doc["notices"]} == {"empty_retrieval", "unknown_param"}
            assert empty.structured_content == doc

    anyio.run(scenario)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("surface", ["verbs", "full"])
@pytest.mark.parametrize("token", ["read", "write", "admin"])
def test_instructions_are_written_for_the_surface_and_the_scopes(
    mode: str, surface: str, token: str, serve: Any, tokens: dict[str, str]
) -> None:
    url = serve(surface)

    async def scenario() -> None:
        async with mcp_session(url, tokens[token], mode) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            text = client.instructions or ""
            assert "Operating contract" in text and "opaque" in text and "`notices`" in text
            told = {name for name in _all_tools() if f"`{name}`" in text}
            assert told <= listed, told - listed
            assert ("`remember`" in text) == (token != "read")
            assert ("`forget`" in text) == (token != "read")
            assert ("`get_page`" in text) == (surface == "full")
            assert "`recall`" in text and "`entity`" in text

    anyio.run(scenario)


@pytest.mark.parametrize("mode", MODES)
def test_the_operator_addition_follows_the_contract_capped(
    mode: str, serve: Any, tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEETMEM_MCP_INSTRUCTIONS", "Deployment identity: the Acme support brain. " + "x" * 5000)
    url = serve("verbs")

    async def scenario() -> None:
        async with mcp_session(url, tokens["write"], mode) as client:
            text = client.instructions or ""
            contract, _, extra = text.partition("\n\nDeployment identity: the Acme support brain. ")
            assert "`remember`" in contract
            assert len("Deployment identity: the Acme support brain. " + extra) == OPERATOR_MAX_CHARS

    anyio.run(scenario)


def _all_tools() -> list[str]:
    from fleetmem.memory.verbs import REGISTRY

    return list(REGISTRY)
