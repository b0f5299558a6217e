"""Both ends of an `Invoker` (`fleetmem.contract.invoker`) that run `dispatch()`: `InProcessInvoker`
(local server, tests) and `ReceivedCall`, the call a verb function received (`handle_invoke_payload`:
its answer to the edge's invoke payload). `LambdaInvoker`, the edge's side on AWS, lives with the AWS adapters.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio.to_thread

from fleetmem.contract.invoker import Invoker
from fleetmem.contract.result import DispatchResult
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.protocol import Surface, Transport
from fleetmem.transport.dispatch import dispatch, precheck
from fleetmem.transport.quick_calls import QuickCalls

T = TypeVar("T")


@dataclass(frozen=True)
class EdgeCalls:
    """How an edge runs the calls it receives: through `invoker` on `surface`, at most `limiter`'s
    worth at once on worker threads (None: anyio's default), naming the server's own `token create`
    (`token_command`, its `<placeholders>` in `token_inputs`) in the fixes of a 401 or 403."""

    invoker: Invoker
    surface: Surface = "full"
    limiter: Any = None
    token_command: tuple[str, ...] = ()
    token_inputs: tuple[Mapping[str, str], ...] = ()
    quick: QuickCalls | None = None  # in-process only: proven-quick reads run on the event loop

    async def run(self, kind: Hashable | None, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on a worker thread (`limiter`), or inline when `quick` says its kind
        (`quick_calls.kind_of`) has proven quick."""
        if self.quick is not None:
            return await self.quick.run(kind, fn, *args, limiter=self.limiter)
        return await anyio.to_thread.run_sync(fn, *args, limiter=self.limiter)

    def gate(
        self, tool: str, arguments: Any, caller: Caller, correlation_id: str, *, transport: Transport = "mcp"
    ) -> DispatchResult | None:
        """`precheck` on this edge's surface, its fixes naming this server's `token create`."""
        return precheck(
            tool,
            arguments,
            caller,
            surface=self.surface,
            correlation_id=correlation_id,
            transport=transport,
            token_command=self.token_command,
            token_inputs=self.token_inputs,
        )


class InProcessInvoker:
    """Runs dispatch in this process over `deps_factory()` (called per call; cache it there)."""

    def __init__(
        self, deps_factory: Callable[[], Deps], *, surface: Surface = "full", transport: Transport = "mcp"
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


@dataclass(frozen=True)
class ReceivedCall:
    """One call a verb function received, in `dispatch()`'s terms: from the edge's invoke payload
    (`from_payload`; its caller was authenticated by the edge and is always remote) or from a
    `POST /v1/<tool>` event (`transport.aws_lambda.tools`)."""

    tool: str
    arguments: Any
    caller: Caller
    surface: Surface
    correlation_id: str | None
    transport: Transport = "mcp"

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> ReceivedCall:
        raw = payload.get("caller") or {}
        caller = Caller(
            tenant=str(raw["tenant"]),
            client_id=str(raw["client_id"]),
            scopes=frozenset(raw.get("scopes") or ()),
            remote=True,
        )
        surface: Surface = "verbs" if payload.get("surface") == "verbs" else "full"
        tool = str(payload.get("tool") or "")
        return cls(tool, payload.get("arguments"), caller, surface, payload.get("correlation_id") or None)

    def dispatch_on(self, deps: Deps) -> DispatchResult:
        """This call through `dispatch()` over `deps`."""
        return dispatch(
            self.tool,
            self.arguments,
            self.caller,
            deps,
            surface=self.surface,
            correlation_id=self.correlation_id,
            transport=self.transport,
        )


def handle_invoke_payload(payload: Mapping[str, Any], deps: Deps) -> dict[str, Any]:
    """A verb function's whole job: the edge's payload in, `DispatchResult.to_json()` out."""
    return ReceivedCall.from_payload(payload).dispatch_on(deps).to_json()
