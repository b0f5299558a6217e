"""The `Invoker` port: how an edge reaches `dispatch()` — in its own process (local server, tests:
`fleetmem.transport.invoker.InProcessInvoker`) or through one Lambda function per verb (AWS:
`fleetmem.adapters.aws.invoker.LambdaInvoker`). Both answer `invoke(tool, arguments, caller,
correlation_id) -> DispatchResult`, so the MCP app does not know which one it has.

The invoke payload a verb function receives is `make_payload`'s `{tool, arguments, caller: {tenant,
client_id, scopes, remote}, surface, correlation_id}` (signed by the edge); the function answers
with the `DispatchResult.to_json()` of the same `dispatch()` the local server runs.
"""

from __future__ import annotations

from typing import Any, Protocol

from fleetmem.contract.result import DispatchResult
from fleetmem.models import Caller
from fleetmem.protocol import Surface


class Invoker(Protocol):
    def invoke(
        self, tool: str, arguments: dict[str, Any] | None, caller: Caller, correlation_id: str
    ) -> DispatchResult: ...


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
