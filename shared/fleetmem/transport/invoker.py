"""How the MCP edge reaches `dispatch()`: in this process (local server, tests) or through one
Lambda function per verb (AWS).

Both answer `invoke(tool, arguments, caller, correlation_id) -> DispatchResult`, so the MCP app
does not know which one it has.

The Lambda payload is `{tool, arguments, caller: {tenant, client_id, scopes, remote}, surface,
correlation_id}`; a verb function answers with `handle_invoke_payload(payload, deps)`, i.e. the
`DispatchResult.to_json()` of the same `dispatch()` the local server runs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from fleetmem.errors import Fix, VerbError
from fleetmem.memory.envelope import build_envelope, internal_envelope
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.protocol import Surface
from fleetmem.transport.dispatch import DispatchResult, dispatch
from fleetmem.transport.logs import correlation

log = logging.getLogger("fleetmem.transport.invoker")


class Invoker(Protocol):
    def invoke(
        self, tool: str, arguments: dict[str, Any] | None, caller: Caller, correlation_id: str
    ) -> DispatchResult: ...


class InProcessInvoker:
    """Runs dispatch in this process over `deps_factory()` (called per call; cache it there)."""

    def __init__(
        self, deps_factory: Callable[[], Deps], *, surface: Surface = "full", transport: str = "mcp"
    ) -> None:
        self.deps_factory = deps_factory
        self.surface = surface
        self.transport = transport

    def invoke(
        self, tool: str, arguments: dict[str, Any] | None, caller: Caller, correlation_id: str
    ) -> DispatchResult:
        return dispatch(
            tool,
            arguments,
            caller,
            self.deps_factory(),
            surface=self.surface,
            correlation_id=correlation_id,
            transport=self.transport,
        )


def caller_to_json(caller: Caller) -> dict[str, Any]:
    return {
        "tenant": caller.tenant,
        "client_id": caller.client_id,
        "scopes": sorted(caller.scopes),
        "remote": caller.remote,
    }


def make_payload(
    tool: str, arguments: dict[str, Any] | None, caller: Caller, correlation_id: str, surface: Surface
) -> dict[str, Any]:
    return {
        "tool": tool,
        "arguments": arguments,
        "caller": caller_to_json(caller),
        "surface": surface,
        "correlation_id": correlation_id,
    }


def handle_invoke_payload(payload: Mapping[str, Any], deps: Deps) -> dict[str, Any]:
    """A verb function's whole job: the edge's payload in, `DispatchResult.to_json()` out.

    The caller was authenticated by the edge (the authorizer context); it is always remote here."""
    raw = payload.get("caller") or {}
    caller = Caller(
        tenant=str(raw["tenant"]),
        client_id=str(raw["client_id"]),
        scopes=frozenset(raw.get("scopes") or ()),
        remote=True,
    )
    surface: Surface = "verbs" if payload.get("surface") == "verbs" else "full"
    result = dispatch(
        str(payload.get("tool") or ""),
        payload.get("arguments"),
        caller,
        deps,
        surface=surface,
        correlation_id=payload.get("correlation_id") or None,
        transport="mcp",
    )
    return result.to_json()


#: Seconds to wait for a synchronous verb invocation (synthesize can take a minute).
INVOKE_READ_TIMEOUT = 150


class LambdaInvoker:
    """Invokes the verb's own function synchronously (RequestResponse).

    `client` is a boto3 Lambda client (built lazily on first use by the AWS adapters' client
    factory when not injected, so nothing connects at import or construction). A function error
    or an unreadable answer becomes the `internal` envelope; the function's error text is never
    relayed; a throttled invoke is `unavailable` with a wait fix."""

    def __init__(
        self,
        function_name_for: Callable[[str], str],
        *,
        client: Any = None,
        surface: Surface = "full",
        region: str | None = None,
    ) -> None:
        self.function_name_for = function_name_for
        self._client = client
        self.surface = surface
        self.region = region

    @property
    def client(self) -> Any:
        if self._client is None:
            # The AWS adapters own the SDK; their process-cached client factory is used here.
            from fleetmem.adapters.aws import sdk_client

            self._client = sdk_client("lambda", region=self.region or "", read_timeout=INVOKE_READ_TIMEOUT)
        return self._client

    def invoke(
        self, tool: str, arguments: dict[str, Any] | None, caller: Caller, correlation_id: str
    ) -> DispatchResult:
        with correlation(correlation_id):
            return self._invoke(tool, arguments, caller, correlation_id)

    def _invoke(
        self, tool: str, arguments: dict[str, Any] | None, caller: Caller, correlation_id: str
    ) -> DispatchResult:
        payload = make_payload(tool, arguments, caller, correlation_id, self.surface)
        try:
            response = self.client.invoke(
                FunctionName=self.function_name_for(tool),
                InvocationType="RequestResponse",
                Payload=json.dumps(payload).encode(),
            )
            raw = response["Payload"].read()
            if response.get("FunctionError"):
                log.error(
                    "verb function failed",
                    extra={
                        "event": "lambda_function_error",
                        "tool": tool[:64],
                        "function_error": str(response.get("FunctionError")),
                    },
                )
                return _internal(correlation_id, tool)
            return DispatchResult.from_json(json.loads(raw))
        except Exception as exc:
            code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code", "")
            if code in _THROTTLED:
                return _throttled(correlation_id, tool, arguments)
            log.error(
                "verb function unreachable",
                extra={"event": "lambda_invoke_failed", "tool": tool[:64], "exc_type": type(exc).__name__},
            )
            return _internal(correlation_id, tool)


_THROTTLED = frozenset({"TooManyRequestsException", "ThrottlingException", "EC2ThrottledException"})
THROTTLE_RETRY_SECONDS = 1


def _throttled(correlation_id: str, tool: str, arguments: dict[str, Any] | None) -> DispatchResult:
    err = VerbError(
        "unavailable",
        f"The {tool} function is at its concurrency limit.",
        f"Wait {THROTTLE_RETRY_SECONDS} s, then retry the same call.",
        why="The platform throttled the invocation before it ran; nothing was done.",
        detail={"reason": "throttled"},
        fix=Fix(
            why="The same call after a short wait.",
            mcp={"tool": tool, "arguments": dict(arguments or {})},
            actor="provider",
            retry_after_seconds=THROTTLE_RETRY_SECONDS,
        ),
        retryable=True,
    )
    body = build_envelope(err, tool=tool, arguments=arguments, correlation_id=correlation_id, transport="mcp")
    return DispatchResult(body, True, [], correlation_id)


def _internal(correlation_id: str, tool: str) -> DispatchResult:
    return DispatchResult(internal_envelope(correlation_id, tool), True, [], correlation_id)
