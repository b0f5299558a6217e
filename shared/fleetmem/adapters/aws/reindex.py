"""Rebuild a stage's search index from DynamoDB, the source of truth (`fleetmem admin reindex`,
docs/operate.md "Rebuild the search index").

The phases, each recorded in a checkpoint (a JSON state file) so a stopped run continues where it
stopped:

1. plan: the tenants (one, or every tenant found in the facts and pages tables) with their item
   counts; items written before change numbers existed get one (`backfill_changes` of each store,
   so delta lists them), and pages written before name items existed get theirs
   (`DynamoPageStore.backfill_names`, D24: entity's alias and title resolution reads them); then
   each tenant's change position (`change_floor` of each store), and a new concrete index
   `<alias>-<UTC stamp>` is created (replicas as the stage's setting).
2. copy: every page and fact, tenant by tenant, read with the stores' `scan` (the pack export's
   read path), turned into documents exactly as the stream indexer builds them
   (`adapters/aws/stream.py`: `record_to_operations`' rules through `memory/indexing.py`),
   embedded in batches (`stream.embed_operations`), one `_bulk` per batch, at most `rate`
   documents a second. Searches and the stream indexer keep using the alias (the old index).
3. swap: the alias moves to the new index in one `_aliases` call (the old one is kept, or deleted
   with `drop_old`).
4. catch-up: everything changed since the copy began (`changed_after` / `deleted_after` of each
   store, from the planned change positions) is indexed again from its current state, so a write
   the stream indexer sent to the old index during the copy is in the new one. Tenants that first
   wrote during the copy are caught up from change 0. After the swap the stream indexer writes to
   the new index itself.

`tenant` given: that tenant only, written again into the index the alias points at (no new index,
no swap), then caught up the same way.

Known limit: a fact purged (`purge_fact`) while the copy runs has no change number; its document
can stay in the new index. Recall never shows it (fact reads go to the store).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fleetmem.adapters.aws.dynamo import call
from fleetmem.adapters.aws.opensearch import OpenSearchIndex
from fleetmem.adapters.aws.opensearch_bodies import rebuild_name
from fleetmem.adapters.aws.stream import IndexOp, embed_operations
from fleetmem.errors import Unavailable
from fleetmem.memory.indexing import doc_for_fact, docs_for_page, fact_doc_id
from fleetmem.models import Fact, SearchDoc
from fleetmem.tokens import id_problem

#: items read (and documents embedded and sent) per batch
BATCH = 50
KINDS = ("facts", "pages")
#: catch-up passes at most (each from the highest change the previous one saw)
CATCH_UP_PASSES = 5

Progress = Callable[[str], None]


@dataclass
class Checkpoint:
    """Where a rebuild stands (written after every batch)."""

    alias: str
    target: str
    started_at: str
    tenants: list[str]
    totals: dict[str, int]
    floors: dict[str, dict[str, int]]
    phase: str = "copy"  # copy | catch_up | done
    tenant_pos: int = 0
    kind_pos: int = 0
    after: str | None = None
    copied: int = 0
    docs: int = 0
    caught_up: int = 0
    left: list[str] = field(default_factory=list)


class StateFile:
    """The checkpoint on disk, replaced atomically (write a temporary file, then rename)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> Checkpoint | None:
        if not self.path.exists():
            return None
        return Checkpoint(**json.loads(self.path.read_text()))

    def save(self, point: Checkpoint) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(point), indent=1, sort_keys=True))
        os.replace(tmp, self.path)


class Pace:
    """At most `rate` documents a second on average (0: no limit)."""

    def __init__(
        self, rate: float, *, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.rate, self.clock, self.sleep = rate, clock, sleep
        self._next = clock()

    def take(self, n: int) -> None:
        if self.rate <= 0 or n <= 0:
            return
        now = self.clock()
        if self._next > now:
            self.sleep(self._next - now)
        self._next = max(self._next, now) + n / self.rate


def default_state_path(table_prefix: str, alias: str) -> Path:
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "fleetmem" / "reindex" / f"{table_prefix}--{alias}.json"


def discover_tenants(db: Any, tables: dict[str, str], tenant: str | None = None) -> dict[str, int]:
    """tenant -> its facts + pages, from one projected Scan of each table (`tp` is on every fact
    and page row; a page's derived rows and the counters carry none)."""
    counts: dict[str, int] = {}
    for kind, table in tables.items():
        req: dict[str, Any] = {
            "TableName": table,
            "ProjectionExpression": "tp, typ, sk",
            "FilterExpression": "attribute_exists(tp)" + (" AND tp = :t" if tenant else ""),
        }
        if tenant:
            req["ExpressionAttributeValues"] = {":t": {"S": tenant}}
        while True:
            out = call(db.scan, **req)
            for raw in out.get("Items", []):
                row = kind == "facts" and raw.get("typ", {}).get("S") == "fact"
                row = row or (kind == "pages" and raw.get("sk", {}).get("S") == "P")
                name = raw["tp"]["S"]
                counts[name] = counts.get(name, 0) + (1 if row else 0)
            if not out.get("LastEvaluatedKey"):
                break
            req["ExclusiveStartKey"] = out["LastEvaluatedKey"]
    # A row whose tenant breaks the id grammar (an old `a#b` row) belongs to no caller: no
    # credential can name it and the stores refuse its keys, so it is left out, not rebuilt.
    return {t: n for t, n in counts.items() if not id_problem("tenant", t)}


def fact_docs(facts: list[Fact]) -> tuple[list[SearchDoc], list[str]]:
    """(documents of the facts the index holds, doc ids of the written-off ones): the stream
    indexer's rule, an expired or superseded fact has no document."""
    keep = [doc_for_fact(f) for f in facts if f.expired_at is None and f.superseded_by is None]
    gone = [fact_doc_id(f.fact_id) for f in facts if f.expired_at is not None or f.superseded_by is not None]
    return keep, gone


class Rebuild:
    """One rebuild of the alias `search.alias` (see the module docstring)."""

    def __init__(
        self,
        stores: Any,
        search: OpenSearchIndex,
        embedder: Any,
        state: StateFile,
        *,
        tenant: str | None = None,
        rate: float,
        batch: int = BATCH,
        drop_old: bool = False,
        settle: timedelta | None = None,
        progress: Progress = lambda _line: None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.stores, self.search, self.embedder, self.state = stores, search, embedder, state
        self.tenant, self.batch, self.drop_old = tenant, max(1, batch), drop_old
        self.pace = Pace(rate)
        self.settle = settle if settle is not None else stores.facts.settle
        self.progress, self.now = progress, now
        self.tables = {"facts": stores.facts.table, "pages": stores.pages.table}

    # -- phases ---------------------------------------------------------------------------------

    def run(self, *, catch_up_only: bool = False) -> Checkpoint:
        point = self.state.load()
        if point is not None and point.alias != self.search.alias:
            raise ValueError(f"the state file {self.state.path} belongs to a rebuild of {point.alias}")
        if catch_up_only:
            if point is None or point.phase != "done":
                raise ValueError("no finished rebuild to catch up (run fleetmem admin reindex first)")
            point.phase = "catch_up"
        elif point is None or point.phase == "done":
            point = self.plan()
        writer = self._writer(point.target)
        if point.phase == "copy":
            self.copy(point, writer)
            if not self.tenant:
                point.left = self.search.swap_alias(point.target, drop_old=self.drop_old)
                gone = f" (left {', '.join(point.left)}{', deleted' if self.drop_old else ''})" if point.left else ""
                self.progress(f"swap: {self.search.alias} -> {point.target}{gone}")
            point.phase = "catch_up"
            self.state.save(point)
        if point.phase == "catch_up":
            self.catch_up(point, writer)
            point.phase = "done"
            self.state.save(point)
        return point

    def plan(self) -> Checkpoint:
        """Tenants, backfills (change numbers, name items), change positions, and the index to write:
        a new one (every tenant), or the one the alias points at (one tenant, indexed again in place;
        nothing is swapped)."""
        counts = discover_tenants(self.stores.aws.dynamodb, self.tables, self.tenant)
        tenants = [self.tenant] if self.tenant else sorted(counts)
        numbered = sum(self.stores.facts.backfill_changes(t) + self.stores.pages.backfill_changes(t) for t in tenants)
        if numbered:
            self.progress(f"backfill: {numbered} item(s) got a change number")
        named = sum(self.stores.pages.backfill_names(t, progress=self.progress) for t in tenants)
        if named:
            self.progress(f"backfill: {named} page(s) got their name items")
        floors = {t: self._floors(t) for t in tenants}
        start = self.now()
        if self.tenant:
            self.search.ensure_index()
            target = self.search.alias_targets()[0]
        else:
            target = rebuild_name(self.search.alias, start.strftime("%Y%m%dt%H%M%S%f"))
            self.search.create_index(target)
        point = Checkpoint(
            alias=self.search.alias,
            target=target,
            started_at=start.isoformat(),
            tenants=tenants,
            totals={t: counts.get(t, 0) for t in tenants},
            floors=floors,
        )
        self.state.save(point)
        self.progress(f"plan: {len(tenants)} tenant(s), {sum(point.totals.values())} item(s) into {target}")
        return point

    def copy(self, point: Checkpoint, writer: OpenSearchIndex) -> None:
        total = max(1, sum(point.totals.values()))
        while point.tenant_pos < len(point.tenants):
            tenant = point.tenants[point.tenant_pos]
            while point.kind_pos < len(KINDS):
                kind = KINDS[point.kind_pos]
                store = getattr(self.stores, kind)
                while True:
                    items, after = store.scan(tenant, after=point.after, limit=self.batch)
                    docs = fact_docs(items)[0] if kind == "facts" else [d for p in items for d in docs_for_page(p)]
                    self._write(writer, tenant, docs)
                    point.after, point.copied, point.docs = after, point.copied + len(items), point.docs + len(docs)
                    self.state.save(point)
                    self.progress(
                        f"copy: {point.copied}/{total} items ({min(100, 100 * point.copied // total)}%), "
                        f"{point.docs} docs, tenant {point.tenant_pos + 1}/{len(point.tenants)} {kind}"
                    )
                    if after is None:
                        break
                point.kind_pos, point.after = point.kind_pos + 1, None
                self.state.save(point)
            point.tenant_pos, point.kind_pos = point.tenant_pos + 1, 0
            self.state.save(point)

    def catch_up(self, point: Checkpoint, writer: OpenSearchIndex) -> None:
        """Index again everything changed since the plan's change positions, from the stores'
        current state; tenants first seen now start from change 0. Passes repeat from the highest
        change the last one saw until one finds nothing (at most `CATCH_UP_PASSES`): a write that
        lands while a pass reads and rewrites the same item is read again by the next."""
        if self.settle > timedelta(0):
            time.sleep(self.settle.total_seconds())  # the change indexes are eventually consistent
        tenants = (
            [self.tenant]
            if self.tenant
            else sorted(set(point.tenants) | set(discover_tenants(self.stores.aws.dynamodb, self.tables)))
        )
        for _ in range(CATCH_UP_PASSES):
            found = 0
            for tenant in tenants:
                floors = point.floors.setdefault(tenant, {"facts": 0, "pages": 0})
                n, floors["facts"] = self._catch_up_facts(writer, tenant, floors["facts"])
                m, floors["pages"] = self._catch_up_pages(writer, tenant, floors["pages"])
                found += n + m
                point.caught_up += n + m
                self.state.save(point)
            self.progress(f"catch-up: {point.caught_up} change(s) since the copy began")
            if not found:
                return

    # -- helpers --------------------------------------------------------------------------------

    def _floors(self, tenant: str) -> dict[str, int]:
        return {
            "facts": self.stores.fact_feed.change_floor(tenant, after=None),
            "pages": self.stores.page_feed.change_floor(tenant, since=None),
        }

    def _writer(self, target: str) -> OpenSearchIndex:
        s = self.search
        return OpenSearchIndex(
            s.endpoint,
            model_id=s.model_id,
            dim=s.dim,
            service=s.service,
            region=s._region,
            client=s.client,
            flavour=s.flavour,
            target=target,
        )

    def _embed(self, tenant: str, docs: list[SearchDoc]) -> list[SearchDoc]:
        """The docs with vectors (batches through the embedder port), paced to `rate`."""
        if not docs:
            return docs
        ops, failed = embed_operations([IndexOp("rebuild", "upsert", tenant, docs=tuple(docs))], self.embedder)
        if failed:
            raise Unavailable(
                "the embedding model failed during the rebuild", retry_after_seconds=5, reason="embedding"
            )
        self.pace.take(len(docs))
        return list(ops[0].docs)

    def _write(self, writer: OpenSearchIndex, tenant: str, docs: list[SearchDoc]) -> None:
        if docs:
            writer.upsert(self._embed(tenant, docs))  # one `_bulk`

    def _changes(
        self, fetch: Callable[[int], list[tuple[int, Any]]], floor: int, top: list[int]
    ) -> Iterator[list[Any]]:
        """Batches of the rows changed after `floor`; `top[0]` ends as the highest number seen."""
        seq = floor
        while True:
            rows = fetch(seq)
            if not rows:
                return
            top[0] = max(top[0], rows[-1][0])
            yield [row for _, row in rows]
            if len(rows) < self.batch:
                return
            seq = rows[-1][0]

    def _catch_up_facts(self, writer: OpenSearchIndex, tenant: str, floor: int) -> tuple[int, int]:
        facts, now, top, n = self.stores.fact_feed, self.now(), [floor], 0
        for batch in self._changes(
            lambda seq: facts.changed_after(
                tenant, seq=seq, now=now, world_only=False, limit=self.batch, retracted=True
            ),
            floor,
            top,
        ):
            keep, gone = fact_docs(batch)
            self._write(writer, tenant, keep)
            if gone:
                writer.delete(tenant, gone)
            n += len(batch)
        return n, top[0]

    def _catch_up_pages(self, writer: OpenSearchIndex, tenant: str, floor: int) -> tuple[int, int]:
        pages, feed, now, top = self.stores.pages, self.stores.page_feed, self.now(), [floor]
        slugs: set[str] = set()
        for heads in self._changes(
            lambda seq: feed.changed_after(tenant, seq=seq, world_only=False, limit=self.batch, now=now), floor, top
        ):
            slugs.update(h.slug for h in heads)
        for tombs in self._changes(
            lambda seq: feed.deleted_after(tenant, seq=seq, world_only=False, limit=self.batch), floor, top
        ):
            slugs.update(t.slug for t in tombs)
        for slug in sorted(slugs):  # each page as it is now: written again, or gone
            page = pages.get(tenant, slug)
            writer.replace_page(tenant, slug, self._embed(tenant, docs_for_page(page) if page is not None else []))
        return len(slugs), top[0]
