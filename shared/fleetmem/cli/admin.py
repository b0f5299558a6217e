"""Operating a deployed stage (docs/operate.md): `fleetmem admin reindex` rebuilds the search
index from DynamoDB behind its alias, `fleetmem admin copy-tables` copies restored tables into a new
stage, `fleetmem admin replay` re-indexes the items the stream indexer could not index, and
`fleetmem admin status` shows versions, index lag, what is kept for replay and the tables' item
counts. Each reads the stage's settings from the environment, as its functions have them
(FLEETMEM_TABLE_PREFIX, FLEETMEM_OPENSEARCH_*, FLEETMEM_BEDROCK_*, the AWS region and credentials).
`fleetmem.cli.app` registers the group (`add_commands`); each subcommand has its own `_add_*` and
`cmd_*` functions.
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path
from typing import Any

from fleetmem.cli.framework import Parser
from fleetmem.cli.stage import aws_backend_option, replay_queue, search_index, stage
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
    _add_status(asub, common)
    _add_preflight(asub, common)


def _admin_parser(asub: Any, common: argparse.ArgumentParser, name: str, *, help: str, stage: bool = False) -> Any:
    """The parser of `fleetmem admin NAME` (with `stage`: the options naming a deployed stage)."""
    p = asub.add_parser(name, parents=[common], help=help)
    if stage:
        aws_backend_option(p)
    return p


def _answered_by(p: argparse.ArgumentParser, handler: Any) -> None:
    """The last option of every admin action (`--json`), and the command that answers it."""
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=handler)


# --------------------------------------------------------------------------- admin replay


def _add_replay(asub: Any, common: argparse.ArgumentParser) -> None:
    p = _admin_parser(
        asub,
        common,
        "replay",
        help="re-index, from DynamoDB, every item the stream indexer kept after failing to index it",
    )
    _answered_by(p, cmd_replay)


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


# --------------------------------------------------------------------------- admin status


def _add_status(asub: Any, common: argparse.ArgumentParser) -> None:
    p = _admin_parser(
        asub,
        common,
        "status",
        help="the stage's versions, search index and its lag, records kept for replay, item counts per table",
    )
    p.add_argument(
        "--exact",
        action="store_true",
        help="count items by scanning every table (reads all of them; default: DynamoDB's approximate counts)",
    )
    _answered_by(p, cmd_status)


def cmd_status(args: argparse.Namespace, out: Output) -> int:
    from fleetmem import __version__
    from fleetmem.wiring import INDEX_VERSION

    settings, deps = stage(args)
    search = deps.search
    doc: dict[str, Any] = {
        "fleetmem_version": __version__,
        "stage_prefix": settings.aws.table_prefix,
        "index": {
            "name": search.index,
            "index_version": INDEX_VERSION,
            "embedding_model": search.model_id,
            "dimension": search.dim,
        },
    }
    problems: list[str] = []
    from fleetmem.wiring import sdk_client

    ddb = sdk_client("admin_tables", region=settings.aws.region)
    doc["tables"] = _table_counts(ddb, settings.aws.table_prefix, exact=args.exact, problems=problems)
    doc["index"]["documents"] = _index_counts(search, problems)
    indexed = _index_ids(search, problems) if args.exact and doc["index"]["documents"] is not None else None
    doc["index_lag"] = _lag(doc["tables"], indexed, ddb, settings.aws.table_prefix, args.exact)
    try:
        doc["kept_for_replay"] = replay_queue(settings).count()
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
    from fleetmem.wiring import TABLES

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


def _index_ids(search: Any, problems: list[str]) -> dict[str, Any] | None:
    """{"keys": every `doc_key` in the index}, or None (a problem noted) when the index does not answer."""
    try:
        return {"keys": _index_doc_keys(search)}
    except Exception as exc:
        problems.append(f"search index {search.index}: {type(exc).__name__}")
        return None


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


def _lag(tables: dict[str, Any], indexed: dict[str, Any] | None, ddb: Any, prefix: str, exact: bool) -> dict[str, Any]:
    """Index lag from the CLI. With `--exact`: the ids, per tenant, of the documents the tables'
    items make (facts neither expired nor superseded, every chunk of every page) against the ids
    of the documents in the index, so a document the index should not hold can never offset one
    it misses: `missing` (in the tables, not in the index) and `extra` (in the index, made by no
    item) are counted apart. The indexer's own measure, per batch, is the `SearchLagSeconds` metric."""
    lag: dict[str, Any] = {"metric": "SearchLagSeconds (CloudWatch, the stage's metrics namespace)"}
    if not exact or indexed is None:
        lag["note"] = "run with --exact to compare the documents the tables' items make with those in the index"
        return lag
    return {**lag, **_compare_ids(_table_doc_keys(ddb, prefix), indexed["keys"])}


#: Per tenant with a difference, at most this many ids of each kind are listed (all are counted).
_SHOWN_IDS = 5


def _compare_ids(expected: set[str], indexed: set[str]) -> dict[str, Any]:
    """`doc_key`s (`tenant|doc_id`) the tables make vs those the index holds -> counts per kind of
    document (`facts`, `chunks`) and, per tenant that differs, its missing and extra ids."""
    out: dict[str, Any] = {}
    for kind in ("fact", "chunk"):
        want = {k for k in expected if k.split("|", 1)[1].startswith(kind + ":")}
        have = {k for k in indexed if k.split("|", 1)[-1].startswith(kind + ":")}
        out[kind + "s"] = {
            "tables": len(want),
            "index": len(have),
            "missing": len(want - have),
            "extra": len(have - want),
        }
    tenants: dict[str, dict[str, Any]] = {}
    for label, keys in (("missing", expected - indexed), ("extra", indexed - expected)):
        for key in sorted(keys):
            tenant, _, doc_id = key.partition("|")
            row = tenants.setdefault(tenant, {"missing": 0, "extra": 0, "missing_ids": [], "extra_ids": []})
            row[label] += 1
            if len(row[label + "_ids"]) < _SHOWN_IDS:
                row[label + "_ids"].append(doc_id)
    out["tenants"] = tenants
    out["consistent"] = not tenants
    return out


def _table_doc_keys(ddb: Any, prefix: str) -> set[str]:
    """The `doc_key` of every document the tables' items make, as the stream indexer builds them:
    one per fact neither expired nor superseded, every chunk of every page (Scans of both tables;
    a row whose tenant no key can hold makes none, as the indexer indexes none)."""
    from fleetmem.memory.indexing import docs_for_page, fact_doc_id
    from fleetmem.tokens import id_problem
    from fleetmem.wiring import FACTS, PAGES, answers, doc_key, from_ddb, item_to_page

    keys: set[str] = set()
    facts = {
        "TableName": FACTS.physical_name(prefix),
        "FilterExpression": "typ = :f AND attribute_not_exists(expired_at) AND attribute_not_exists(superseded_by)",
        "ProjectionExpression": "#t, fact_id",
        "ExpressionAttributeNames": {"#t": "tenant"},
        "ExpressionAttributeValues": {":f": {"S": "fact"}},
    }
    for out in answers(ddb.scan, facts):
        for item in map(from_ddb, out.get("Items", [])):
            if item and not id_problem("tenant", str(item["tenant"])):
                keys.add(doc_key(str(item["tenant"]), fact_doc_id(str(item["fact_id"]))))
    pages = {
        "TableName": PAGES.physical_name(prefix),
        "FilterExpression": "sk = :p AND typ = :t",
        "ExpressionAttributeValues": {":p": {"S": "P"}, ":t": {"S": "page"}},
    }
    for out in answers(ddb.scan, pages):
        for item in map(from_ddb, out.get("Items", [])):
            if item and not id_problem("tenant", str(item["tenant"])):
                keys.update(doc_key(d.tenant, d.doc_id) for d in docs_for_page(item_to_page(item)))
    return keys


def _index_doc_keys(search: Any) -> set[str]:
    """Every `doc_key` in the index (a composite aggregation, 1,000 a page)."""
    keys: set[str] = set()
    after: dict[str, Any] | None = None
    while True:
        composite: dict[str, Any] = {"size": 1000, "sources": [{"k": {"terms": {"field": "doc_key"}}}]}
        if after:
            composite["after"] = after
        body = {"size": 0, "aggs": {"keys": {"composite": composite}}}
        out = search.client.search(index=search.index, body=body, allow_no_indices=True, ignore_unavailable=True)
        agg = out.get("aggregations", {}).get("keys", {})
        keys.update(str(b["key"]["k"]) for b in agg.get("buckets", []))
        after = agg.get("after_key")
        if not after or not agg.get("buckets"):
            return keys


def _function_versions(settings: Any, problems: list[str]) -> list[dict[str, Any]] | None:
    """Each function of the stage (`<prefix>-*`): its FLEETMEM_VERSION, published version and
    aliases, through the Lambda API (ListFunctions, ListAliases); None when that is not reachable."""
    from fleetmem.wiring import sdk_client

    prefix = f"{settings.aws.table_prefix}-"
    try:
        lam = sdk_client("admin_functions", region=settings.aws.region)
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
        for kind in ("facts", "chunks"):
            row = lag[kind]
            out.text(
                f"  index by id, {kind}: {row['tables']} the tables make, {row['index']} in the index, "
                f"{row['missing']} missing, {row['extra']} made by no item"
            )
        for tenant, row in sorted(lag["tenants"].items()):
            out.text(
                f"    tenant {tenant}: {row['missing']} missing (e.g. {', '.join(row['missing_ids']) or '-'}), "
                f"{row['extra']} extra (e.g. {', '.join(row['extra_ids']) or '-'})"
            )
        if lag["consistent"]:
            out.text("  the index holds exactly the documents the tables' items make")
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


# --------------------------------------------------------------------------- admin reindex


def _add_reindex(asub: Any, common: argparse.ArgumentParser) -> None:
    from fleetmem.wiring import DEFAULT_RATE

    p = _admin_parser(
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
    _answered_by(p, cmd_reindex)


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
    p = _admin_parser(
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
    _answered_by(p, cmd_copy_tables)


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


# --------------------------------------------------------------------------- admin preflight

#: The managed policy API Gateway's CloudWatch role needs, and how to set the role once per account
#: and region (docs/deploy.md, prerequisites).
APIGW_LOGS_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs"
APIGW_ROLE_FIX = (
    "Create a role API Gateway can assume with the managed policy AmazonAPIGatewayPushToCloudWatchLogs, "
    "then set it for the account and region: aws apigateway update-account --patch-operations "
    "op=replace,path=/cloudwatchRoleArn,value=<role ARN> (or set api.cloud_watch_role: true in the deploy "
    "config to let this stack own it; docs/deploy.md, prerequisites)."
)


def _add_preflight(asub: Any, common: argparse.ArgumentParser) -> None:
    p = _admin_parser(
        asub,
        common,
        "preflight",
        help="before `cdk deploy`: check the account preconditions the template needs (API Gateway's "
        "CloudWatch role, Bedrock model access) and print what to fix",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="PATH",
        help="the deploy config (default: $FLEETMEM_DEPLOY_CONFIG, then ./fleetmem.deploy.json)",
    )
    _answered_by(p, cmd_preflight)


def _deploy_config(path: str | None) -> Any:
    try:
        from infra.config import load_config
    except ImportError:
        raise CommandFailed.usage(
            "admin preflight reads the deploy config with the CDK app's own loader (infra.config), which is not "
            "importable here.",
            "Run it from the fleetmem checkout you deploy from (where `cdk deploy` runs).",
            code="invalid_config",
        ) from None
    try:
        return load_config(path)
    except Exception as exc:
        raise CommandFailed.usage(
            f"The deploy config does not load: {exc}", "Fix the config, then run it again.", code="invalid_config"
        ) from None


def preflight_checks(
    *, apigateway: Any, iam: Any, bedrock: Any, creates_cloud_watch_role: bool, models: list[str]
) -> list[dict[str, Any]]:
    """Each check: {check, status (ok | fail | unknown), detail, fix}. A check that cannot be made
    (the API refuses or does not answer) is `unknown`, never `ok`."""
    checks: list[dict[str, Any]] = []

    def add(check: str, status: str, detail: str, fix: str | None = None) -> None:
        checks.append({"check": check, "status": status, "detail": detail, "fix": fix})

    if creates_cloud_watch_role:
        add(
            "apigateway_cloudwatch_role",
            "ok",
            "the stack creates the account's API Gateway CloudWatch role (api.cloud_watch_role: true)",
        )
    else:
        try:
            arn = str(apigateway.get_account().get("cloudwatchRoleArn") or "")
        except Exception as exc:
            add(
                "apigateway_cloudwatch_role",
                "unknown",
                f"apigateway:GetAccount answered {type(exc).__name__}",
                "Run it with credentials allowed apigateway:GET on /account.",
            )
            arn = None
        if arn == "":
            add(
                "apigateway_cloudwatch_role",
                "fail",
                "API Gateway has no CloudWatch role in this account and region: the stage's execution and access "
                "logging fails the deploy (after the search domain was created).",
                APIGW_ROLE_FIX,
            )
        elif arn:
            name = arn.rsplit("/", 1)[-1]
            try:
                iam.get_role(RoleName=name)
                add("apigateway_cloudwatch_role", "ok", f"set: {arn}")
            except Exception as exc:
                missing = getattr(exc, "response", {}).get("Error", {}).get("Code") == "NoSuchEntity"
                if missing:
                    add(
                        "apigateway_cloudwatch_role",
                        "fail",
                        f"the account's API Gateway CloudWatch role {arn} no longer exists",
                        APIGW_ROLE_FIX,
                    )
                else:
                    add(
                        "apigateway_cloudwatch_role",
                        "unknown",
                        f"set to {arn}; iam:GetRole answered {type(exc).__name__}",
                    )
    for model in models:
        try:
            got = bedrock.get_foundation_model_availability(modelId=model)
        except Exception as exc:
            add(
                f"bedrock_model_access:{model}",
                "unknown",
                f"bedrock:GetFoundationModelAvailability answered {type(exc).__name__}",
                f"Check in the Bedrock console that {model} is enabled for this account and region.",
            )
            continue
        status = str(got.get("authorizationStatus") or "").upper()
        available = str(got.get("entitlementAvailability") or "").upper()
        if status == "AUTHORIZED" and available == "AVAILABLE":
            add(f"bedrock_model_access:{model}", "ok", "authorized and available")
        else:
            add(
                f"bedrock_model_access:{model}",
                "fail",
                f"authorization {status or '?'}, entitlement {available or '?'}: the functions' calls would be refused",
                f"Enable {model} in the Bedrock console (Model access) for this account and region.",
            )
    return checks


def cmd_preflight(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.wiring import sdk_client

    cfg = _deploy_config(args.config)
    models = [m for m in (cfg.embedding.model, cfg.llm.model) if m]
    checks = preflight_checks(
        apigateway=sdk_client("preflight_apigateway", region=cfg.region),
        iam=sdk_client("preflight_iam", region=cfg.region),
        bedrock=sdk_client("preflight_bedrock", region=cfg.region),
        creates_cloud_watch_role=cfg.api.cloud_watch_role,
        models=models,
    )
    failed = [c for c in checks if c["status"] == "fail"]
    if out.as_json:
        out.document(
            {
                "stage": cfg.stage,
                "region": cfg.region,
                "checks": checks,
                "ok": not failed,
                "contract_version": CONTRACT_VERSION,
            }
        )
    else:
        for c in checks:
            Output.err(f"{c['status']:>7}  {c['check']}: {c['detail']}")
            if c["status"] != "ok" and c["fix"]:
                Output.err(f"         fix: {c['fix']}")
        Output.err("Ready to deploy." if not failed else f"{len(failed)} precondition(s) to fix before `cdk deploy`.")
    return EXIT_OK if not failed else EXIT_FAILED
