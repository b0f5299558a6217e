"""Operating a deployed stage (docs/operate.md): `fleetmem admin replay` re-indexes the items the
stream indexer could not index, `fleetmem admin status` shows versions, index lag, what is kept
for replay and the tables' item counts. Both read the stage's settings from the environment, as
its functions have them (FLEETMEM_TABLE_PREFIX, FLEETMEM_OPENSEARCH_*, FLEETMEM_BEDROCK_*, the AWS
region and credentials). `fleetmem.cli` registers them (`add_commands`).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from fleetmem.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CommandFailed, Output, _Parser, _settings
from fleetmem.protocol import CONTRACT_VERSION


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    adm = sub.add_parser("admin", parents=[common], help="operate a deployed AWS stage (replay, status)")
    asub = adm.add_subparsers(dest="admin_command", metavar="ACTION", parser_class=_Parser, required=True)
    _add_replay(asub, common)
    _add_status(asub, common)


# --------------------------------------------------------------------------- the stage


def _stage(args: argparse.Namespace) -> tuple[Any, Any]:
    """(settings, deps) of the stage the environment names; refuses a stage without a search index."""
    from fleetmem.adapters.aws.opensearch import OpenSearchIndex
    from fleetmem.config import ENV_EMBEDDER
    from fleetmem.wiring import build_deps

    settings = _settings(args, backend="aws", embedder=os.environ.get(ENV_EMBEDDER) or "bedrock")
    deps = build_deps(settings)
    if not isinstance(deps.search, OpenSearchIndex):
        raise CommandFailed(
            "invalid_config",
            f"fleetmem admin {args.admin_command} works on the stage's search index, and no OpenSearch endpoint is "
            "configured; nothing was read or written.",
            "Set FLEETMEM_OPENSEARCH_ENDPOINT (and FLEETMEM_OPENSEARCH_SERVICE, FLEETMEM_OPENSEARCH_INDEX_PREFIX, "
            "FLEETMEM_TABLE_PREFIX, FLEETMEM_BEDROCK_EMBEDDING_MODEL) to the stage's, as its functions have them.",
            exit_code=EXIT_USAGE,
        )
    return settings, deps


def _replay_queue(settings: Any) -> Any:
    from fleetmem.adapters.aws import sdk_client
    from fleetmem.adapters.aws.replay import ENV_REPLAY_QUEUE_URL, ReplayQueue, queue_name

    try:
        return ReplayQueue.for_stage(sdk_client("sqs", region=settings.region), settings.table_prefix)
    except Exception as exc:
        raise CommandFailed(
            "unavailable",
            f"The stage's replay queue {queue_name(settings.table_prefix)!r} could not be found "
            f"({type(exc).__name__}); nothing was read or written.",
            f"Check FLEETMEM_TABLE_PREFIX and the AWS credentials and region, or set {ENV_REPLAY_QUEUE_URL} to the "
            "queue URL the indexer function has.",
        ) from None


# --------------------------------------------------------------------------- admin replay


def _add_replay(asub: Any, common: argparse.ArgumentParser) -> None:
    p = asub.add_parser(
        "replay",
        parents=[common],
        help="re-index, from DynamoDB, every item the stream indexer kept after failing to index it",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_replay)


def cmd_replay(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.adapters.aws.replay import ReplayReport, replay

    settings, deps = _stage(args)
    queue = _replay_queue(settings)
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


# --------------------------------------------------------------------------- admin status


def _add_status(asub: Any, common: argparse.ArgumentParser) -> None:
    p = asub.add_parser(
        "status",
        parents=[common],
        help="the stage's versions, search index and its lag, records kept for replay, item counts per table",
    )
    p.add_argument(
        "--exact",
        action="store_true",
        help="count items by scanning every table (reads all of them; default: DynamoDB's approximate counts)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_status)


def cmd_status(args: argparse.Namespace, out: Output) -> int:
    from fleetmem import __version__
    from fleetmem.adapters.aws.opensearch import INDEX_VERSION

    settings, deps = _stage(args)
    search = deps.search
    doc: dict[str, Any] = {
        "fleetmem_version": __version__,
        "stage_prefix": settings.table_prefix,
        "index": {
            "name": search.index,
            "index_version": INDEX_VERSION,
            "embedding_model": search.model_id,
            "dimension": search.dim,
        },
    }
    problems: list[str] = []
    from fleetmem.adapters.aws import sdk_client

    ddb = sdk_client("dynamodb", region=settings.region)
    doc["tables"] = _table_counts(ddb, settings.table_prefix, exact=args.exact, problems=problems)
    doc["index"]["documents"] = _index_counts(search, problems)
    doc["index_lag"] = _lag(doc["tables"], doc["index"]["documents"], ddb, settings.table_prefix, args.exact)
    try:
        doc["kept_for_replay"] = _replay_queue(settings).count()
    except CommandFailed as exc:
        doc["kept_for_replay"] = None
        problems.append(exc.message)
    doc["functions"] = _function_versions(settings, problems)
    doc["problems"] = problems
    doc["contract_version"] = CONTRACT_VERSION
    if out.as_json:
        out.document(doc)
    else:
        _print_status(out, doc)
    return EXIT_OK


def _table_counts(ddb: Any, prefix: str, *, exact: bool, problems: list[str]) -> dict[str, dict[str, Any]]:
    """Items per table: DescribeTable's ItemCount (DynamoDB updates it about every six hours, so it
    is approximate) or, with `exact`, a counting Scan."""
    from fleetmem.adapters.aws.tables import TABLES

    counts: dict[str, dict[str, Any]] = {}
    for spec in TABLES:
        name = spec.physical_name(prefix)
        try:
            if exact:
                counts[spec.logical] = {"items": _scan_count(ddb, TableName=name), "exact": True}
            else:
                n = ddb.describe_table(TableName=name)["Table"].get("ItemCount", 0)
                counts[spec.logical] = {"items": int(n), "exact": False}
        except Exception as exc:
            counts[spec.logical] = {"items": None, "exact": exact}
            problems.append(f"table {name}: {type(exc).__name__}")
    return counts


def _scan_count(ddb: Any, **req: Any) -> int:
    n, start = 0, None
    while True:
        out = ddb.scan(**req, Select="COUNT", **({"ExclusiveStartKey": start} if start else {}))
        n += int(out.get("Count", 0))
        start = out.get("LastEvaluatedKey")
        if not start:
            return n


def _index_counts(search: Any, problems: list[str]) -> dict[str, Any] | None:
    """Documents in the index: facts, chunks, and the pages the chunks belong to (approximate)."""
    body = {
        "size": 0,
        "track_total_hits": True,
        "aggs": {"kinds": {"terms": {"field": "kind"}}, "pages": {"cardinality": {"field": "slug"}}},
    }
    try:
        out = search.client.search(index=search.index, body=body, allow_no_indices=True, ignore_unavailable=True)
    except Exception as exc:
        problems.append(f"search index {search.index}: {type(exc).__name__}")
        return None
    kinds = {b["key"]: int(b["doc_count"]) for b in out.get("aggregations", {}).get("kinds", {}).get("buckets", [])}
    total = out.get("hits", {}).get("total", {})
    return {
        "total": int(total.get("value", 0) if isinstance(total, dict) else total or 0),
        "facts": kinds.get("fact", 0),
        "chunks": kinds.get("chunk", 0),
        "pages": int(out.get("aggregations", {}).get("pages", {}).get("value", 0)),
    }


def _lag(tables: dict[str, Any], docs: dict[str, Any] | None, ddb: Any, prefix: str, exact: bool) -> dict[str, Any]:
    """Index lag from the CLI: searchable facts and pages in the tables against documents in the
    index (exact with `--exact`: counting Scans of facts neither expired nor superseded, and of
    page rows). The indexer's own measure, per batch, is the `SearchLagSeconds` metric."""
    lag: dict[str, Any] = {"metric": "SearchLagSeconds (CloudWatch, the stage's metrics namespace)"}
    if not exact or docs is None:
        lag["note"] = "run with --exact to compare searchable items in the tables with documents in the index"
        return lag
    from fleetmem.adapters.aws.tables import FACTS, PAGES

    facts = _scan_count(
        ddb,
        TableName=FACTS.physical_name(prefix),
        FilterExpression="typ = :f AND attribute_not_exists(expired_at) AND attribute_not_exists(superseded_by)",
        ExpressionAttributeValues={":f": {"S": "fact"}},
    )
    pages = _scan_count(
        ddb,
        TableName=PAGES.physical_name(prefix),
        FilterExpression="sk = :p AND typ = :t",
        ExpressionAttributeValues={":p": {"S": "P"}, ":t": {"S": "page"}},
    )
    lag.update(
        {
            "facts": {"tables": facts, "index": docs["facts"], "missing": max(0, facts - docs["facts"])},
            "pages": {"tables": pages, "index": docs["pages"], "missing": max(0, pages - docs["pages"])},
        }
    )
    return lag


def _function_versions(settings: Any, problems: list[str]) -> list[dict[str, Any]] | None:
    """Each function of the stage (`<prefix>-*`): its FLEETMEM_VERSION, published version and
    aliases, through the Lambda API (ListFunctions, ListAliases); None when that is not reachable."""
    from fleetmem.adapters.aws import sdk_client

    prefix = f"{settings.table_prefix}-"
    try:
        lam = sdk_client("lambda", region=settings.region)
        found = []
        for page in lam.get_paginator("list_functions").paginate():
            found += [f for f in page.get("Functions", []) if str(f.get("FunctionName", "")).startswith(prefix)]
        rows = []
        for f in sorted(found, key=lambda f: f["FunctionName"]):
            aliases = lam.list_aliases(FunctionName=f["FunctionName"]).get("Aliases", [])
            rows.append(
                {
                    "function": f["FunctionName"],
                    "fleetmem_version": (f.get("Environment") or {}).get("Variables", {}).get("FLEETMEM_VERSION"),
                    "aliases": {a["Name"]: a["FunctionVersion"] for a in aliases},
                }
            )
        return rows
    except Exception as exc:
        problems.append(f"function versions not observable: the Lambda API answered {type(exc).__name__}")
        return None


def _print_status(out: Output, doc: dict[str, Any]) -> None:
    ix = doc["index"]
    out.text(f"fleetmem {doc['fleetmem_version']} (this CLI), stage prefix {doc['stage_prefix']}")
    out.text(
        f"search index {ix['name']} (INDEX_VERSION {ix['index_version']}, model {ix['embedding_model']}, "
        f"{ix['dimension']} dimensions)"
    )
    docs = ix.get("documents")
    if docs is not None:
        out.text(
            f"  documents: {docs['total']} ({docs['facts']} facts, {docs['chunks']} chunks of ~{docs['pages']} pages)"
        )
    lag = doc["index_lag"]
    if "facts" in lag:
        for kind in ("facts", "pages"):
            row = lag[kind]
            out.text(
                f"  index lag, {kind}: {row['tables']} searchable in the tables, {row['index']} in the index, "
                f"{row['missing']} missing"
            )
    else:
        out.text(f"  index lag: {lag['note']}; per batch: the {lag['metric']} metric")
    kept = doc["kept_for_replay"]
    if kept is not None:
        hint = " (run: fleetmem admin replay)" if kept["waiting"] else ""
        out.text(f"kept for replay: {kept['waiting']} waiting, {kept['in_flight']} being replayed{hint}")
    exact = any(t.get("exact") for t in doc["tables"].values())
    how = "counted by Scan" if exact else "DynamoDB's ItemCount: approximate, updated about every 6 h; --exact scans"
    out.text(f"items per table ({how}):")
    for name, row in doc["tables"].items():
        out.text(f"  {name}: {row['items'] if row['items'] is not None else 'unreadable'}")
    fns = doc["functions"]
    if fns is None:
        out.text("function versions: not observable here (the Lambda API did not answer ListFunctions)")
    else:
        for f in fns:
            aliases = ", ".join(f"{a} -> {v}" for a, v in f["aliases"].items()) or "no alias"
            out.text(f"  {f['function']}: fleetmem {f['fleetmem_version'] or '(not set)'}; {aliases}")
    for p in doc["problems"]:
        Output.err(f"Note: {p}")
