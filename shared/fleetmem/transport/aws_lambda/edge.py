"""The MCP edge: a REST proxy event through the sandbox's MCP app, whose tools/call invokes each
verb's own function (signed payloads, `fleetmem.adapters.aws.invoker`).

The app, the SDK server and its session manager are built once per sandbox and reused by every
invocation: one event loop lives as long as the sandbox, and a keeper task holds the app's
lifespan (the SDK's session manager runs once per app) open on it between invocations. Nothing
about a caller is kept: the caller (from the authorizer context), the public URL and the request
id are read from each invocation's own event, in that request's ASGI scope."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from fleetmem.transport.aws_lambda import runtime
from fleetmem.transport.aws_lambda.proxy import call_asgi, event_headers

_T = TypeVar("_T")


def handle_edge_event(event: Mapping[str, Any], *, invoker: Any = None) -> dict[str, Any]:
    """A REST proxy event through the sandbox's MCP app."""
    from fleetmem.transport.aws_lambda.authorizer import vouched_event
    from fleetmem.transport.callers import PUBLIC_URL_SCOPE_KEY

    vouched = vouched_event(event)
    edge = _edge(invoker or runtime.edge_invoker())
    return edge.run(call_asgi(edge.app, vouched, extra_scope={PUBLIC_URL_SCOPE_KEY: public_url(vouched)}))


def public_url(event: Mapping[str, Any]) -> str:
    configured = runtime.edge_settings().public_url
    if configured:
        return configured
    ctx = event.get("requestContext") or {}
    host = ctx.get("domainName") or event_headers(event).get("host") or "localhost"
    stage = ctx.get("stage")
    # execute-api hostnames carry the stage in the path; custom domains map it away.
    if stage and ".execute-api." in host:
        return f"https://{host}/{stage}"
    return f"https://{host}"


class _Edge:
    """One MCP app with its lifespan held open on one event loop."""

    def __init__(self, settings: Any, invoker: Any) -> None:
        from fleetmem.transport.aws_lambda.proxy import AWS_TOKEN_COMMAND
        from fleetmem.transport.callers import gateway_caller
        from fleetmem.transport.mcp_app import build_mcp_app

        s = settings
        self.settings, self.invoker = settings, invoker
        self.app = build_mcp_app(
            None,
            surface=s.surface,
            invoker=invoker,
            behind_gateway=True,
            caller_from_request=gateway_caller,
            authorization_server=s.serve.authorization_server or None,
            token_command=AWS_TOKEN_COMMAND,  # its 401 and scope_denied fixes mint in the deployed stage
        )
        self.loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._ready = asyncio.Event()
        self._keeper = self.loop.create_task(self._hold_lifespan())
        self.loop.run_until_complete(self._ready.wait())

    async def _hold_lifespan(self) -> None:
        try:
            async with self.app.router.lifespan_context(self.app):
                self._ready.set()
                await self._stop.wait()
        finally:
            self._ready.set()  # a lifespan that failed to start must not leave the builder waiting

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        if self._keeper.done():
            coro.close()
            self._keeper.result()  # raises why the lifespan ended
            raise RuntimeError("the MCP app's lifespan has ended")
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        if not self.loop.is_closed():
            self._stop.set()
            self.loop.run_until_complete(asyncio.gather(self._keeper, return_exceptions=True))
            self.loop.close()


_EDGE: _Edge | None = None


def _edge(invoker: Any) -> _Edge:
    """The sandbox's edge, rebuilt only when its settings or invoker change (tests do)."""
    global _EDGE
    s = runtime.settings()
    if _EDGE is None or _EDGE.settings is not s or _EDGE.invoker is not invoker or _EDGE.loop.is_closed():
        if _EDGE is not None:
            _EDGE.close()
        _EDGE = _Edge(s, invoker)
    return _EDGE
