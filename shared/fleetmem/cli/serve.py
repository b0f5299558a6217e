"""`fleetmem serve` (the local MCP server over HTTP) and `fleetmem init` (a new, empty memory)."""

from __future__ import annotations

import argparse
import errno
import sys
from typing import Any

from fleetmem.cli.framework import Parser, port_type, whole_number_type
from fleetmem.config import CALL_THREADS_MAX, DEFAULT_CALL_THREADS, ENV_CALL_THREADS
from fleetmem.console import EXIT_FAILED, EXIT_OK, CommandFailed, Output
from fleetmem.lanes import data_dir_failure, open_deps, settings_from, store_state
from fleetmem.protocol import SURFACES


def add_commands(sub: Any, common: Parser) -> None:
    p = sub.add_parser("serve", parents=[common], help="serve MCP over streamable HTTP at POST /mcp")
    p.add_argument("--host", default=None, help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=port_type, default=None, help="port (default 8765; 0 = any free port)")
    p.add_argument("--surface", choices=SURFACES, default=None, help="verbs: the seven verbs only; full (default)")
    p.add_argument(
        "--embedder",
        choices=("minilm", "hash", "none"),
        default=None,
        help="minilm (default, the local model), hash (tests only), none (keyword-only)",
    )
    p.add_argument(
        "--threads",
        dest="call_threads",
        type=whole_number_type(1, CALL_THREADS_MAX),
        default=None,
        help=f"calls run at once (default {DEFAULT_CALL_THREADS} or ${ENV_CALL_THREADS}); the rest wait their turn",
    )
    p.add_argument(
        "--no-console",
        dest="console",
        action="store_const",
        const=False,
        default=None,
        help="do not serve the memory console at /console (on by default; FLEETMEM_CONSOLE=off)",
    )
    p.set_defaults(handler=cmd_serve)

    p = sub.add_parser("init", parents=[common], help="start a new, empty memory in the data directory")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_init)


def cmd_serve(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.transport.http_local import PortUnavailable, run_server

    settings = settings_from(args)
    if store_state(settings) == "file":
        raise data_dir_failure(settings, "file")
    try:
        run_server(settings, out=sys.stderr, mounts=_console_mount(settings))
    except PortUnavailable as exc:
        raise CommandFailed(
            "port_unavailable",
            f"fleetmem serve {exc.strerror}; nothing was started.",
            f"Stop the other server, or pick a free port: fleetmem serve --port {settings.serve.port + 1}"
            if exc.errno == errno.EADDRINUSE
            else "Pick another address or a port of 1024 or above: fleetmem serve --host 127.0.0.1 --port 8765",
            exit_code=EXIT_FAILED,
        ) from None
    return EXIT_OK


def cmd_init(args: argparse.Namespace, out: Output) -> int:
    """Create the data directory's database (the one explicit way to start a memory besides
    `serve` and the commands that store); an existing memory is left as it is."""
    settings = settings_from(args, embedder="none")
    if settings.backend != "local":
        raise CommandFailed.usage(
            f"init starts a local memory; this configuration uses the {settings.backend} backend.",
            "Unset FLEETMEM_BACKEND (a deployed stage's tables are created by its deployment).",
            code="usage",
        )
    existed = store_state(settings) == "ok"
    open_deps(settings, creates=True, announce=False)
    if out.as_json:
        out.document({"data_dir": str(settings.data_dir), "created": not existed})
    elif existed:
        out.text(f"{settings.data_dir} already holds a fleetmem memory; nothing changed.")
    else:
        out.text(f"Started a new, empty memory in {settings.data_dir}.")
    return EXIT_OK


def _console_mount(settings: Any) -> Any:
    """The memory console's `/console` routes over the app `run_server` builds (docs/console.md);
    None when it is turned off, or on the verbs surface (its screens call the full surface's tools)."""
    if not settings.serve.console or settings.surface != "full":
        return None
    from fleetmem.web import ToolClient, console_routes

    return lambda app_of: console_routes(lambda: ToolClient.in_process(app_of(), host=settings.serve.host))
