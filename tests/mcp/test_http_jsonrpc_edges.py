"""JSON-RPC edges of POST /mcp over real HTTP (uvicorn on 127.0.0.1), in both protocol eras: an id
that is not a string or an integer, a string holding an unpaired surrogate escape, an unsupported
`MCP-Protocol-Version`, and `initialize` sent as a 2026-07-28 request. Each is a JSON-RPC error that
says what is wrong and what to send instead (never a dropped call, never a misleading message).

`JSONRPC_EDGES` is also run through the AWS edge handler (tests/functions/test_edge_handler.py):
both deployments serve /mcp with the same app, so they answer the same."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import httpx
import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

ACCEPT = "application/json, text/event-stream"
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
SERVED = [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS]


class Edge(NamedTuple):
    name: str
    version: str | None  # the MCP-Protocol-Version header (None: not sent)
    body: bytes
    status: int
    code: int
    id: Any  # the answer's id
    says: tuple[str, ...]  # the message names these


def message(method: str, params: dict[str, Any] | None = None, *, id: Any = 1, modern: bool = False) -> dict:
    params = dict(params or {})
    if modern:
        params["_meta"] = META
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


def raw(payload: dict) -> bytes:
    """json.dumps writes an unpaired surrogate as the escape `\\ud800`, which a JSON body may carry."""
    return json.dumps(payload).encode()


RECALL_HIGH = {"name": "recall", "arguments": {"query": "lone \ud800 high"}}
RECALL_LOW = {"name": "recall", "arguments": {"query": "lone \udc00 low"}}
BAD_ID = ("string or an integer", 'Send e.g. "id": 1')
INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}

JSONRPC_EDGES = [
    Edge(
        "object id, handshake era",
        "2025-11-25",
        raw(message("tools/list", id={"a": 1})),
        400,
        -32600,
        None,
        ("an object", *BAD_ID),
    ),
    Edge(
        "array id, no version header",
        None,
        raw(message("tools/list", id=[1])),
        400,
        -32600,
        None,
        ("an array", *BAD_ID),
    ),
    Edge(
        "null id, handshake era",
        "2025-06-18",
        raw(message("tools/list", id=None)),
        400,
        -32600,
        None,
        ("null", *BAD_ID),
    ),
    Edge(
        "boolean id, stateless era",
        MODERN,
        raw(message("tools/list", id=True, modern=True)),
        400,
        -32600,
        None,
        ("a boolean", *BAD_ID),
    ),
    Edge(
        "fractional id, stateless era",
        MODERN,
        raw(message("tools/list", id=1.5, modern=True)),
        400,
        -32600,
        None,
        ("a number with a fraction", *BAD_ID),
    ),
    Edge(
        "1.0 id, handshake era",
        "2025-11-25",
        raw(message("tools/list", id=1.0)),
        400,
        -32600,
        None,
        ("a number with a fraction or exponent", *BAD_ID),
    ),
    Edge(
        "lone high surrogate, handshake era",
        "2025-11-25",
        raw(message("tools/call", RECALL_HIGH)),
        400,
        -32700,
        None,
        ("params.arguments.query", "unpaired UTF-16 surrogate", "U+FFFD"),
    ),
    Edge(
        "lone low surrogate, stateless era",
        MODERN,
        raw(message("tools/call", RECALL_LOW, modern=True)),
        400,
        -32700,
        None,
        ("params.arguments.query", "unpaired UTF-16 surrogate"),
    ),
    Edge(
        "unsupported version header",
        "1999-01-01",
        raw(message("tools/list")),
        400,
        -32022,
        1,
        ("'1999-01-01'", *SERVED),
    ),
    Edge(
        "initialize in the stateless era",
        MODERN,
        raw(message("initialize", INITIALIZE, id=5, modern=True)),
        404,
        -32601,
        5,
        ("no handshake", "server/discover", "initialize with MCP-Protocol-Version 2025-11-25"),
    ),
]


def headers_for(edge: Edge, token: str) -> dict[str, str]:
    h = {"Accept": ACCEPT, "Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    if edge.version is not None:
        h["MCP-Protocol-Version"] = edge.version
    if edge.version == MODERN:  # what a stateless-era client sends beside the body
        sent = json.loads(edge.body)
        h["Mcp-Method"] = sent["method"]
        if sent["method"] == "tools/call":
            h["Mcp-Name"] = sent["params"]["name"]
    return h


def check_answer(edge: Edge, status: int, body: dict[str, Any]) -> None:
    assert status == edge.status, (edge.name, status, body)
    assert body["jsonrpc"] == "2.0" and "id" in body and body["id"] == edge.id, body
    error = body["error"]
    assert error["code"] == edge.code, error
    for words in edge.says:
        assert words in error["message"], (edge.name, words, error["message"])
    if edge.code == -32022:
        assert error["data"] == {"supported": SERVED, "requested": edge.version}
    if edge.code == -32700:
        assert error["data"] == {"reason": "unpaired_surrogate", "path": "params.arguments.query"}


@pytest.mark.parametrize("edge", JSONRPC_EDGES, ids=[e.name for e in JSONRPC_EDGES])
def test_hostile_json_rpc_is_a_json_rpc_error_that_says_what_to_send(
    server_url: str, tokens: dict[str, str], edge: Edge
) -> None:
    r = httpx.post(server_url + "/mcp", content=edge.body, headers=headers_for(edge, tokens["write"]), timeout=10)
    assert r.headers["content-type"].startswith("application/json")
    check_answer(edge, r.status_code, r.json())


def test_nothing_a_refused_call_asked_for_is_written(server_url: str, tokens: dict[str, str]) -> None:
    """A remember whose id is an object was dropped with 202 before; now it is refused, and refused
    means not run."""
    remember = {"name": "remember", "arguments": {"fact": "Dropped call fact", "provenance": "test"}}
    for bad_id in ({"a": 1}, None, [7]):
        body = raw(message("tools/call", remember, id=bad_id))
        edge = Edge("", "2025-11-25", body, 400, -32600, None, BAD_ID)
        r = httpx.post(server_url + "/mcp", content=body, headers=headers_for(edge, tokens["write"]), timeout=10)
        check_answer(edge, r.status_code, r.json())
    r = httpx.post(
        server_url + "/v1/recall",
        json={"query": "Dropped call fact"},
        headers={"Authorization": f"Bearer {tokens['read']}"},
        timeout=10,
    )
    assert r.status_code == 200 and r.json()["facts"] == []


@pytest.mark.parametrize("request_id", ["req-7", "", 7, 0, -3, 2**63])
def test_string_and_integer_ids_are_answered_in_both_eras(server_url: str, tokens: dict[str, str], request_id):
    for version, modern in (("2025-11-25", False), (MODERN, True)):
        edge = Edge("", version, raw(message("tools/list", id=request_id, modern=modern)), 200, 0, None, ())
        r = httpx.post(server_url + "/mcp", content=edge.body, headers=headers_for(edge, tokens["read"]), timeout=10)
        assert r.status_code == 200, r.text[:300]
        assert r.json()["id"] == request_id and r.json()["result"]["tools"]


def test_a_paired_surrogate_escape_is_ordinary_text(server_url: str, tokens: dict[str, str]) -> None:
    """Only an UNPAIRED surrogate is refused: "\\ud83d\\ude00" is one character (U+1F600)."""
    remember = {"name": "remember", "arguments": {"fact": "Dana likes \U0001f600 emoji", "provenance": "test"}}
    body = json.dumps(message("tools/call", remember)).encode()
    assert b"\\ud83d\\ude00" in body
    edge = Edge("", "2025-11-25", body, 200, 0, None, ())
    r = httpx.post(server_url + "/mcp", content=body, headers=headers_for(edge, tokens["write"]), timeout=10)
    result = r.json()["result"]
    assert result["isError"] is False and json.loads(result["content"][0]["text"])["status"] == "inserted"


def test_the_handshake_and_discovery_still_answer(server_url: str, tokens: dict[str, str]) -> None:
    for version in (None, "2025-06-18", "2025-11-25"):
        edge = Edge("", version, raw(message("initialize", INITIALIZE)), 200, 0, None, ())
        r = httpx.post(server_url + "/mcp", content=edge.body, headers=headers_for(edge, tokens["read"]), timeout=10)
        assert r.status_code == 200 and r.json()["result"]["protocolVersion"] == "2025-11-25"
    edge = Edge("", MODERN, raw(message("server/discover", modern=True)), 200, 0, None, ())
    r = httpx.post(server_url + "/mcp", content=edge.body, headers=headers_for(edge, tokens["read"]), timeout=10)
    assert r.status_code == 200 and MODERN in r.json()["result"]["supportedVersions"]


def _modern_post(server_url: str, token: str, payload: dict, **routing: str) -> tuple[int, dict[str, Any]]:
    headers = {
        "Accept": ACCEPT,
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": MODERN,
        **routing,
    }
    r = httpx.post(server_url + "/mcp", content=raw(payload), headers=headers, timeout=10)
    return r.status_code, r.json()


RECALL_CALL = {"name": "recall", "arguments": {"query": "x"}}


@pytest.mark.parametrize(
    ("payload", "routing", "header", "send"),
    [
        (message("tools/list", modern=True), {}, "Mcp-Method", "Mcp-Method: tools/list"),
        (message("tools/call", RECALL_CALL, modern=True), {}, "Mcp-Method", "Mcp-Method: tools/call"),
        (message("tools/call", RECALL_CALL, modern=True), {"Mcp-Method": "tools/call"}, "Mcp-Name", "Mcp-Name: recall"),
    ],
    ids=["tools/list without Mcp-Method", "tools/call without Mcp-Method", "tools/call without Mcp-Name"],
)
def test_a_missing_routing_header_is_called_missing_and_names_the_header_to_send(
    server_url: str, tokens: dict[str, str], payload: dict, routing: dict[str, str], header: str, send: str
) -> None:
    status, body = _modern_post(server_url, tokens["write"], payload, **routing)
    assert status == 400 and body["id"] == 1
    error = body["error"]
    assert error["code"] == -32020  # HEADER_MISMATCH, the code the SDK gives a wrong header
    assert error["message"].startswith(f"Missing {header} header") and f"`{send}`" in error["message"]
    assert "does not match" not in error["message"]
    assert error["data"]["reason"] == "missing_header" and error["data"]["header"] == header


def test_a_routing_header_that_differs_from_the_body_is_still_a_mismatch(
    server_url: str, tokens: dict[str, str]
) -> None:
    status, body = _modern_post(
        server_url, tokens["write"], message("tools/list", modern=True), **{"Mcp-Method": "tools/call"}
    )
    assert status == 400 and body["error"]["code"] == -32020
    assert "does not match" in body["error"]["message"] and "Missing" not in body["error"]["message"]
    ok_status, ok = _modern_post(
        server_url, tokens["write"], message("tools/list", modern=True), **{"Mcp-Method": "tools/list"}
    )
    assert ok_status == 200 and ok["result"]["tools"]
