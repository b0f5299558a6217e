"""`fleetmem serve`: the MCP app under uvicorn on the embedded (local) backend.

Every request verifies its bearer token against the client store, on the event loop: the SQLite
store answers a repeated token from a lookup map that any commit to the file empties (its
`data_version`), so `fleetmem token create/revoke` run from another terminal against the same data
directory take effect from the very next request.

`run_server` binds the listening socket BEFORE it prints the banner or loads anything, so a port
that is taken fails at once with `PortUnavailable` (the CLI exits 1 with a clear message) and no
banner claims a server that never ran.

On SIGTERM (or Ctrl-C) the server stops accepting at once, gives the calls in flight
`SHUTDOWN_GRACE_S` to finish, then cancels the rest and exits 0 (`_BoundedShutdownServer`).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import json
import logging
import os
import shlex
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import uvicorn
from starlette.routing import BaseRoute

from fleetmem import invocation
from fleetmem.config import DEFAULT_CALL_THREADS, Settings
from fleetmem.contract.correlation import new_correlation_id
from fleetmem.contract.envelope import http_envelope
from fleetmem.contract.routes import CONSOLE_PATH, MCP_PATH
from fleetmem.contract.status import CORRELATION_HEADER
from fleetmem.errors import Fix, VerbError
from fleetmem.ports import Deps
from fleetmem.protocol import Surface
from fleetmem.transport.callers import bearer_caller
from fleetmem.transport.logs import configure_logging
from fleetmem.transport.mcp_app import build_mcp_app
from fleetmem.transport.refusals import DATA_DIR_HOW, DEFAULT_TOKEN_COMMAND
from fleetmem.wiring import build_auth

#: Routes to serve beside `/mcp` and `/v1`, given a way to reach the finished app.
Mounts = Callable[[Callable[[], Any]], Sequence[BaseRoute]]

log = logging.getLogger("fleetmem.transport.http_local")

#: `fleetmem serve` on SIGTERM/SIGINT: seconds the calls in flight get to finish before they are
#: cancelled (README, "Retries and idempotency").
SHUTDOWN_GRACE_S = 10
#: after the grace: time for the app's shutdown before the process exits regardless
SHUTDOWN_MARGIN_S = 2


class PortUnavailable(OSError):
    """The address cannot be bound (in use, not permitted, not a local address)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_command(data_dir: Path | None, host: str) -> tuple[list[str], list[dict[str, str]]]:
    """The command that mints a token this server accepts: `token create` on the SAME data
    directory. On a loopback bind an authenticated refusal's fix (scope_denied) names the directory;
    on any other bind it is an AGENT_OPERATOR input the operator fills in. A 401 never names it
    (`refusals.without_data_dir`)."""
    argv = list(DEFAULT_TOKEN_COMMAND)
    if data_dir is None:
        return argv, []
    if is_loopback(host):
        return [*argv, "--data-dir", str(data_dir)], []
    return [*argv, "--data-dir", "<data_dir>"], [{"name": "data_dir", "how": DATA_DIR_HOW}]


def build_local_app(
    deps_factory: Callable[[], Deps],
    *,
    surface: Surface = "full",
    authorization_server: str | None = None,
    host: str = "127.0.0.1",
    data_dir: Path | None = None,
    call_threads: int | None = DEFAULT_CALL_THREADS,
    extra_routes: Sequence[BaseRoute] = (),
    fast_calls: bool = True,
    quick_calls: bool = True,
) -> Any:
    """The app `fleetmem serve` runs: bearer tokens from the local client store, in-process dispatch.
    `data_dir` (the store the tokens live in) goes into the `token create` command of the 401 and
    scope_denied fixes."""
    argv, inputs = token_command(data_dir, host)
    return build_mcp_app(
        deps_factory,
        surface=surface,
        caller_from_request=bearer_caller(lambda: build_auth(deps_factory())),
        authorization_server=authorization_server or None,
        host=host,
        token_command=argv,
        token_inputs=inputs,
        call_threads=call_threads,
        extra_routes=extra_routes,
        fast_calls=fast_calls,
        quick_calls=quick_calls,
    )


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket bound to host:port (port 0 = a free one), or `PortUnavailable`."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise PortUnavailable(errno.EADDRNOTAVAIL, f"{host!r} is not a usable address ({exc})") from None
    family, kind, proto, _, address = infos[0]
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose listener
    # declares TCP, and without it every keep-alive response waits ~40 ms on delayed ACKs.
    sock = socket.socket(family, kind, proto or socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            why = "another process is already listening there"
        elif exc.errno == errno.EACCES:
            why = "this user may not bind that port"
        else:
            why = exc.strerror or "the system refused the address"
        raise PortUnavailable(exc.errno or 0, f"cannot listen on {host}:{port}: {why}") from None
    return sock


def banner(settings: Settings, url: str, *, new_store: bool = False, console: bool = False) -> str:
    fleetmem = shlex.join(invocation.command())
    data_dir = shlex.quote(str(settings.data_dir))
    return "\n".join(
        [
            f"fleetmem MCP server on {url}{MCP_PATH}",
            f"  surface: {settings.surface}, data: {settings.data_dir}"
            + (" (new: it held no fleetmem memory, so this one starts empty)" if new_store else ""),
            "Get a token (works while the server runs; the same --data-dir, or the token answers 401):",
            f"  {fleetmem} token create --client NAME --scopes read,write --data-dir {data_dir}",
            "Connect a client, e.g.:",
            f'  claude mcp add --transport http fleetmem {url}{MCP_PATH} --header "Authorization: Bearer <token>"',
            f"Health: {url}/health",
            *([f"Memory console (sign in with a token): {url}{CONSOLE_PATH}/"] if console else []),
        ]
    )


def run_server(settings: Settings, *, out: TextIO | None = None, mounts: Mounts | None = None) -> None:
    """Serve until interrupted (Ctrl-C). Raises `PortUnavailable` before printing anything when
    the address cannot be bound. `mounts` adds routes served beside `/mcp` and `/v1` (the memory
    console); it is given a way to reach the finished app."""
    from fleetmem.wiring import DB_FILENAME, build_deps

    sock = bind_socket(settings.serve.host, settings.serve.port)
    new_store = settings.backend == "local" and not (Path(settings.data_dir) / DB_FILENAME).is_file()
    try:
        configure_logging()
        deps = build_deps(settings)
        built: list[Any] = []
        app = build_local_app(
            lambda: deps,
            surface=settings.surface,
            authorization_server=settings.serve.authorization_server,
            host=settings.serve.host,
            data_dir=settings.data_dir,
            call_threads=settings.serve.call_threads,
            extra_routes=mounts(lambda: built[0]) if mounts else (),
        )
        built.append(app)
        host = settings.serve.host
        url_host = f"[{host}]" if ":" in host else host
        port = sock.getsockname()[1]
        shown = banner(settings, f"http://{url_host}:{port}", new_store=new_store, console=mounts is not None)
        print(shown, file=out or sys.stdout, flush=True)
        stopping = threading.Event()
        config = uvicorn.Config(
            _CutOffAnswers(app, stopping),
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        )
        # uvicorn raises the signal it stopped on again once it has shut down; with the default
        # handler that would end the process as killed (-15) after a clean stop.
        previous = signal.signal(signal.SIGTERM, lambda *_: None)
        try:
            _BoundedShutdownServer(config, stopping).run(sockets=[sock])
        finally:
            signal.signal(signal.SIGTERM, previous)
    finally:
        sock.close()


class _BoundedShutdownServer(uvicorn.Server):
    """uvicorn with a bounded stop. On the first SIGTERM/SIGINT uvicorn closes the listener, lets
    the calls in flight finish for `timeout_graceful_shutdown` (SHUTDOWN_GRACE_S), then cancels
    their requests. A call already running on a worker thread (a write waiting for another
    process's database lock, a retry waiting for its key) cannot be interrupted there, and the
    interpreter would wait for that thread at exit: so a timer ends the process with status 0
    once the grace and SHUTDOWN_MARGIN_S have passed. A write cut off this way ends as if its
    process had been killed: its open transaction is rolled back, and its idempotency key is
    free again for a retry once its lease lapses."""

    def __init__(self, config: uvicorn.Config, stopping: threading.Event) -> None:
        super().__init__(config)
        self.stopping = stopping
        self._exit_timer: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        self.stopping.set()
        if self._exit_timer is None:
            self._exit_timer = threading.Timer(SHUTDOWN_GRACE_S + SHUTDOWN_MARGIN_S, _exit_now)
            self._exit_timer.daemon = True
            self._exit_timer.start()


class _CutOffAnswers:
    """ASGI wrapper: a request the bounded stop cancels before it answered gets the envelope
    (503 `unavailable`, retryable) instead of uvicorn's bare 500. Only while stopping; any other
    cancellation propagates as it is."""

    def __init__(self, app: Any, stopping: threading.Event) -> None:
        self.app = app
        self.stopping = stopping

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answered = False

        async def watched(message: dict[str, Any]) -> None:
            nonlocal answered
            answered = answered or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except asyncio.CancelledError:
            if answered or not self.stopping.is_set():
                raise
            await _send_cut_off(send)


async def _send_cut_off(send: Any) -> None:
    envelope = http_envelope(
        VerbError(
            "unavailable",
            f"The server is shutting down: this call was stopped after waiting {SHUTDOWN_GRACE_S:g} s.",
            "Retry the same call once the server is running again. A write that was stopped may "
            "already be saved: retry it with the same idempotency_key, which stores it once.",
            why="fleetmem serve received SIGTERM or Ctrl-C and stops the calls still waiting after its grace.",
            detail={"reason": "shutting_down"},
            fix=Fix(
                why="The same call succeeds once the server is back.",
                actor="provider",
                retry_after_seconds=1,
            ),
            retryable=True,
        ),
        correlation_id=new_correlation_id(),
    )
    cid = envelope.correlation_id
    payload = json.dumps(envelope.body()).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"connection", b"close"),
        (CORRELATION_HEADER.lower().encode(), cid.encode()),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def _exit_now() -> None:
    log.warning(
        "calls still running after the shutdown grace were cut off",
        extra={"event": "shutdown_forced", "grace_s": SHUTDOWN_GRACE_S},
    )
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


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
    sock = bind_socket(host, 0)
    port = sock.getsockname()[1]
    server = _SignallingServer(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=f"fleetmem-http-{port}")
    thread.start()
    try:
        if not server.ready.wait(timeout):
            raise RuntimeError(f"server on {host}:{port} did not start within {timeout} s")
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
