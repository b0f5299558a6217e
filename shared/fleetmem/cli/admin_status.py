"""`fleetmem admin status` (docs/operate.md, "The stream indexer"): the stage's versions, its search
index and the index's lag behind the tables, the records kept for replay, and item counts per table.
"""

from __future__ import annotations

import argparse
from typing import Any

from fleetmem.cli.admin_args import admin_parser, answered_by
from fleetmem.cli.stage import replay_queue, stage
from fleetmem.console import EXIT_OK, CommandFailed, Output
from fleetmem.protocol import CONTRACT_VERSION


def add_status(asub: Any, common: argparse.ArgumentParser) -> None:
    p = admin_parser(
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
    answered_by(p, cmd_status)


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
