"""A tool function (one per verb; `pages` and `admin` serve several tools): the edge's signed invoke
payload, or a `POST /v1/<tool>` proxy event whose caller the authorizer vouched for (its context
signed with the stage key, `authorizer.vouched_event`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from fleetmem.contract.correlation import new_correlation_id
from fleetmem.contract.routes import v1_tool_path
from fleetmem.contract.status import CORRELATION_HEADER
from fleetmem.errors import VerbError
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.aws_lambda import runtime
from fleetmem.transport.aws_lambda.proxy import event_body, event_headers, is_proxy_event, proxy_response, request_id
from fleetmem.transport.gateway import caller_from_authorizer

log = logging.getLogger("fleetmem.lambda")


def handle_tool_event(event: Mapping[str, Any], tools: Iterable[str], deps: Deps | None = None) -> dict[str, Any]:
    """Serve one call for a function that owns `tools`: the edge's invoke payload, or a
    `POST /v1/<tool>` proxy event. A tool this function does not own is `unknown_tool`."""
    owned = frozenset(tools)
    if is_proxy_event(event):
        return _handle_v1(event, owned, deps)
    from fleetmem.transport.invoker import handle_invoke_payload

    if not _signed_by_the_edge(event):
        return _refused_json(str(event.get("tool") or ""), event.get("correlation_id"))
    if event.get("tool") not in owned:
        # The edge routes by the same table; anything else is a misrouted payload.
        return _unknown_tool_json(str(event.get("tool") or ""), event.get("correlation_id"))
    return handle_invoke_payload(event, deps or runtime.get_deps())


def _signed_by_the_edge(event: Mapping[str, Any]) -> bool:
    """Only the edge can sign an invoke payload; without a configured key nothing is accepted
    (fail closed: the tenant and scopes in the payload are trusted only when signed)."""
    s = runtime.signer()
    if not s.configured:
        log.error("no invoke signing secret configured", extra={"event": "invoke_unsigned_config"})
        return False
    try:
        ok = bool(s.verify(event))
    except Exception as exc:
        log.error("signing secret unreadable", extra={"event": "invoke_secret_error", "exc_type": type(exc).__name__})
        return False
    if not ok:
        log.warning("invoke payload refused", extra={"event": "invoke_signature_refused"})
    return ok


def _refused_json(tool: str, correlation_id: str | None) -> dict[str, Any]:
    return _error_json(
        VerbError(
            "unauthorized",
            "This invocation does not carry a valid signature from the MCP edge.",
            "Call the tool through the MCP endpoint or POST /v1/<tool> with a bearer token.",
        ),
        tool,
        correlation_id,
    )


def _unknown_tool_json(tool: str, correlation_id: str | None) -> dict[str, Any]:
    return _error_json(
        VerbError(
            "unknown_tool",
            "This function does not serve that tool.",
            "Call tools/list and use one of the tools it names.",
        ),
        tool,
        correlation_id,
    )


def _error_json(err: VerbError, tool: str, correlation_id: str | None) -> dict[str, Any]:
    from fleetmem.contract.result import error_result

    cid = correlation_id or new_correlation_id()
    return error_result(err, tool=tool, correlation_id=cid, transport="mcp").to_json()


def _handle_v1(event: Mapping[str, Any], owned: frozenset[str], deps: Deps | None) -> dict[str, Any]:
    """`POST /v1/<tool>` behind the authorizer: the gateway's checks (method, Content-Type, the
    vouched caller, a tool this function owns), then `http_api.answer_v1`, the handler the local
    server runs too, over this function's `dispatch`."""
    from fleetmem.contract.result import DispatchResult, error_result
    from fleetmem.transport.dispatch import dispatch
    from fleetmem.transport.http_api import answer_v1, is_json_content_type, not_json_error, v1_answer

    cid = request_id(event) or new_correlation_id()
    tool = (event.get("pathParameters") or {}).get("tool") or str(event.get("path") or "").rstrip("/").rsplit("/", 1)[
        -1
    ]

    def refuse(err: VerbError, extra: Mapping[str, str] | None = None) -> dict[str, Any]:
        status, body, headers = v1_answer(error_result(err, tool=tool, correlation_id=cid, transport="http"))
        return proxy_response(status, body, {**headers, **(extra or {})})

    if event.get("httpMethod") != "POST":
        return _method_not_allowed(tool, cid)
    if not is_json_content_type(event_headers(event).get("content-type")):
        return refuse(not_json_error(f"POST /v1/{tool[:64]}"))  # the local server's rule too
    from fleetmem.transport.aws_lambda.authorizer import vouched_event

    caller = caller_from_authorizer(vouched_event(event))
    if caller is None:
        return refuse(
            VerbError(
                "unauthorized",
                "No authenticated caller reached this function.",
                "Send `Authorization: Bearer <token>` with a valid fleetmem credential.",
            ),
            {"WWW-Authenticate": 'Bearer realm="fleetmem"'},
        )
    if tool not in owned:
        return refuse(
            VerbError(
                "unknown_tool",
                f"No tool {tool[:64]!r} at this route.",
                "POST to /v1/<tool> with a tool name from GET /v1/tools.",
            )
        )
    surface = runtime.settings().surface

    def call(tool: str, arguments: Any, caller: Caller, cid: str) -> DispatchResult:
        return dispatch(
            tool, arguments, caller, deps or runtime.get_deps(), surface=surface, correlation_id=cid, transport="http"
        )

    return proxy_response(*answer_v1(tool, event_body(event), caller, call, surface=surface, correlation_id=cid))


def _method_not_allowed(tool: str, cid: str) -> dict[str, Any]:
    from fleetmem.contract.result import error_result

    err = VerbError(
        "invalid_params",
        f"{v1_tool_path(tool[:64])} answers POST only.",
        "Send the tool's arguments as a JSON object with POST /v1/<tool>.",
    )
    body = error_result(err, tool="", correlation_id=cid, transport="http").body
    return proxy_response(405, body, {"Allow": "POST", CORRELATION_HEADER: cid})
