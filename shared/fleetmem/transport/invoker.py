"""How the MCP edge reaches `dispatch()`: in this process (local server, tests) or through one
Lambda function per verb (AWS).

Both answer `invoke(tool, arguments, caller, correlation_id) -> DispatchResult`, so the MCP app
does not know which one it has.

The Lambda payload is `{tool, arguments, caller: {tenant, client_id, scopes, remote}, surface,
correlation_id}` (signed by the edge: `fleetmem.adapters.aws.invoker`); a verb function answers
with `handle_invoke_payload(payload, deps)`, i.e. the `DispatchResult.to_json()` of the same
`dispatch()` the local server runs. `LambdaInvoker` lives with the AWS adapters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.protocol import Surface
from fleetmem.transport.dispatch import DispatchResult, dispatch


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
