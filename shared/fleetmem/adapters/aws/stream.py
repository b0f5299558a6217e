"""DynamoDB stream records (facts and pages tables) -> search index operations.

A stream record is a hint, never a source: it names an item (`record_identity`: tenant, kind,
id) and the indexer reads that item again from DynamoDB (`read_current`) and indexes what the
table holds, exactly as `fleetmem admin replay` does. So a record the table did not write (an
invoke of the function with a made-up event) can make the index re-read and re-write the truth,
nothing else: a made-up INSERT/MODIFY of an item the table does not hold indexes nothing, a
made-up REMOVE of an item the table still holds leaves it indexed (rewritten as the table has
it), and a real REMOVE (purge, TTL deletion) finds the item gone and deletes its documents. Every
document's tenant is the tenant of the item read, which `keys.owned` checked against the key.

A record's own images may still decide to do nothing (skipping cannot harm): derived rows
(aliases, links, words), the sequence counters, a MODIFY that only numbered a pending change (D21:
`cs` / `ct` alone differ) and a page MODIFY whose documents are equal (`last_retrieved_at`) read
and embed nothing.

What a batch costs: one strongly consistent BatchGetItem for its items (a stream batch is at most
100 records, one call; more only for UnprocessedKeys), one embedder call per `EMBED_BATCH` texts
and one `_bulk`, plus one search per removed page (finding its chunks) and per page whose record
carried no image (keys only, which names no chunk to compare).

- fact: upsert `fact:<id>` as the table holds it; deleted when expired, superseded or gone;
- page: upsert every chunk of the page as the table holds it and delete the chunks the record's
  images named that it no longer has; every chunk deleted when the page is gone.

Re-delivery is harmless: document ids are deterministic, so a replayed record rewrites the same
documents. Failures are reported per record (the stream's SequenceNumber), which is what a
Lambda event source mapping with `ReportBatchItemFailures` expects (it retries from the lowest
one reported); a failed read fails every record that needed it. Each failed record's identity
(`record_identity`: tenant, kind, id) is what the indexer keeps for `fleetmem admin replay`
(adapters/aws/replay.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal
from urllib.parse import unquote

from fleetmem.errors import PortError
from fleetmem.memory.indexing import EMBED_BATCH, chunk_prefix, doc_for_fact, docs_for_page, fact_doc_id
from fleetmem.memory.vectors import pack
from fleetmem.models import Fact, Page, SearchDoc

#: The indexer's metrics (Powertools Metrics, the stage's POWERTOOLS_METRICS_NAMESPACE); alarms and
#: the dashboard name them through these constants.
METRIC_INDEXING_FAILURES = "IndexingFailures"  # Count per batch: records whose operations failed
METRIC_SEARCH_LAG = "SearchLagSeconds"  # per batch: the oldest record's age when indexed (Maximum)
METRIC_REPLAY_KEPT = "ReplayKept"  # Count: failed records' identities kept for `fleetmem admin replay`

#: `replace_page` (replay only): write the page's docs, then delete its other chunk docs.
Action = Literal["upsert", "delete", "delete_page", "replace_page"]
#: The kinds of record identity (`Kept.kind`).
KINDS = ("fact", "page")


@dataclass(frozen=True)
class IndexOp:
    record_id: str  # the stream record's SequenceNumber (or eventID when absent)
    action: Action
    tenant: str
    docs: tuple[SearchDoc, ...] = ()
    doc_ids: tuple[str, ...] = ()
    slug: str = ""


@dataclass
class BatchResult:
    operations: int = 0
    failed: list[str] = field(default_factory=list)

    def response(self) -> dict[str, Any]:
        """The partial-batch response Lambda reads (`ReportBatchItemFailures`)."""
        return {"batchItemFailures": [{"itemIdentifier": r} for r in self.failed]}


@dataclass(frozen=True, order=True)
class Kept:
    """What a failed record is kept as: the item it changed, read again from DynamoDB at replay."""

    tenant: str
    kind: str  # "fact" (id: the fact id) or "page" (id: the slug)
    id: str


def record_id(record: dict[str, Any]) -> str:
    ddb = record.get("dynamodb") or {}
    return str(ddb.get("SequenceNumber") or record.get("eventID") or "")


def _image(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    if not raw:
        return None
    from fleetmem.adapters.aws.dynamo import from_ddb

    return from_ddb(raw)


#: attributes a reader's numbering sets (D21): the change number and when it was assigned
_NUMBERING_ATTRS = frozenset({"cs", "ct"})


def numbered_only(old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """Whether a MODIFY only numbered a pending change (the images differ in `cs` / `ct` alone)."""
    if old is None or new is None:
        return False
    strip = lambda image: {k: v for k, v in image.items() if k not in _NUMBERING_ATTRS}  # noqa: E731
    return strip(old) == strip(new)


def is_ttl_removal(record: dict[str, Any]) -> bool:
    ident = record.get("userIdentity") or {}
    return ident.get("type") == "Service" and ident.get("principalId") == "dynamodb.amazonaws.com"


def record_to_operations(record: dict[str, Any]) -> list[IndexOp]:
    """One stream record -> its index operations (empty for rows the index does not hold).
    Raises ValueError for a record that cannot be understood."""
    from fleetmem.adapters.aws.facts import item_to_fact
    from fleetmem.adapters.aws.pages import item_to_page

    rid = record_id(record)
    event = record.get("eventName")
    ddb = record.get("dynamodb") or {}
    new = _image(ddb.get("NewImage"))
    old = _image(ddb.get("OldImage"))
    shape = (new or old or {}).get("typ")
    if event not in {"INSERT", "MODIFY", "REMOVE"}:
        raise ValueError("unknown stream event")
    if event == "MODIFY" and numbered_only(old, new):
        return []  # a reader numbered the change (D21): nothing indexed changed, nothing to embed

    if shape == "fact":
        if event == "REMOVE" or new is None:
            src = old or {}
            return [IndexOp(rid, "delete", src["tenant"], doc_ids=(fact_doc_id(src["fact_id"]),))]
        return fact_operations(rid, item_to_fact(new))

    if shape == "page":
        if event == "REMOVE" or new is None:
            if old is not None and old.get("title") is not None:
                page = item_to_page(old)
                return [IndexOp(rid, "delete", page.tenant, doc_ids=tuple(d.doc_id for d in docs_for_page(page)))]
            tenant, _, slug = str((old or {}).get("pk", "")).partition("#")
            return [IndexOp(rid, "delete_page", tenant, slug=slug)]
        page = item_to_page(new)
        docs = tuple(docs_for_page(page))
        old_docs = tuple(docs_for_page(item_to_page(old))) if old is not None and old.get("title") else None
        if event == "MODIFY" and old_docs == docs:
            return []  # e.g. only last_retrieved_at changed: nothing indexed changed, nothing to embed
        ops = [IndexOp(rid, "upsert", page.tenant, docs=docs, slug=page.slug)]
        if old_docs:
            keep = {d.doc_id for d in docs}
            stale = tuple(d.doc_id for d in old_docs if d.doc_id not in keep)
            if stale:
                ops.append(IndexOp(rid, "delete", page.tenant, doc_ids=stale))
        return ops

    if shape is None and event == "REMOVE":
        # keys-only record of a page row: fall back to a delete-by-query on the slug
        keys = _image(ddb.get("Keys")) or {}
        if keys.get("sk") == "P":
            tenant, _, slug = str(keys.get("pk", "")).partition("#")
            return [IndexOp(rid, "delete_page", tenant, slug=slug)]
    return []


def fact_operations(rid: str, fact: Fact) -> list[IndexOp]:
    """A fact as it now is -> its operation: a searchable fact is upserted, any other deleted."""
    if fact.expired_at is not None or fact.superseded_by is not None:
        return [IndexOp(rid, "delete", fact.tenant, doc_ids=(fact_doc_id(fact.fact_id),))]
    return [IndexOp(rid, "upsert", fact.tenant, docs=(doc_for_fact(fact),))]


def current_operations(
    rid: str, kept: Kept, *, fact: Fact | None = None, page: Page | None = None, named: Iterable[str] = ()
) -> list[IndexOp]:
    """The operations that make the index match an item as DynamoDB holds it now: the fact's or
    page's current version, or its removal when it is gone (`fact`/`page` None). `named`: chunk
    ids of this page that stream records' images listed; the ones the page no longer has are
    deleted by id (no search). Without any, the page's other chunks are found by a search."""
    if kept.kind == "fact":
        if fact is None:
            return [IndexOp(rid, "delete", kept.tenant, doc_ids=(fact_doc_id(kept.id),))]
        return fact_operations(rid, fact)
    if page is None:
        return [IndexOp(rid, "delete_page", kept.tenant, slug=kept.id)]
    docs = tuple(docs_for_page(page))
    named = set(named)
    if not named:
        return [IndexOp(rid, "replace_page", page.tenant, docs=docs, slug=page.slug)]
    ops = [IndexOp(rid, "upsert", page.tenant, docs=docs, slug=page.slug)]
    stale = tuple(sorted(named - {d.doc_id for d in docs}))
    if stale:
        ops.append(IndexOp(rid, "delete", page.tenant, doc_ids=stale))
    return ops


def record_identity(record: dict[str, Any]) -> Kept | None:
    """The item a stream record changed, as (tenant, kind, id): from its images' `tenant`,
    `fact_id` / `slug`, else from its keys (`<tenant>#<escaped id>`; the facts table has no sort
    key, a page row's is `P`). None for rows the index does not hold (counters, derived rows
    of nothing readable)."""
    ddb = record.get("dynamodb") or {}
    try:
        for raw in (ddb.get("NewImage"), ddb.get("OldImage")):
            image = _image(raw) or {}
            if image.get("typ") == "fact" and image.get("tenant") and image.get("fact_id"):
                return Kept(str(image["tenant"]), "fact", str(image["fact_id"]))
            if image.get("typ") == "page" and image.get("tenant") and image.get("slug"):
                return Kept(str(image["tenant"]), "page", str(image["slug"]))
        keys = _image(ddb.get("Keys")) or {}
    except (KeyError, ValueError, TypeError):
        return None
    tenant, sep, rest = str(keys.get("pk", "")).partition("#")
    if not (tenant and sep and rest) or rest.startswith("~"):
        return None
    sk = keys.get("sk")
    if sk is None:
        return Kept(tenant, "fact", unquote(rest))
    return Kept(tenant, "page", unquote(rest))  # a page row or one of its derived rows: the page


def record_hint(record: dict[str, Any]) -> tuple[Kept, frozenset[str]] | None:
    """What a record asks of the indexer: the item to read again, with the chunk ids its images
    name for that same page (its old chunks, to delete by id those the page no longer has). None
    when the record by its own images changes nothing indexed (skipping it cannot harm). Raises
    ValueError, KeyError or TypeError for a record that cannot be understood."""
    from fleetmem.adapters.aws.pages import item_to_page

    if not record_to_operations(record):
        return None
    kept = record_identity(record)
    if kept is None:
        return None
    named: set[str] = set()
    if kept.kind == "page":
        ddb = record.get("dynamodb") or {}
        for raw in (ddb.get("NewImage"), ddb.get("OldImage")):
            image = _image(raw) or {}
            same = image.get("tenant") == kept.tenant and image.get("slug") == kept.id
            if same and image.get("typ") == "page" and image.get("title") is not None:
                named.update(d.doc_id for d in docs_for_page(item_to_page(image)))
    return kept, frozenset(named)


#: BatchGetItem takes at most 100 keys; rounds of UnprocessedKeys before a read counts as failed.
READ_BATCH = 100
READ_ROUNDS = 6


def read_current(facts: Any, pages: Any, wanted: Iterable[Kept]) -> dict[Kept, Fact | Page | None]:
    """The items as DynamoDB holds them now, for the facts and pages stores given: strongly
    consistent BatchGetItem over both tables, `READ_BATCH` keys a call (a stream batch is one).
    An item missing, of another tenant (`keys.owned`) or of another shape reads as None. An
    identity whose tenant no key can hold (outside the id grammar) is left out: no item is there,
    and nothing of it is indexed. Raises PortError when a read fails."""
    from fleetmem.adapters.aws import keys
    from fleetmem.adapters.aws.dynamo import call, chunks
    from fleetmem.adapters.aws.facts import fact_pk, item_to_fact
    from fleetmem.adapters.aws.pages import PAGE_SK, item_to_page, page_pk
    from fleetmem.errors import Unavailable
    from fleetmem.tokens import id_problem

    asks: dict[tuple[str, str], Kept] = {}
    for k in dict.fromkeys(wanted):
        if id_problem("tenant", k.tenant) or k.kind not in KINDS:
            continue
        table = facts.table if k.kind == "fact" else pages.table
        asks[(table, fact_pk(k.tenant, k.id) if k.kind == "fact" else page_pk(k.tenant, k.id))] = k
    out: dict[Kept, Fact | Page | None] = dict.fromkeys(asks.values())
    for group in chunks(list(asks), READ_BATCH):
        request: dict[str, Any] = {}
        for table, pk in group:
            key = {"pk": {"S": pk}} if table == facts.table else {"pk": {"S": pk}, "sk": {"S": PAGE_SK}}
            request.setdefault(table, {"Keys": [], "ConsistentRead": True})["Keys"].append(key)
        for round_ in range(READ_ROUNDS):
            answer = call(facts._db.batch_get_item, RequestItems=request)
            for table, raws in (answer.get("Responses") or {}).items():
                for raw in raws:
                    asked = asks.get((table, str((raw.get("pk") or {}).get("S"))))
                    if asked is None:
                        continue
                    for item in keys.owned_items([raw], asked.tenant, table=asked.kind + "s"):
                        if item.get("typ") == asked.kind:
                            out[asked] = item_to_fact(item) if asked.kind == "fact" else item_to_page(item)
            request = answer.get("UnprocessedKeys") or {}
            if not request:
                break
            time.sleep(0.05 * 2**round_)  # DynamoDB asks for a backoff before the unprocessed keys
        if request:
            raise Unavailable("DynamoDB left keys unprocessed", retry_after_seconds=1)
    return out


def operations_for(
    current: Mapping[Kept, Fact | Page | None], rids: Mapping[Kept, str], named: Mapping[Kept, Iterable[str]]
) -> list[IndexOp]:
    """The operations that make the index match each item as `read_current` read it, each under
    its record id (`rids`); an identity `read_current` left out gets none."""
    ops: list[IndexOp] = []
    for kept, rid in rids.items():
        if kept in current:
            item = current[kept]
            fact = item if isinstance(item, Fact) else None
            page = item if isinstance(item, Page) else None
            ops += current_operations(rid, kept, fact=fact, page=page, named=named.get(kept, ()))
    return ops


def search_lag_s(records: Iterable[dict[str, Any]], now: float | None = None) -> float | None:
    """Seconds from the oldest record's write (`ApproximateCreationDateTime`, epoch seconds) to
    `now`: how far search is behind the tables for this batch. None without such a time."""
    times = []
    for record in records:
        at = (record.get("dynamodb") or {}).get("ApproximateCreationDateTime")
        if isinstance(at, int | float):
            times.append(float(at))
        elif isinstance(at, datetime):  # as the SDK returns it
            times.append(at.timestamp())
    if not times:
        return None
    return max(0.0, (time.time() if now is None else now) - min(times))


def records_to_operations(records: Iterable[dict[str, Any]]) -> tuple[list[IndexOp], list[str]]:
    """All records -> (operations in stream order, ids of records that could not be read)."""
    ops: list[IndexOp] = []
    bad: list[str] = []
    for record in records:
        try:
            ops.extend(record_to_operations(record))
        except (KeyError, ValueError, TypeError):
            bad.append(record_id(record))
    return ops, bad


def embed_operations(ops: Sequence[IndexOp], embedder: Any) -> tuple[list[IndexOp], list[str]]:
    """Give every upserted doc a vector of the embedder's model (docs that already carry one keep
    it). Returns (operations, ids of records whose embedding failed); without an embedder the
    docs are indexed keyword-only."""
    if embedder is None:
        return list(ops), []
    todo = [
        (i, j)
        for i, op in enumerate(ops)
        for j, d in enumerate(op.docs)
        if not (d.vector and d.vector_model == embedder.model_id)
    ]
    docs: dict[tuple[int, int], SearchDoc] = {}
    failed: set[str] = set()
    for start in range(0, len(todo), EMBED_BATCH):
        batch = todo[start : start + EMBED_BATCH]
        try:
            vectors = embedder.embed([ops[i].docs[j].text for i, j in batch])
        except PortError:
            failed.update(ops[i].record_id for i, _ in batch)
            continue
        for (i, j), vec in zip(batch, vectors, strict=True):
            docs[(i, j)] = ops[i].docs[j].model_copy(update={"vector": pack(vec), "vector_model": embedder.model_id})
    out = []
    for i, op in enumerate(ops):
        if any((i, j) in docs for j in range(len(op.docs))):
            op = replace(op, docs=tuple(docs.get((i, j), d) for j, d in enumerate(op.docs)))
        out.append(op)
    return out, sorted(failed)


def _op_keys(op: IndexOp) -> set[str]:
    keys = {d.doc_id for d in op.docs} | set(op.doc_ids) | ({chunk_prefix(op.slug)} if op.slug else set())
    return {f"{op.tenant}|{k}" for k in keys}


def _write_segment(index: Any, ops: Sequence[IndexOp]) -> set[str]:
    """Upserts and deletes of consecutive operations in ONE `index.write` (one `_bulk`): each
    document's last action in stream order is the one sent, which is the state the stream ends
    in. Returns the record ids whose documents the index did not take."""
    final: dict[str, tuple[str, str, SearchDoc | None]] = {}
    touched: dict[str, set[str]] = {}
    for op in ops:
        for doc in op.docs:
            key = f"{doc.tenant}|{doc.doc_id}"
            final.pop(key, None)
            final[key] = (doc.tenant, doc.doc_id, doc)
            touched.setdefault(key, set()).add(op.record_id)
        for doc_id in op.doc_ids:
            key = f"{op.tenant}|{doc_id}"
            final.pop(key, None)
            final[key] = (op.tenant, doc_id, None)
            touched.setdefault(key, set()).add(op.record_id)
    if not final:
        return set()
    upserts = [doc for _, _, doc in final.values() if doc is not None]
    deletes = [(tenant, doc_id) for tenant, doc_id, doc in final.values() if doc is None]
    try:
        refused = index.write(upserts, deletes)
    except PortError:
        refused = set(final)
    return {rid for key in refused for rid in touched.get(key, ())}


def apply_operations(index: Any, ops: Sequence[IndexOp]) -> list[str]:
    """Apply in stream order, upserts and deletes in one `_bulk` per run of them (a page removal
    without an image, and replay's page replacement, are searches of their own in between); returns
    the ids of records whose operations failed. Once a record fails, later operations on the same
    document are held back too, so a retry cannot reorder a delete before an older upsert."""
    failed: list[str] = []
    blocked: set[str] = set()
    segment: list[IndexOp] = []

    def fail(rids: Iterable[str], keys: set[str]) -> None:
        failed.extend(r for r in rids if r not in failed)
        blocked.update(keys)

    def flush() -> None:
        if segment:
            bad = _write_segment(index, segment)
            for op in segment:
                if op.record_id in bad:
                    fail([op.record_id], _op_keys(op))
            segment.clear()

    for op in ops:
        keys = _op_keys(op)
        if op.action in ("upsert", "delete"):
            if op.record_id in failed or keys & blocked:
                fail([op.record_id], keys)
            else:
                segment.append(op)
            continue
        flush()
        if op.record_id in failed or keys & blocked:
            fail([op.record_id], keys)
            continue
        try:
            if op.action == "delete_page":
                index.delete_page(op.tenant, op.slug)
            else:
                index.replace_page(op.tenant, op.slug, list(op.docs))
        except PortError:
            fail([op.record_id], keys)
    flush()
    return failed


def handle_batch(
    records: Sequence[dict[str, Any]], *, index: Any, embedder: Any, facts: Any, pages: Any
) -> BatchResult:
    """The whole indexer step for one stream batch: the records' items read again from the
    tables (`facts`, `pages`: the DynamoDB stores), then indexed as the tables hold them."""
    hinted: dict[Kept, list[str]] = {}
    named: dict[Kept, set[str]] = {}
    unreadable: list[str] = []
    for record in records:
        try:
            hint = record_hint(record)
        except (KeyError, ValueError, TypeError):
            unreadable.append(record_id(record))
            continue
        if hint is not None:
            hinted.setdefault(hint[0], []).append(record_id(record))
            named.setdefault(hint[0], set()).update(hint[1])
    try:
        current = read_current(facts, pages, hinted)
    except PortError:
        current = None
    failed: set[str] = set(unreadable)
    if current is None:
        failed.update(rid for rids in hinted.values() for rid in rids)
    ops = operations_for(current or {}, {k: rids[0] for k, rids in hinted.items()}, named)
    ops, unembedded = embed_operations(ops, embedder)
    skip = set(unembedded)
    broken = skip | set(apply_operations(index, [op for op in ops if op.record_id not in skip]))
    for rids in hinted.values():
        if rids[0] in broken:
            failed.update(rids)  # every record of an item whose documents did not go in
    order = {record_id(r): n for n, r in enumerate(records)}
    return BatchResult(operations=len(ops), failed=sorted(failed, key=lambda r: order.get(r, len(order))))
