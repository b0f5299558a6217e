"""`/v1` on the local server over real HTTP (uvicorn on 127.0.0.1): the same bodies as MCP
tools/call for the same data, the same tool list as tools/list, the one status map, and the served
OpenAPI document is the generated one."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import httpx

from fleetmem.contract.status import CORRELATION_HEADER, HTTP_STATUS
from fleetmem.transport.openapi import openapi_document
from tests.mcp.conftest import mcp_session

#: Fields of a body that differ between two calls by nature: the call's own id and how long it took.
PER_CALL = frozenset({"correlation_id", "latency_ms"})


def _strip(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in PER_CALL}


def test_v1_calls_give_the_same_bodies_as_mcp_tools_for_the_same_data(server_url, tokens):
    auth = {"Authorization": f"Bearer {tokens['write']}"}
    fact = {"fact": "Carol prefers morning meetings", "provenance": "chat 2026-06-11", "entity": "Carol"}
    saved = httpx.post(f"{server_url}/v1/remember", json=fact, headers=auth)
    assert saved.status_code == 200 and saved.headers[CORRELATION_HEADER]
    calls = [
        ("recall", {"entity": "Carol"}),
        ("recall", {"query": "morning meetings"}),
        ("entity", {"name": "Carol"}),
        ("context_pack", {"entities": ["Carol"]}),
        ("forget", {"id": "f_missing"}),  # an error: the same envelope on both
        ("remember", {"fact": "x", "provenance": " "}),
    ]
    over_http = []
    for tool, args in calls:
        r = httpx.post(f"{server_url}/v1/{tool}", json=args, headers=auth)
        body = r.json()
        if "code" in body:
            assert r.status_code == HTTP_STATUS[body["code"]]
            assert body["correlation_id"] == r.headers[CORRELATION_HEADER]
        else:
            assert r.status_code == 200
        over_http.append(_strip(body))

    async def over_mcp() -> list[dict[str, Any]]:
        out = []
        async with mcp_session(server_url, tokens["write"], "legacy") as client:
            for tool, args in calls:
                result = await client.call_tool(tool, args)
                out.append(_strip(json.loads(result.content[0].text)))
        return out

    assert anyio.run(over_mcp) == over_http
    assert over_http[0]["facts"], "the remembered fact is recalled"
    assert {b.get("code") for b in over_http[-2:]} == {"not_found", "provenance_required"}


def test_v1_tools_is_tools_list_for_this_callers_scopes(server_url, tokens):
    async def listed(token: str) -> list[dict[str, Any]]:
        async with mcp_session(server_url, token, "legacy") as client:
            tools = (await client.list_tools()).tools
            return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]

    for scope in ("read", "write"):
        got = httpx.get(f"{server_url}/v1/tools", headers={"Authorization": f"Bearer {tokens[scope]}"}).json()
        assert got["tools"] == anyio.run(listed, tokens[scope])
    read_names = {
        t["name"]
        for t in httpx.get(f"{server_url}/v1/tools", headers={"Authorization": f"Bearer {tokens['read']}"}).json()[
            "tools"
        ]
    }
    assert "recall" in read_names and "remember" not in read_names


def test_v1_without_a_token_is_401_and_a_write_with_a_read_token_is_403(server_url, tokens):
    for method, path in (("GET", "/v1/tools"), ("GET", "/v1/openapi.json"), ("POST", "/v1/recall")):
        r = httpx.request(method, f"{server_url}{path}", json={} if method == "POST" else None)
        assert r.status_code == 401 and r.json()["code"] == "unauthorized" and r.json()["suggestion"]
    r = httpx.post(
        f"{server_url}/v1/remember",
        json={"fact": "x", "provenance": "p"},
        headers={"Authorization": f"Bearer {tokens['read']}"},
    )
    assert r.status_code == 403 and r.json()["code"] == "scope_denied"


def test_non_finite_json_numbers_are_refused_as_invalid_json(server_url, tokens):
    """Regression: `1e999` parsed to infinity, was echoed into a fix, and the answer failed to
    render (500 text/plain)."""
    r = httpx.post(
        f"{server_url}/v1/recall",
        content=b'{"query": "x", "limit": 1e999}',
        headers={"Authorization": f"Bearer {tokens['read']}", "Content-Type": "application/json"},
    )
    assert r.status_code == 400 and r.json()["code"] == "invalid_params"


def test_the_served_document_is_generated_from_the_registry(server_url, tokens):
    r = httpx.get(f"{server_url}/v1/openapi.json", headers={"Authorization": f"Bearer {tokens['read']}"})
    assert r.json() == openapi_document("full", server_url=server_url)


def test_a_body_nested_too_deep_is_refused_with_the_envelope_on_v1_and_a_parse_error_on_mcp(server_url, tokens):
    """Regression: a body nested ~1,000 levels raised RecursionError in the JSON parser, which the
    body reader did not catch: 500 text/plain without envelope or correlation id. One nested 100
    levels parsed and reached the tool."""
    auth = {"Authorization": f"Bearer {tokens['write']}", "Content-Type": "application/json"}
    for depth in (100, 1_000, 100_000):
        deep = b'{"query": ' + b"[" * depth + b"]" * depth + b"}"
        r = httpx.post(f"{server_url}/v1/recall", content=deep, headers=auth)
        body = r.json()
        assert (r.status_code, body["code"]) == (400, "invalid_params"), (depth, r.text[:200])
        assert body["detail"] == {"reason": "too_deep", "max_depth": 32}
        assert body["correlation_id"] == r.headers[CORRELATION_HEADER]
        rpc = httpx.post(
            f"{server_url}/mcp",
            content=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ' + deep[len(b'{"query": ') :],
            headers={**auth, "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"},
        )
        assert rpc.headers["content-type"].startswith("application/json"), (depth, rpc.text[:200])
        assert rpc.json()["error"]["code"] in (-32700, -32600, -32602), (depth, rpc.text[:200])
    flat = httpx.post(f"{server_url}/v1/recall", json={"query": "x"}, headers=auth)
    assert flat.status_code == 200


class _ToolCallLines(logging.Handler):
    """The `tool_call` log lines dispatch writes while it is attached."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == "tool_call":
            self.lines.append(record)


def test_a_v1_call_is_logged_as_v1_and_an_mcp_call_as_mcp(server_url, tokens):
    logger = logging.getLogger("fleetmem.transport.dispatch")
    seen, level = _ToolCallLines(), logger.level
    logger.addHandler(seen)
    logger.setLevel(logging.INFO)
    try:
        auth = {"Authorization": f"Bearer {tokens['write']}"}
        assert httpx.post(f"{server_url}/v1/recall", json={"query": "v1 call"}, headers=auth).status_code == 200
        refused = httpx.post(f"{server_url}/v1/forget", json={"id": "f_missing"}, headers=auth)
        assert refused.status_code == HTTP_STATUS[refused.json()["code"]]

        async def over_mcp() -> None:
            async with mcp_session(server_url, tokens["write"], "auto") as client:
                assert not (await client.call_tool("recall", {"query": "mcp call"})).is_error

        anyio.run(over_mcp)
    finally:
        logger.removeHandler(seen)
        logger.setLevel(level)
    assert [(r.tool, r.transport) for r in seen.lines] == [("recall", "v1"), ("forget", "v1"), ("recall", "mcp")]
