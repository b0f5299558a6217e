"""Operator commands for a deployed stage (docs/operate.md): `fleetmem admin reindex` and
`fleetmem admin copy-tables`.
`fleetmem.cli` registers the group (`add_commands`); each subcommand has its own `_add_*` and
`cmd_*` functions. The stage is the one the environment names (`--backend aws`, as `fleetmem tenant
delete --backend aws`): FLEETMEM_TABLE_PREFIX, FLEETMEM_OPENSEARCH_*, the embedder settings and the
AWS credentials, as the stage's functions have them.
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path
from typing import Any

from fleetmem.cli import EXIT_OK, EXIT_USAGE, CommandFailed, Output, _Parser, _settings


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    admin = sub.add_parser(
        "admin", parents=[common], help="operate a deployed stage (rebuild its search index, restore)"
    )
    asub = admin.add_subparsers(dest="admin_command", metavar="ACTION", parser_class=_Parser, required=True)
    _add_reindex(asub, common)
    _add_copy_tables(asub, common)


# -- reindex ----------------------------------------------------------------------------------


def _add_reindex(asub: Any, common: argparse.ArgumentParser) -> None:
    from fleetmem.adapters.aws.reindex import DEFAULT_RATE

    p = asub.add_parser(
        "reindex",
        parents=[common],
        help="rebuild the stage's search index from DynamoDB into a new index, then swap the alias",
    )
    p.add_argument("--backend", choices=("aws",), default="aws", help="the AWS stage named by the environment")
    p.add_argument("--tenant", default=None, help="only this tenant (default: every tenant)")
    p.add_argument(
        "--rate",
        type=float,
        default=DEFAULT_RATE,
        metavar="DOCS",
        help=f"at most this many documents a second (default {DEFAULT_RATE:g}; 0: no limit)",
    )
    p.add_argument(
        "--state",
        default=None,
        metavar="FILE",
        help="checkpoint file; a stopped run resumes from it (default: one per stage and index under "
        "$XDG_STATE_HOME/fleetmem/reindex)",
    )
    p.add_argument(
        "--drop-old", action="store_true", help="delete the previous index after the swap (default: keep it)"
    )
    p.add_argument(
        "--catch-up",
        action="store_true",
        help="only index again what changed since the last finished rebuild began (after deploying a new "
        "embedding model or index version)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_reindex)


def cmd_reindex(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.adapters.aws import BedrockEmbedder, open_aws
    from fleetmem.adapters.aws.opensearch import OpenSearchIndex
    from fleetmem.adapters.aws.reindex import Rebuild, StateFile, default_state_path
    from fleetmem.errors import PortError
    from fleetmem.wiring import local_embedder

    settings = _settings(args, backend="aws")
    if settings.embedder == "bedrock":
        embedder: Any = BedrockEmbedder(settings)
    else:
        embedder, problem = local_embedder(settings)
        if embedder is None:
            raise CommandFailed(
                "invalid_config",
                f"No embedding model for the rebuild: {problem}",
                "Set FLEETMEM_EMBEDDER (bedrock on a deployed stage) as the stage's functions have it.",
                exit_code=EXIT_USAGE,
            )
    stores = open_aws(settings, search_model_id=embedder.model_id, search_dim=embedder.dim)
    search = stores.search
    if not isinstance(search, OpenSearchIndex):
        raise CommandFailed(
            "invalid_config",
            "fleetmem admin reindex rebuilds the stage's search index, and no OpenSearch endpoint is configured; "
            "nothing was done.",
            "Set FLEETMEM_OPENSEARCH_ENDPOINT (and FLEETMEM_OPENSEARCH_SERVICE, FLEETMEM_OPENSEARCH_INDEX_PREFIX) "
            "to the stage's, as its functions have them, then run the command again.",
            exit_code=EXIT_USAGE,
        )
    state = StateFile(
        Path(args.state).expanduser() if args.state else default_state_path(settings.table_prefix, search.alias)
    )
    rebuild = Rebuild(
        stores,
        search,
        embedder,
        state,
        tenant=args.tenant,
        rate=max(0.0, args.rate),
        drop_old=args.drop_old,
        settle=timedelta(milliseconds=settings.change_settle_ms),
        progress=lambda line: Output.err(f"reindex: {line}"),
    )
    try:
        point = rebuild.run(catch_up_only=args.catch_up)
    except ValueError as exc:
        raise CommandFailed(
            "invalid_params",
            str(exc),
            f"Remove {state.path} to start a new rebuild, or pass --state FILE.",
            exit_code=EXIT_USAGE,
        ) from None
    except PortError as exc:
        raise CommandFailed(
            "unavailable",
            f"The rebuild stopped ({exc}); searches still use the index the alias pointed at.",
            f"Run the same command again: it resumes from {state.path}.",
        ) from None
    doc = {
        "alias": point.alias,
        "index": point.target,
        "tenants": len(point.tenants),
        "items": point.copied,
        "documents": point.docs,
        "caught_up": point.caught_up,
        "previous": point.left,
        "previous_deleted": bool(args.drop_old),
        "state": str(state.path),
    }
    if out.as_json:
        out.document(doc)
    else:
        out.text(
            f"{point.alias} -> {point.target}: {point.copied} item(s), {point.docs} document(s), "
            f"{point.caught_up} caught up" + (f"; previous: {', '.join(point.left)}" if point.left else "")
        )
    return EXIT_OK


# -- copy-tables ------------------------------------------------------------------------------


def _add_copy_tables(asub: Any, common: argparse.ArgumentParser) -> None:
    p = asub.add_parser(
        "copy-tables",
        parents=[common],
        help="copy every item of another stage's tables (e.g. a point-in-time restore) into this stage's empty tables",
    )
    p.add_argument("--backend", choices=("aws",), default="aws", help="the AWS stage named by the environment")
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="PREFIX",
        help="table prefix of the tables to copy (their names are PREFIX-facts, PREFIX-pages, ...)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_copy_tables)


def cmd_copy_tables(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.adapters.aws import open_aws
    from fleetmem.adapters.aws.restore import copy_tables, non_empty
    from fleetmem.errors import PortError

    settings = _settings(args, backend="aws", embedder="none")
    dest = settings.table_prefix
    if args.source == dest:
        raise CommandFailed(
            "invalid_params",
            f"--from names this stage's own tables ({dest}); nothing was copied.",
            "Name the prefix of the restored tables, e.g. --from fleetmem-prod-restored.",
            exit_code=EXIT_USAGE,
        )
    db = open_aws(settings).aws.dynamodb
    try:
        full = non_empty(db, dest)
        if full:
            raise CommandFailed(
                "conflict",
                f"The destination tables are not empty ({', '.join(full)}); nothing was copied.",
                "Copy into a newly deployed stage (FLEETMEM_TABLE_PREFIX names its tables).",
                exit_code=EXIT_USAGE,
            )
        copied = copy_tables(db, args.source, dest, progress=lambda table, n: Output.err(f"copy-tables: {table} {n}"))
    except PortError as exc:
        raise CommandFailed(
            "unavailable",
            f"The copy stopped part-way ({exc}).",
            "Empty the destination tables (or deploy a new stage) and run the command again.",
        ) from None
    if out.as_json:
        out.document({"from": args.source, "to": dest, "copied": copied})
    else:
        out.text(f"{args.source} -> {dest}: " + ", ".join(f"{t} {n}" for t, n in copied.items()))
    return EXIT_OK
