"""The local memory's upkeep: `fleetmem embedder build` (the local model) and `fleetmem reindex`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetmem.cli.framework import Parser, yaml_text
from fleetmem.console import EXIT_OK, CommandFailed, Output
from fleetmem.lanes import open_deps, settings_from

if TYPE_CHECKING:
    from fleetmem.ports import Deps, VectorMaintenance


def add_commands(sub: Any, common: Parser) -> None:
    emb = sub.add_parser("embedder", parents=[common], help="build the local MiniLM model")
    esub = emb.add_subparsers(dest="embedder_command", metavar="ACTION", parser_class=Parser, required=True)
    p = esub.add_parser("build", parents=[common], help="convert the all-MiniLM-L6-v2 wheel to ONNX (idempotent)")
    p.add_argument("--model-dir", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_embedder_build)

    p = sub.add_parser("reindex", parents=[common], help="embed everything for the current model (resumable)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_reindex)


def maintenance_stores(deps: Deps) -> VectorMaintenance:
    """The re-embedding queries `fleetmem reindex` and `doctor` use (the local backend's)."""
    if deps.maintenance is None:
        raise CommandFailed(
            "unavailable",
            "Maintenance runs on the local backend only (this backend embeds every write itself).",
            "On AWS the stream indexer embeds every write; run this against a data directory.",
        )
    return deps.maintenance


def cmd_embedder_build(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.embedder_build import build_embedder

    model_dir = Path(args.model_dir).expanduser() if args.model_dir else settings_from(args).model_dir
    path = build_embedder(model_dir, progress=Output.err)
    if out.as_json:
        out.document({"model_dir": str(path)})
    else:
        out.text(str(path))
    return EXIT_OK


def cmd_reindex(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.maintenance import reindex

    deps = open_deps(settings_from(args))
    if deps.embedder is None:
        raise CommandFailed(
            "unavailable",
            f"No embedder to reindex with: {deps.diagnostics.embedder_problem}",
            "Build the local model first: fleetmem embedder build",
        )
    stats = reindex(maintenance_stores(deps), deps.embedder, progress=sys.stderr)
    if out.as_json:
        out.document(dict(stats))
    else:
        out.text(yaml_text(dict(stats)))
    return EXIT_OK
