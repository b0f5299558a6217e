"""Both ends of an `Invoker` (`fleetmem.contract.invoker`) that run `dispatch()`: `InProcessInvoker`
(local server, tests) and `handle_invoke_payload`, a verb function's answer to the edge's invoke
payload. `LambdaInvoker`, the edge's side on AWS, lives with the AWS adapters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fleetmem.contract.result import DispatchResult
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.protocol import Surface
from fleetmem.transport.dispatch import dispatch


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
