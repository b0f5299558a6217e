"""A tool function (one per verb; `pages` and `admin` serve several tools): the edge's signed invoke
payload, or a `POST /v1/<tool>` proxy event whose caller the authorizer vouched for (its context
signed with the stage key, `authorizer.vouched_event`).

One way through for both: `read_tool_event` turns the event into the call it asks for (tool,
arguments, caller: `invoker.ReceivedCall`) or the refusal that answers it instead; the call runs
through the one `dispatch()` (`run_tool_call`); `function_answer` turns the result into the function's
answer (the invoke payload's `DispatchResult.to_json()`, or the proxy response of `http_api.v1_response`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetmem.contract.correlation import new_correlation_id
from fleetmem.contract.result import DispatchResult, error_result
from fleetmem.contract.routes import V1_TRANSPORT, v1_tool_path
from fleetmem.errors import VerbError
from fleetmem.ports import Deps
from fleetmem.protocol import Transport
from fleetmem.transport.aws_lambda import runtime
from fleetmem.transport.aws_lambda.proxy import event_body, event_headers, is_proxy_event, proxy_response, request_id
from fleetmem.transport.gateway import caller_from_authorizer
from fleetmem.transport.invoker import ReceivedCall

log = logging.getLogger("fleetmem.lambda")


@dataclass(frozen=True)
class Refusal:
    """The answer to an event that asks for no call this function runs: `err` as the envelope,
    with the status and headers of its own on `/v1` (405's `Allow`, 401's challenge)."""

    err: VerbError
    tool: str
    correlation_id: str
    transport: Transport
    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def result(self) -> DispatchResult:
        return error_result(self.err, tool=self.tool, correlation_id=self.correlation_id, transport=self.transport)


def handle_tool_event(event: Mapping[str, Any], tools: Iterable[str], deps: Deps | None = None) -> dict[str, Any]:
    """Serve one call for a function that owns `tools`: the edge's invoke payload, or a
    `POST /v1/<tool>` proxy event. A tool this function does not own is `unknown_tool`."""
    call = read_tool_event(event, frozenset(tools))
    result = run_tool_call(call, deps)
    return function_answer(call, result)


def read_tool_event(event: Mapping[str, Any], owned: frozenset[str]) -> ReceivedCall | Refusal:
    """THE one place an event becomes a call: the invoke payload the edge signed, or the proxy
    event with the caller the authorizer vouched for and its body as the tool's arguments."""
    if is_proxy_event(event):
        return _read_v1(event, owned)
    tool, cid = str(event.get("tool") or ""), event.get("correlation_id")
    if not _signed_by_the_edge(event):
        return Refusal(NOT_SIGNED, tool, cid or new_correlation_id(), "mcp")
    if tool not in owned:
        # The edge routes by the same table; anything else is a misrouted payload.
        return Refusal(NOT_OWNED, tool, cid or new_correlation_id(), "mcp")
    return ReceivedCall.from_payload(event)


def run_tool_call(call: ReceivedCall | Refusal, deps: Deps | None) -> DispatchResult:
    """The refusal's envelope, or the call through `dispatch()`; on `/v1` an exception is the
    `internal` answer, as on the local server (`dispatch.guarded`); an invoke lets it fail the
    function (the edge answers)."""
    if isinstance(call, Refusal):
        return call.result()
    if call.transport == "mcp":
        return call.dispatch_on(deps or runtime.get_deps())
    from fleetmem.transport.dispatch import guarded

    def run_call() -> DispatchResult:
        return call.dispatch_on(deps or runtime.get_deps())

    return guarded(run_call, call.tool, call.correlation_id or "", transport=V1_TRANSPORT, event="edge_internal_error")


def function_answer(call: ReceivedCall | Refusal, result: DispatchResult) -> dict[str, Any]:
    """THE one place a result becomes this function's answer: on `/v1` the proxy response of
    `http_api.v1_response` (a refusal with its own status and headers), else the invoke answer."""
    if call.transport == V1_TRANSPORT:
        from fleetmem.transport.http_api import v1_response

        if isinstance(call, Refusal):
            status, body, headers = v1_response(result)
            return proxy_response(call.status or status, body, {**headers, **call.headers})
        from fleetmem.memory.registry import tools_for

        callable_tools = {s.name for s in tools_for(call.surface, call.caller)}
        return proxy_response(*v1_response(result, callable_tools=callable_tools))
    return result.to_json()


NOT_SIGNED = VerbError(
    "unauthorized",
    "This invocation does not carry a valid signature from the MCP edge.",
    "Call the tool through the MCP endpoint or POST /v1/<tool> with a bearer token.",
)
NOT_OWNED = VerbError(
    "unknown_tool",
    "This function does not serve that tool.",
    "Call tools/list and use one of the tools it names.",
)
NO_CALLER = VerbError(
    "unauthorized",
    "No authenticated caller reached this function.",
    "Send `Authorization: Bearer <token>` with a valid fleetmem credential.",
)


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


def _read_v1(event: Mapping[str, Any], owned: frozenset[str]) -> ReceivedCall | Refusal:
    """`POST /v1/<tool>` behind the authorizer: the gateway's checks (method, Content-Type, the
    vouched caller, a tool this function owns) and the body as the tool's arguments, each refusal
    the local server's too (`http_api`)."""
    from fleetmem.transport.aws_lambda.authorizer import vouched_event
    from fleetmem.transport.http_api import is_json_content_type, not_json_error, read_arguments

    cid = request_id(event) or new_correlation_id()
    path_tool = (event.get("pathParameters") or {}).get("tool")
    tool = path_tool or str(event.get("path") or "").rstrip("/").rsplit("/", 1)[-1]
    if event.get("httpMethod") != "POST":
        err = VerbError(
            "invalid_params",
            f"{v1_tool_path(tool[:64])} answers POST only.",
            "Send the tool's arguments as a JSON object with POST /v1/<tool>.",
        )
        return Refusal(err, "", cid, V1_TRANSPORT, status=405, headers={"Allow": "POST"})
    if not is_json_content_type(event_headers(event).get("content-type")):
        return Refusal(not_json_error(f"POST /v1/{tool[:64]}"), tool, cid, V1_TRANSPORT)
    caller = caller_from_authorizer(vouched_event(event))
    if caller is None:
        return Refusal(NO_CALLER, tool, cid, V1_TRANSPORT, headers={"WWW-Authenticate": 'Bearer realm="fleetmem"'})
    if tool not in owned:
        err = VerbError(
            "unknown_tool",
            f"No tool {tool[:64]!r} at this route.",
            "POST to /v1/<tool> with a tool name from GET /v1/tools.",
        )
        return Refusal(err, tool, cid, V1_TRANSPORT)
    try:
        arguments = read_arguments(tool, event_body(event))
    except VerbError as err:
        return Refusal(err, tool, cid, V1_TRANSPORT)
    return ReceivedCall(tool, arguments, caller, runtime.settings().surface, cid, transport=V1_TRANSPORT)
