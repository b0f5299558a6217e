"""`fleetmem console --profile NAME [--port N] [--no-open]`: the memory console on this machine,
against a deployed stage (docs/console.md).

The profile names the stage's MCP URL and a token file (`fleetmem.remote.resolve_endpoint`); the
console calls the stage's `/v1` (the URL without its `/mcp`) with the token the browser signs in
with. The token is checked with `whoami` before anything is served, and the browser signs in through
a one-time ticket printed as a URL (valid once, 60 s): the token itself never appears in a URL. The
console listens on 127.0.0.1 only and answers only requests addressed to a loopback name (the same
DNS-rebinding protection `fleetmem serve` applies).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import webbrowser
from typing import Any

from fleetmem.cli.framework import Parser
from fleetmem.console import EXIT_OK, CommandFailed, Output
from fleetmem.contract.routes import CONSOLE_PATH, MCP_PATH

HOST = "127.0.0.1"


def add_commands(sub: Any, common: Parser) -> None:
    p = sub.add_parser(
        "console", parents=[common], help="open the memory console on this machine against a profile's stage"
    )
    p.add_argument("--profile", required=True, metavar="NAME", help="the saved endpoint (fleetmem profile add)")
    p.add_argument("--port", type=int, default=0, metavar="N", help="port on 127.0.0.1 (default 0: a free one)")
    p.add_argument("--no-open", action="store_true", help="print the sign-in URL without opening a browser")
    p.set_defaults(handler=cmd_console)


def stage_base(url: str) -> str:
    """The stage's API base: its MCP URL without the `/mcp` suffix."""
    base = url.rstrip("/")
    return base[: -len(MCP_PATH)] if base.endswith(MCP_PATH) else base


def _check(base: str, token: str) -> dict[str, Any]:
    from fleetmem.web import ToolClient, ToolFailed

    async def ask() -> dict[str, Any]:
        client = ToolClient.remote(base)
        try:
            return await client.call(token, "whoami", {})
        finally:
            await client.aclose()

    try:
        return asyncio.run(ask())
    except ToolFailed as exc:
        raise CommandFailed(
            exc.code if exc.code in {"unauthorized", "unavailable"} else "unavailable",
            f"The stage at {base} refused the profile's token: {exc.message}",
            "Check the profile's token file (fleetmem profile list) and the stage URL.",
        ) from None


def loopback_only(app: Any) -> Any:
    """`app` behind the Host and Origin checks of a loopback server (421 / 403 otherwise)."""
    from mcp.server.transport_security import TransportSecurityMiddleware
    from starlette.requests import Request

    from fleetmem.transport.guard import LOOPBACK_SECURITY
    from fleetmem.transport.refusals import status_refusal

    security = TransportSecurityMiddleware(LOOPBACK_SECURITY)

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            request = Request(scope, receive)
            foreign = await security.validate_request(request)
            if foreign is not None:
                await status_refusal(foreign.status_code, request.method, scope.get("path", ""))(scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded


def build_app(console: Any) -> Any:
    """The console at /console (and / sending there), behind the loopback checks."""
    from starlette.applications import Starlette
    from starlette.responses import RedirectResponse
    from starlette.routing import Mount, Route

    async def home(request: Any) -> RedirectResponse:
        return RedirectResponse(f"{CONSOLE_PATH}/", status_code=303)

    return loopback_only(Starlette(routes=[Route("/", home), Mount(CONSOLE_PATH, app=console.app())]))


def cmd_console(args: argparse.Namespace, out: Output) -> int:
    import uvicorn

    from fleetmem.remote import resolve_endpoint
    from fleetmem.web import Console, ToolClient

    endpoint = resolve_endpoint(url=None, token_file=None, profile=args.profile)
    assert endpoint is not None
    base = stage_base(endpoint.url)
    who = _check(base, endpoint.token)
    if not 0 <= args.port <= 65535:
        raise CommandFailed.usage(f"--port {args.port} is not a port.", "Pass --port 0 for a free one, or 1..65535.")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, args.port))
    except OSError as exc:
        sock.close()
        raise CommandFailed(
            "port_unavailable",
            f"Cannot listen on {HOST}:{args.port}: {exc.strerror}",
            "Pass another --port, or --port 0 for a free one.",
        ) from None
    sock.listen(128)  # connections wait in the backlog until uvicorn starts accepting
    port = sock.getsockname()[1]
    console = Console(ToolClient.remote(base))
    url = f"http://{HOST}:{port}{CONSOLE_PATH}/login?ticket={console.sessions.ticket(endpoint.token)}"
    print(
        f"fleetmem console for {base} as {who.get('client_id')} (tenant {who.get('tenant')}, "
        f"scopes {', '.join(who.get('scopes') or [])})\n"
        f"Sign in (this link works once, within 60 s): {url}\nStop with Ctrl-C.",
        flush=True,
    )
    if not args.no_open:
        webbrowser.open(url)
    config = uvicorn.Config(build_app(console), log_level="warning", lifespan="off")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    print("fleetmem console stopped.", file=sys.stderr)
    return EXIT_OK
