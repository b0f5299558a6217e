"""The `fleetmem` command: the root parser, each command group's subcommands, and `main`.

Output contract (AGENT_OPERATOR): human text by default; with `--json` exactly one JSON document
on stdout and everything else on stderr. Exit codes: 0 ok, 1 failed, 2 usage or invalid input,
3 confirmation required, 12 no results (only with FLEETMEM_FAIL_ON_EMPTY=1).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from fleetmem.cli import (
    admin,
    ambient,
    bench,
    conformance,
    console_web,
    doctor,
    importer,
    maintenance,
    pack,
    protocol,
    serve,
    stage_clients,
    tokens,
    tools,
)
from fleetmem.cli.framework import Parser
from fleetmem.console import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CommandFailed, Output
from fleetmem.invocation import BUILTIN_COMMANDS
from fleetmem.protocol import CONTRACT_VERSION, PROTOCOL_VERSION


def _command_word(argv: Sequence[str]) -> str | None:
    """The subcommand named in argv (skipping global options), without parsing."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--data-dir":
            skip = True
        elif not word.startswith("-"):
            return word
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The full parser. Given the argv it will parse, tool subcommands are generated only when the
    command is not a built-in one (loading the registry costs more than the rest of a token command)."""
    with_tools = argv is None or (_command_word(argv) not in BUILTIN_COMMANDS and list(argv) != ["--version"])
    # Each subcommand repeats --data-dir with a SUPPRESS default so it works before or after the
    # command name without the subparser resetting a value given earlier.
    common = Parser(add_help=False)
    common.add_argument(
        "--data-dir",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help="data directory (default: $FLEETMEM_DATA_DIR, else a per-user directory)",
    )
    parser = Parser(prog="fleetmem", description="Long-term memory for fleets of AI agents (MCP).")
    parser.add_argument(
        "--data-dir",
        default=None,
        metavar="DIR",
        help="data directory (default: $FLEETMEM_DATA_DIR, else a per-user directory)",
    )
    parser.add_argument("--version", action="store_true", help="print the fleetmem version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    serve.add_commands(sub, common)
    tokens.add_commands(sub, common)
    if with_tools:
        tools.add_commands(sub, common)
    for group in (
        protocol,
        console_web,
        importer,
        doctor,
        maintenance,
        conformance,
        bench,
        ambient,
        pack,
        admin,
        stage_clients,
    ):
        group.add_commands(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = Output(as_json="--json" in argv)
    try:
        parser = build_parser(argv)
        if _command_word(argv) == "bench" and not {"-h", "--help"} & set(argv[: argv.index("bench")]):
            # The benchmark owns its options; only the global --data-dir is taken from around it.
            args = argparse.Namespace(data_dir=None, rest=[], handler=bench.cmd_bench)
            words = argv[:]
            while "--data-dir" in words:
                i = words.index("--data-dir")
                args.data_dir = words[i + 1] if i + 1 < len(words) else None
                del words[i : i + 2]
            args.rest = words[words.index("bench") + 1 :]
        else:
            args = parser.parse_args(argv)
        if getattr(args, "version", False):
            from fleetmem import __version__

            print(f"fleetmem {__version__} (protocol {PROTOCOL_VERSION}, contract {CONTRACT_VERSION})")
            return EXIT_OK
        handler: Callable[[argparse.Namespace, Output], int] | None = getattr(args, "handler", None)
        if handler is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        code = handler(args, out)
    except CommandFailed as exc:
        code = exc.exit_code
        if out.as_json and not out.document_written:
            out.document(_fallback(exc.code, exc.message, exc.suggestion, code))
        else:
            Output.err(f"Error [{exc.code}]: {exc.message}\n  {exc.suggestion}")
    except KeyboardInterrupt:
        code = 130
        if out.as_json and not out.document_written:
            out.document(
                {
                    "error": "interrupted",
                    "code": "interrupted",
                    "message": "interrupted",
                    "exit_code": code,
                    "contract_version": CONTRACT_VERSION,
                }
            )
    except Exception as exc:
        code = EXIT_FAILED
        message = f"{type(exc).__name__}: {exc}"
        suggestion = "Run `fleetmem doctor` to see what is misconfigured; report it if it repeats."
        if out.as_json and not out.document_written:
            out.document(_fallback("internal", message, suggestion, code))
        else:
            Output.err(f"Error [internal]: {message}\n  {suggestion}")
    if out.as_json and code != EXIT_OK and not out.document_written:
        out.document(
            _fallback(
                "command_failed",
                "the command failed without a result",
                "Re-run without --json to see its messages.",
                code,
            )
        )
    return code


def _fallback(code: str, message: str, suggestion: str, exit_code: int) -> dict[str, Any]:
    return {
        "error": "command_failed",
        "code": code,
        "message": message,
        "suggestion": suggestion,
        "exit_code": exit_code,
        "contract_version": CONTRACT_VERSION,
    }
