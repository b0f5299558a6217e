"""DynamoDB stream records (facts and pages tables) -> search index operations.

Pure functions first (`records_to_operations`), then the small effectful steps the indexer
Lambda strings together (`embed_operations`, `apply_operations`, `handle_batch`). Documents are
built by the domain's `fleetmem.memory.indexing`, so both backends index identically.

- fact INSERT/MODIFY: upsert `fact:<id>`; a fact that is now expired or superseded is deleted;
- fact REMOVE (purge, or a TTL deletion by the service): delete `fact:<id>`;
- page INSERT/MODIFY: upsert every chunk of the new image and delete the chunks the old image
  had that the new one no longer has;
- page REMOVE: delete every chunk of the old image (delete-by-query when no image is present);
- derived rows (aliases, links, words) and the sequence counter are ignored.

Re-delivery is harmless: document ids are deterministic, so a replayed record rewrites the same
documents. Failures are reported per record (the stream's SequenceNumber), which is what a
Lambda event source mapping with `ReportBatchItemFailures` expects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from fleetmem.errors import PortError
from fleetmem.memory.indexing import EMBED_BATCH, chunk_prefix, doc_for_fact, docs_for_page, fact_doc_id
from fleetmem.memory.vectors import pack
from fleetmem.models import SearchDoc

Action = Literal["upsert", "delete", "delete_page"]


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


def record_id(record: dict[str, Any]) -> str:
    ddb = record.get("dynamodb") or {}
    return str(ddb.get("SequenceNumber") or record.get("eventID") or "")


def _image(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    if not raw:
        return None
    from fleetmem.adapters.aws.dynamo import from_ddb

    return from_ddb(raw)


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

    if shape == "fact":
        if event == "REMOVE" or new is None:
            src = old or {}
            return [IndexOp(rid, "delete", src["tenant"], doc_ids=(fact_doc_id(src["fact_id"]),))]
        fact = item_to_fact(new)
        if fact.expired_at is not None or fact.superseded_by is not None:
            return [IndexOp(rid, "delete", fact.tenant, doc_ids=(fact_doc_id(fact.fact_id),))]
        return [IndexOp(rid, "upsert", fact.tenant, docs=(doc_for_fact(fact),))]

    if shape == "page":
        if event == "REMOVE" or new is None:
            if old is not None and old.get("title") is not None:
                page = item_to_page(old)
                return [
                    IndexOp(rid, "delete", page.tenant, doc_ids=tuple(d.doc_id for d in docs_for_page(page)))
                ]
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
        if op.action == "upsert"
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
            docs[(i, j)] = (
                ops[i].docs[j].model_copy(update={"vector": pack(vec), "vector_model": embedder.model_id})
            )
    out = []
    for i, op in enumerate(ops):
        if op.action == "upsert" and any((i, j) in docs for j in range(len(op.docs))):
            op = replace(op, docs=tuple(docs.get((i, j), d) for j, d in enumerate(op.docs)))
        out.append(op)
    return out, sorted(failed)


def _apply_one(index: Any, op: IndexOp) -> None:
    if op.action == "upsert":
        index.upsert(list(op.docs))
    elif op.action == "delete":
        index.delete(op.tenant, list(op.doc_ids))
    else:
        index.delete_page(op.tenant, op.slug)


def apply_operations(index: Any, ops: Sequence[IndexOp]) -> list[str]:
    """Apply in stream order; returns the ids of records whose operations failed. Once a record
    fails, later operations on the same document are held back too, so a retry cannot reorder
    a delete before an older upsert."""
    failed: list[str] = []
    blocked: set[str] = set()
    for op in ops:
        keys = {d.doc_id for d in op.docs} | set(op.doc_ids) | ({chunk_prefix(op.slug)} if op.slug else set())
        keys = {f"{op.tenant}|{k}" for k in keys}
        if op.record_id in failed or keys & blocked:
            if op.record_id not in failed:
                failed.append(op.record_id)
            blocked |= keys
            continue
        try:
            _apply_one(index, op)
        except PortError:
            failed.append(op.record_id)
            blocked |= keys
    return failed


def handle_batch(records: Sequence[dict[str, Any]], *, index: Any, embedder: Any) -> BatchResult:
    """The whole indexer step for one stream batch."""
    ops, unreadable = records_to_operations(records)
    ops, unembedded = embed_operations(ops, embedder)
    skip = set(unreadable) | set(unembedded)
    failed = apply_operations(index, [op for op in ops if op.record_id not in skip])
    order = {record_id(r): n for n, r in enumerate(records)}
    all_failed = sorted(skip | set(failed), key=lambda r: order.get(r, len(order)))
    return BatchResult(operations=len(ops), failed=all_failed)
