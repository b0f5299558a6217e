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


def test_notices_inside_the_body_are_read_and_taken_out() -> None:
    reply = _reply_of(_result({"facts": [], "notices": [NOTICE]}))
    assert reply.notices == [NOTICE]
    assert reply.body == {"facts": []}


def test_notices_only_under_meta_are_still_read() -> None:
    reply = _reply_of(_result({"facts": []}, {"fleetmem/notices": [NOTICE]}))
    assert reply.notices == [NOTICE] and reply.body == {"facts": []}


def test_an_error_envelope_keeps_its_own_notices() -> None:
    env = {"code": "invalid_params", "notices": [NOTICE]}
    reply = _reply_of(_result(env, is_error=True))
    assert reply.is_error and reply.body["notices"] == [NOTICE]
