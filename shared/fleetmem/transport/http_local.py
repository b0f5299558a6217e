"""`fleetmem serve`: the MCP app under uvicorn on the embedded (local) backend.

Every request verifies its bearer token against the client store (no cache), so `fleetmem token
create/revoke` run from another terminal against the same data directory take effect at once.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import uvicorn

from fleetmem.config import Settings
from fleetmem.ports import Deps
from fleetmem.protocol import Surface
from fleetmem.transport.logs import configure_logging
from fleetmem.transport.mcp_app import MCP_PATH, bearer_caller, build_mcp_app
from fleetmem.wiring import build_auth


def build_local_app(
    deps_factory: Callable[[], Deps],
    *,
    surface: Surface = "full",
    authorization_server: str | None = None,
    host: str = "127.0.0.1",
) -> Any:
    """The app `fleetmem serve` runs: bearer tokens from the local client store, in-process dispatch."""
    return build_mcp_app(
        deps_factory,
        surface=surface,
        caller_from_request=bearer_caller(lambda: build_auth(deps_factory())),
        authorization_server=authorization_server or None,
        host=host,
    )


def banner(settings: Settings, url: str) -> str:
    return "\n".join(
        [
            f"fleetmem MCP server on {url}{MCP_PATH}",
            f"  surface: {settings.surface}, data: {settings.data_dir}",
            "Get a token (works while the server runs):",
            f"  fleetmem token create --client NAME --scopes read,write --data-dir {settings.data_dir}",
            "Connect a client, e.g.:",
            f"  claude mcp add --transport http fleetmem {url}{MCP_PATH} "
            '--header "Authorization: Bearer <token>"',
            f"Health: {url}/health",
        ]
    )


def run_server(settings: Settings, *, out: TextIO | None = None) -> None:
    """Serve until interrupted (Ctrl-C)."""
    from fleetmem.wiring import build_deps

    configure_logging()
    deps = build_deps(settings)
    app = build_local_app(
        lambda: deps,
        surface=settings.surface,
        authorization_server=settings.authorization_server,
        host=settings.host,
    )
    host = settings.host
    url_host = f"[{host}]" if ":" in host else host
    print(banner(settings, f"http://{url_host}:{settings.port}"), file=out or sys.stdout, flush=True)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", lifespan="on")


class _SignallingServer(uvicorn.Server):
    """Sets an event once the socket is listening, so callers wait on readiness, not on time."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


@contextmanager
def serve_in_thread(app: Any, *, host: str = "127.0.0.1", timeout: float = 20.0) -> Iterator[str]:
    """Serve `app` on a free port of `host` in a background thread; yields the base URL and stops the
    server on exit. For tests, the conformance runner and the bench."""
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose listener
    # declares TCP, and without it every keep-alive response waits ~40 ms on delayed ACKs.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    server = _SignallingServer(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=f"fleetmem-http-{port}"
    )
    thread.start()
    try:
        if not server.ready.wait(timeout):
            raise RuntimeError(f"server on {host}:{port} did not start within {timeout} s")
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
