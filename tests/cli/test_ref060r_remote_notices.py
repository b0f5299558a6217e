"""D28: the remote lane reads a success's notices from its body (where a D28 server puts them),
takes them out of the body (so it is the tool's own, as on the local lane), and still reads
`_meta["fleetmem/notices"]` from a server that only mirrors them there. Results are built with the
SDK's own types (no server needed for the framing rule)."""

from __future__ import annotations

import json

import mcp_types as types

from fleetmem.remote import _reply_of

NOTICE = {"code": "empty_retrieval", "kind": "info", "why": "Nothing matched.", "contract_version": 1}


def _result(body: dict, meta: dict | None = None, is_error: bool = False) -> types.CallToolResult:
    text = types.TextContent(type="text", text=json.dumps(body))
    return types.CallToolResult(content=[text], structured_content=body, is_error=is_error, _meta=meta)


def test_notices_are_read_from_the_body_then_from_meta_and_an_envelope_keeps_its_own() -> None:
    reply = _reply_of(_result({"facts": [], "notices": [NOTICE]}))
    assert reply.notices == [NOTICE]
    assert reply.body == {"facts": []}  # taken out: the tool's own body, as on the local lane
    older = _reply_of(_result({"facts": []}, {"fleetmem/notices": [NOTICE]}))  # a server before D28
    assert older.notices == [NOTICE] and older.body == {"facts": []}
    env = {"code": "invalid_params", "notices": [NOTICE]}
    failed = _reply_of(_result(env, is_error=True))
    assert failed.is_error and failed.body["notices"] == [NOTICE]
