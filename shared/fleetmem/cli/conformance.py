"""`fleetmem conformance`: the protocol conformance suite against an MCP endpoint over HTTP."""

from __future__ import annotations

import argparse
from typing import Any

from fleetmem.cli.framework import Parser
from fleetmem.console import EXIT_FAILED, EXIT_OK, CommandFailed, Output
from fleetmem.protocol import SURFACES


def add_commands(sub: Any, common: Parser) -> None:
    p = sub.add_parser("conformance", parents=[common], help="run the protocol conformance suite over HTTP")
    p.add_argument("--target", required=True, help="MCP endpoint, e.g. http://127.0.0.1:8765/mcp")
    p.add_argument("--token", required=True, help="a read,write token (admin optional)")
    p.add_argument("--read-token", default=None, help="a read-only token, for the scope cases")
    p.add_argument("--eras", default="legacy,auto", help="protocol eras to run: legacy,auto")
    p.add_argument(
        "--surface",
        choices=SURFACES,
        default=None,
        help="the surface the target serves (default: from tools/list)",
    )
    p.add_argument(
        "--section",
        action="append",
        default=[],
        help="run only the sections whose names start with this (repeatable), e.g. 'reference 0.60 writes'",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_conformance)


def cmd_conformance(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.conformance import run
    from fleetmem.conformance.runner import load_cases, select_sections

    sections = tuple(args.section)
    try:
        select_sections(load_cases(), sections)
    except ValueError as exc:
        raise CommandFailed.usage(
            str(exc), "pass --section with the start of one of the section names listed"
        ) from None
    report = run(
        args.target,
        args.token,
        json=out.as_json,
        read_token=args.read_token,
        eras=tuple(args.eras.split(",")),
        log=Output.err,
        surface=args.surface,
        sections=sections,
    )
    if out.as_json:
        out.document(report)
    return EXIT_FAILED if report["failed"] else EXIT_OK
