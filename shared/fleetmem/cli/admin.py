"""Operating a deployed stage (docs/operate.md): `fleetmem admin reindex` rebuilds the search
index from DynamoDB behind its alias, `fleetmem admin copy-tables` copies restored tables into a new
stage, `fleetmem admin replay` re-indexes the items the stream indexer could not index, and
`fleetmem admin status` shows versions, index lag, what is kept for replay and the tables' item
counts. Each reads the stage's settings from the environment, as its functions have them
(FLEETMEM_TABLE_PREFIX, FLEETMEM_OPENSEARCH_*, FLEETMEM_BEDROCK_*, the AWS region and credentials).
`fleetmem.cli.app` registers the group (`add_commands`); each subcommand has its own `_add_*` and
`cmd_*` functions (`status` in `admin_status`, `preflight` in `admin_preflight`).
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path
from typing import Any

from fleetmem.cli.admin_args import admin_parser, answered_by
from fleetmem.cli.admin_preflight import add_preflight
from fleetmem.cli.admin_status import add_status
from fleetmem.cli.framework import Parser
from fleetmem.cli.stage import replay_queue, search_index, stage
from fleetmem.console import EXIT_FAILED, EXIT_OK, CommandFailed, Output
from fleetmem.lanes import settings_from
from fleetmem.protocol import CONTRACT_VERSION


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    adm = sub.add_parser(
        "admin", parents=[common], help="operate a deployed AWS stage (reindex, copy-tables, replay, status)"
    )
    asub = adm.add_subparsers(dest="admin_command", metavar="ACTION", parser_class=Parser, required=True)
    _add_reindex(asub, common)
    _add_copy_tables(asub, common)
    _add_replay(asub, common)
    add_status(asub, common)
    add_preflight(asub, common)


# --------------------------------------------------------------------------- admin replay


def _add_replay(asub: Any, common: argparse.ArgumentParser) -> None:
    p = admin_parser(
        asub,
        common,
        "replay",
        help="re-index, from DynamoDB, every item the stream indexer kept after failing to index it",
    )
    answered_by(p, cmd_replay)


def cmd_replay(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.wiring import ReplayReport, replay

    settings, deps = stage(args)
    queue = replay_queue(settings)
    waiting = queue.count()
    Output.err(f"replay: {waiting['waiting']} kept record(s) waiting on {queue.url}")

    def progress(r: ReplayReport) -> None:
        Output.err(f"replay: read {r.messages}, re-indexed {len(r.replayed)}, failed {len(r.failed)}")

    report = replay(
        queue, facts=deps.facts, pages=deps.pages, index=deps.search, embedder=deps.embedder, progress=progress
    )
    failed = sorted(set(report.failed))
    Output.err(
        f"replay: done. {len(set(report.replayed))} item(s) re-indexed from DynamoDB, {len(failed)} failed"
        + (f", {report.dropped} unreadable message(s) dropped" if report.dropped else "")
        + "."
    )
    if failed:
        Output.err(
            "  The failed ones stay on the replay queue; run `fleetmem admin replay` again once the search index "
            "answers (`fleetmem admin status` shows it)."
        )
    if out.as_json:
        out.document(
            {
                "messages": report.messages,
                "replayed": len(set(report.replayed)),
                "failed": [{"tenant": k.tenant, "kind": k.kind, "id": k.id} for k in failed],
                "dropped": report.dropped,
                "contract_version": CONTRACT_VERSION,
            }
        )
    return EXIT_FAILED if failed else EXIT_OK


# --------------------------------------------------------------------------- admin reindex


#: `admin reindex --rate`'s default, documents a second: a few `_bulk` calls a second, well inside a
#: small domain's indexing capacity while the stream indexer keeps writing
REINDEX_RATE = 200.0


def _add_reindex(asub: Any, common: argparse.ArgumentParser) -> None:

    p = admin_parser(
        asub,
        common,
        "reindex",
        stage=True,
        help="rebuild the stage's search index from DynamoDB into a new index, then swap the alias",
    )
    p.add_argument("--tenant", default=None, help="only this tenant (default: every tenant)")
    p.add_argument(
        "--rate",
        type=float,
        default=REINDEX_RATE,
        metavar="DOCS",
        help=f"at most this many documents a second (default {REINDEX_RATE:g}; 0: no limit)",
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
    answered_by(p, cmd_reindex)


def cmd_reindex(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.errors import PortError
    from fleetmem.wiring import BedrockEmbedder, Rebuild, StateFile, default_state_path, local_embedder, open_aws

    settings = settings_from(args, backend="aws")
    if settings.embedder == "bedrock":
        embedder: Any = BedrockEmbedder(settings)
    else:
        embedder, problem = local_embedder(settings)
        if embedder is None:
            raise CommandFailed.usage(
                f"No embedding model for the rebuild: {problem}",
                "Set FLEETMEM_EMBEDDER (bedrock on a deployed stage) as the stage's functions have it.",
                code="invalid_config",
            )
    stores = open_aws(settings, search_model_id=embedder.model_id, search_dim=embedder.dim)
    search = search_index(stores.search, doing="admin reindex rebuilds the stage's search index", nothing="done")
    state = StateFile(
        Path(args.state).expanduser() if args.state else default_state_path(settings.aws.table_prefix, search.alias)
    )
    rebuild = Rebuild(
        stores,
        search,
        embedder,
        state,
        tenant=args.tenant,
        rate=max(0.0, args.rate),
        drop_old=args.drop_old,
        settle=timedelta(milliseconds=settings.aws.change_settle_ms),
        progress=lambda line: Output.err(f"reindex: {line}"),
    )
    try:
        point = rebuild.run(catch_up_only=args.catch_up)
    except ValueError as exc:
        raise CommandFailed.usage(
            str(exc),
            f"Remove {state.path} to start a new rebuild, or pass --state FILE.",
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


# --------------------------------------------------------------------------- admin copy-tables


def _add_copy_tables(asub: Any, common: argparse.ArgumentParser) -> None:
    p = admin_parser(
        asub,
        common,
        "copy-tables",
        stage=True,
        help="copy every item of another stage's tables (e.g. a point-in-time restore) into this stage's empty tables",
    )
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="PREFIX",
        help="table prefix of the tables to copy (their names are PREFIX-facts, PREFIX-pages, ...)",
    )
    answered_by(p, cmd_copy_tables)


def cmd_copy_tables(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.errors import PortError
    from fleetmem.wiring import copy_tables, non_empty, open_aws

    settings = settings_from(args, backend="aws", embedder="none")
    dest = settings.aws.table_prefix
    if args.source == dest:
        raise CommandFailed.usage(
            f"--from names this stage's own tables ({dest}); nothing was copied.",
            "Name the prefix of the restored tables, e.g. --from fleetmem-prod-restored.",
        )
    db = open_aws(settings).aws.dynamodb
    try:
        full = non_empty(db, dest)
        if full:
            raise CommandFailed.usage(
                f"The destination tables are not empty ({', '.join(full)}); nothing was copied.",
                "Copy into a newly deployed stage (FLEETMEM_TABLE_PREFIX names its tables).",
                code="conflict",
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
