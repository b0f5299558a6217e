"""The plain HTTP API beside MCP: `POST /v1/<tool>`, `GET /v1/tools` (and `GET /v1/openapi.json`,
whose document `fleetmem.transport.openapi` generates).

Both deployments answer it with the same pieces: the local server (`fleetmem serve`, routes added
to the MCP app in `mcp_app.build_mcp_app`) and the API on AWS (`POST /v1/{tool}` goes straight to
the tool's function, `transport.aws_lambda.tools`; `/v1/tools` and `/v1/openapi.json` to the edge
function, which runs the same app). Every call goes through the one `dispatch()`, every error is
the one envelope (`contract.envelope.ErrorEnvelope`), and this module is the ONE place that turns a
`DispatchResult` into an HTTP answer (`v1_response`) and the one handler of `POST /v1/<tool>`
(`handle_v1_call`); codes map to statuses in `fleetmem.contract.status`, paths in `contract.routes`.

Light at import (stdlib, pydantic and fleetmem's own contract modules): a tool function imports it
for `v1_response`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection
from functools import partial
from typing import Any

from fleetmem.contract.correlation import new_correlation_id
from fleetmem.contract.envelope import with_notices
from fleetmem.contract.result import DispatchResult, error_result
from fleetmem.contract.routes import V1_TRANSPORT, v1_tool_path
from fleetmem.contract.status import CORRELATION_HEADER, error_headers, status_for
from fleetmem.errors import Fix, VerbError
from fleetmem.models import Caller
from fleetmem.protocol import Surface

log = logging.getLogger("fleetmem.transport.http")

#: How `handle_v1_call` runs one call: `(tool, arguments, caller, correlation_id) -> DispatchResult`.
CallFn = Callable[[str, Any, Caller, str], DispatchResult]


def v1_response(
    result: DispatchResult, *, callable_tools: Collection[str] | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """THE mapping of one dispatch result to `(status, body, headers)` for `POST /v1/<tool>`.

    Success: 200 and the tool's body with its notices under `notices` when there are any (D28: the
    same document as MCP's `structuredContent`). Error: the envelope
    with its status (`status_for`). `X-Correlation-Id` on both."""
    body = dict(result.body)
    envelope = result.envelope
    if envelope is not None:
        return status_for(result.code), body, error_headers(envelope)
    body = with_notices(body, result.notices, V1_TRANSPORT, callable_tools=callable_tools)
    return 200, body, {CORRELATION_HEADER: result.correlation_id}


def handle_v1_call(
    tool: str,
    raw_body: bytes,
    caller: Caller,
    call: CallFn,
    *,
    surface: Surface,
    correlation_id: str | None = None,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """THE handler of `POST /v1/<tool>` for an authenticated caller, on the local server and on
    Lambda: the body parsed as the tool's arguments (a body that is not JSON is `invalid_params`),
    the call run by `call` (the deployment's way to `dispatch()`), the answer by `v1_response`. An
    exception of `call` is the `internal` answer (`dispatch.guarded`)."""
    from fleetmem.memory.registry import tools_for

    cid = correlation_id or new_correlation_id()
    try:
        arguments = read_arguments(tool, raw_body)
    except VerbError as err:
        return v1_response(error_result(err, tool=tool, correlation_id=cid, transport=V1_TRANSPORT))
    from fleetmem.transport.dispatch import guarded

    run = partial(call, tool, arguments, caller, cid)
    result = guarded(run, tool, cid, transport=V1_TRANSPORT, event="edge_internal_error")
    return v1_response(result, callable_tools={s.name for s in tools_for(surface, caller)})


def read_arguments(tool: str, raw_body: bytes) -> Any:
    """A `/v1` body as the tool's arguments; raises the `too_deep_body` refusal on a body nested
    deeper than `MAX_JSON_DEPTH` and the `not_json_body` refusal on a body that is not JSON (or not
    UTF-8)."""
    try:
        return parse_arguments(raw_body)
    except TooDeep:
        raise too_deep_body(tool) from None
    except ValueError:  # also a body that is not UTF-8
        raise not_json_body(tool) from None


def too_deep_body(tool: str) -> VerbError:
    """The refusal of a `/v1` body nested deeper than any tool's arguments are."""
    where = v1_tool_path(tool[:64])
    return VerbError(
        "invalid_params",
        f"The request body is nested deeper than {MAX_JSON_DEPTH} levels.",
        f"Problem: the body of POST {where} nests arrays or objects more than {MAX_JSON_DEPTH} levels deep. "
        "Cause: tool arguments are flat (a few levels at most), so such a body is never read. Fix: send the "
        "tool's arguments as one flat JSON object, as GET /v1/tools describes them.",
        detail={"reason": "too_deep", "max_depth": MAX_JSON_DEPTH},
        fix=Fix(why="Send the tool's arguments as one JSON object of the shape its inputSchema gives."),
        klass="caller",
    )


def not_json_body(tool: str) -> VerbError:
    """The refusal of a `/v1` body that is not one JSON object in UTF-8."""
    where = v1_tool_path(tool[:64])
    return VerbError(
        "invalid_params",
        "The request body is not valid JSON.",
        f"Problem: the body of POST {where} could not be parsed. Cause: it is not one "
        "JSON object in UTF-8. Fix: send the tool's arguments as a JSON object, e.g. {}.",
        fix=Fix(why="Send the tool's arguments as one JSON object with Content-Type: application/json."),
        klass="caller",
    )


def is_json_content_type(value: str | None) -> bool:
    """A `Content-Type` that declares JSON (`application/json`, any parameters)."""
    return (value or "").split(";", 1)[0].strip().lower() == "application/json"


def not_json_error(where: str) -> VerbError:
    """The refusal of a POST whose body is not declared as JSON (a form, text, nothing): every POST
    this server reads is JSON, on /mcp and /v1, locally and on AWS."""
    return VerbError(
        "invalid_params",
        f"{where} needs `Content-Type: application/json`.",
        "Problem: the request body is not declared as JSON. Cause: every POST to this server (MCP's "
        "JSON-RPC messages and /v1 tool arguments) is a JSON body, and a form or text body is never "
        "read as one. Fix: send `Content-Type: application/json`.",
        fix=Fix(why="Send the JSON body with `Content-Type: application/json`."),
        klass="caller",
    )


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("a number too large for JSON")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: The deepest nesting of arrays and objects a `/v1` body may have. Tool arguments nest three levels
#: at most (put_page's `links`: object, list, object); a body far deeper would only reach the
#: recursion limit of the parser or of the code that reads the arguments (an `internal` answer, or
#: none at all), so it is refused up front.
MAX_JSON_DEPTH = 32


class TooDeep(ValueError):
    """A JSON text nested deeper than `MAX_JSON_DEPTH`."""


def _depth_over(value: Any, limit: int) -> bool:
    """True when `value` nests arrays/objects more than `limit` levels deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def parse_arguments(raw: bytes) -> Any:
    """The request body as JSON (empty: `{}`); raises ValueError on anything RFC 8259 does not
    allow, including `NaN`/`Infinity` and numbers that overflow to infinity, which Python's parser
    would otherwise accept and no JSON answer could echo back, and `TooDeep` (a ValueError) on a body
    nested deeper than `MAX_JSON_DEPTH` — also when it is too deep for the parser itself
    (`RecursionError`, which is not a ValueError)."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw, parse_float=_finite, parse_constant=_no_constant)
    except RecursionError:
        raise TooDeep(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    if _depth_over(value, MAX_JSON_DEPTH):
        raise TooDeep(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def render_json(body: Any) -> bytes:
    """A JSON answer's bytes: UTF-8, with JSON escapes where a string cannot travel as UTF-8."""
    text = json.dumps(body, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body).encode()


def tools_document(surface: Surface, caller: Any) -> dict[str, Any]:
    """`GET /v1/tools`: exactly MCP tools/list's result for this caller on this surface."""
    from fleetmem.transport.listing import list_tool_definitions

    tools = list_tool_definitions(surface, caller)
    return {"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]}
