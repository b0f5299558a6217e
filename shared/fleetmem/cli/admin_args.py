"""The parsers of `fleetmem admin ACTION`, shared by the modules of the admin group."""

from __future__ import annotations

import argparse
from typing import Any

from fleetmem.cli.stage import aws_backend_option


def admin_parser(asub: Any, common: argparse.ArgumentParser, name: str, *, help: str, stage: bool = False) -> Any:
    """The parser of `fleetmem admin NAME` (with `stage`: the options naming a deployed stage)."""
    p = asub.add_parser(name, parents=[common], help=help)
    if stage:
        aws_backend_option(p)
    return p


def answered_by(p: argparse.ArgumentParser, handler: Any) -> None:
    """The last option of every admin action (`--json`), and the command that answers it."""
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=handler)
