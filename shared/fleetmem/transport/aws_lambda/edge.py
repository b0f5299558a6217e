"""The MCP edge: a REST proxy event through a freshly built MCP app whose tools/call invokes each
verb's own function (signed payloads, `fleetmem.adapters.aws.invoker`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetmem.transport.aws_lambda import runtime
from fleetmem.transport.aws_lambda.proxy import call_asgi, event_headers


def handle_edge_event(event: Mapping[str, Any], *, invoker: Any = None) -> dict[str, Any]:
    """A REST proxy event through a freshly built MCP app (the SDK's session manager runs once
    per app instance, so each invocation gets its own; building it costs a few ms)."""
    import anyio

    from fleetmem.transport.aws_lambda.authorizer import vouched_event

    return anyio.run(_edge_async, vouched_event(event), invoker or runtime.edge_invoker())


def public_url(event: Mapping[str, Any]) -> str:
    configured = runtime.settings().public_url
    if configured:
        return configured
    ctx = event.get("requestContext") or {}
    host = ctx.get("domainName") or event_headers(event).get("host") or "localhost"
    stage = ctx.get("stage")
    # execute-api hostnames carry the stage in the path; custom domains map it away.
    if stage and ".execute-api." in host:
        return f"https://{host}/{stage}"
    return f"https://{host}"


async def _edge_async(event: Mapping[str, Any], invoker: Any) -> dict[str, Any]:
    from fleetmem.transport.aws_lambda.proxy import AWS_TOKEN_COMMAND
    from fleetmem.transport.mcp_app import build_mcp_app, gateway_caller

    s = runtime.settings()
    app = build_mcp_app(
        None,
        surface=s.surface,
        invoker=invoker,
        behind_gateway=True,
        caller_from_request=gateway_caller,
        authorization_server=s.authorization_server or None,
        public_url=public_url(event),
        token_command=AWS_TOKEN_COMMAND,  # its 401 and scope_denied fixes mint in the deployed stage
    )
    async with app.router.lifespan_context(app):
        return await call_asgi(app, event)
