"""JSON-RPC refusals of a `POST /mcp` body, answered before the SDK sees it: what the SDK would drop
or explain badly (an unpaired surrogate escape, an id that is neither a string nor an integer, an
unknown `MCP-Protocol-Version`, `initialize` in the stateless era, a 2026-07-28 request without its
`Mcp-Method` / `Mcp-Name` header, which the SDK reports as a mismatch)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse, Response

from fleetmem.transport.errors import unencodable_path

#: Every protocol version POST /mcp serves (both eras).
SERVED_PROTOCOL_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_ID_KINDS = {dict: "an object", list: "an array", bool: "a boolean", float: "a number with a fraction or exponent"}


def _jsonrpc_error(request_id: Any, code: int, message: str, data: Any = None) -> Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return JSONResponse(body, status_code=ERROR_CODE_HTTP_STATUS.get(code, 200))


def _valid_id(value: Any) -> bool:
    """MCP: a request id is a string or an integer, never null (the SDK drops `1.0` as well)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def jsonrpc_refusal(raw: bytes, headers: Mapping[str, str]) -> Response | None:
    """The JSON-RPC error for a POST /mcp body the SDK would drop or explain badly, else None
    (then the SDK answers, including malformed JSON: -32700)."""
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if _SURROGATE_ESCAPE.search(raw):
        where = unencodable_path(message)
        if where is not None:
            at = where if isinstance(message, dict | list) else "the body"
            return _jsonrpc_error(
                None,
                types.PARSE_ERROR,
                f"Parse error: the string at {at} holds an unpaired UTF-16 surrogate escape (a \\ud800-"
                "\\udfff escape without its partner), which is not Unicode text. Send the text as UTF-8, "
                "write a character beyond U+FFFF as a surrogate pair (e.g. \\ud83d\\ude00), or replace "
                "the broken character with U+FFFD.",
                {"reason": "unpaired_surrogate", "path": at},
            )
    if not isinstance(message, dict):
        return None  # a batch or a bare value: the SDK's Invalid Request
    if "id" in message and not _valid_id(message["id"]):
        kind = "null" if message["id"] is None else _ID_KINDS.get(type(message["id"]), "not a string")
        return _jsonrpc_error(
            None,
            types.INVALID_REQUEST,
            f"Invalid Request: the request id is {kind}; an MCP request id is a string or an integer "
            '(never null, a boolean, an object, an array or a number like 1.5 or 1.0). Send e.g. "id": 1, or leave '
            "the id out for a notification.",
        )
    request_id = message.get("id")
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    if version is not None and version not in SERVED_PROTOCOL_VERSIONS:
        return _jsonrpc_error(
            request_id,
            types.UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported protocol version {version[:40]!r} in the MCP-Protocol-Version header. This "
            f"server speaks {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)} (initialize handshake) and "
            f"{', '.join(MODERN_PROTOCOL_VERSIONS)} (stateless: server/discover, _meta on every "
            "request). Send one of these, or leave the header out before the handshake.",
            {"supported": list(SERVED_PROTOCOL_VERSIONS), "requested": version},
        )
    if version in MODERN_PROTOCOL_VERSIONS and message.get("method") == "initialize":
        return _jsonrpc_error(
            request_id,
            types.METHOD_NOT_FOUND,
            f"Method not found: initialize is not a method of protocol {version}, which has no handshake. "
            "A client of that era starts with server/discover and sends params._meta (protocol version "
            "and client capabilities) on every request; a handshake client sends initialize with "
            f"MCP-Protocol-Version {HANDSHAKE_PROTOCOL_VERSIONS[-1]} (or without that header).",
            "initialize",
        )
    if version in MODERN_PROTOCOL_VERSIONS and "id" in message:
        return _missing_routing_header(message, headers)
    return None


def _missing_routing_header(message: dict[str, Any], headers: Mapping[str, str]) -> Response | None:
    """A 2026-07-28 request repeats its method (and a tool call its tool's name) in a header; the
    SDK answers an absent one as "does not match", which sends a client looking for a difference
    that is not there. Only a request the SDK would check (its `params._meta` is an object)."""
    params = message.get("params")
    method = message.get("method")
    if not isinstance(params, dict) or not isinstance(params.get("_meta"), dict) or not isinstance(method, str):
        return None
    if headers.get(MCP_METHOD_HEADER) is None:
        return _jsonrpc_error(
            message.get("id"),
            types.HEADER_MISMATCH,
            f"Missing Mcp-Method header: a {MODERN_PROTOCOL_VERSIONS[-1]} request names its method in "
            f"the Mcp-Method header as well as in the body. Add the header `Mcp-Method: {method[:80]}` "
            "(an MCP SDK of that protocol version sends it itself).",
            {"reason": "missing_header", "header": "Mcp-Method", "expected": method[:80]},
        )
    name_key = NAME_BEARING_METHODS.get(method)
    name = params.get(name_key) if name_key else None
    if isinstance(name, str) and headers.get(MCP_NAME_HEADER) is None:
        return _jsonrpc_error(
            message.get("id"),
            types.HEADER_MISMATCH,
            f"Missing Mcp-Name header: a {MODERN_PROTOCOL_VERSIONS[-1]} {method} request names its "
            f"params.{name_key} in the Mcp-Name header as well as in the body. Add the header "
            f"`Mcp-Name: {name[:80]}` (an MCP SDK of that protocol version sends it itself).",
            {"reason": "missing_header", "header": "Mcp-Name", "expected": name[:80]},
        )
    return None
