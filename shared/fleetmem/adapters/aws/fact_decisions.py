"""`FactDecisions` on DynamoDB (D20): the pool a `remember` decision reads and the decided write."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Unpack

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.dynamo import AwsClients, as_int, call, parallel
from fleetmem.adapters.aws.fact_table import FactTable
from fleetmem.adapters.aws.facts import DynamoFactStore
from fleetmem.models import Fact
from fleetmem.ports import DecisionPool
from fleetmem.ports.facts import Decide, Decided, DecidedOptions, Decision, DecisionOptions


class DynamoFactDecisions(FactTable):
    def __init__(self, clients: AwsClients, prefix: str, *, settle_ms: int = 0) -> None:
        super().__init__(clients, prefix, settle_ms=settle_ms)
        self.store = DynamoFactStore(clients, prefix, settle_ms=settle_ms)

    def decision_pool(self, tenant: str, entity_slug: str | None, **opts: Unpack[DecisionOptions]) -> DecisionPool:
        q = Decision.of(opts)
        # The record and the pool are read at once. The pool comes from a GSI, eventually
        # consistent and read in no order with the record, so it may miss a write the record
        # already counts: the last `_RECENT` decided facts named by the record that the pool did
        # not list are read from the table itself. A pool newer than the record only fails the
        # write's condition (one more round).
        reads: list[Callable[[], Any]] = [
            lambda: (
                call(
                    self._db.get_item,
                    TableName=self.table,
                    Key=self._decision_key(tenant, entity_slug),
                    ConsistentRead=True,
                ).get("Item")
                or {}
            ),
            lambda: self._pool(tenant, entity_slug, q.now, q.limit),
        ]
        record, (seen, facts) = parallel(reads)
        version = as_int((record.get("v") or {}).get("N"))
        recent = [x["S"] for x in (record.get("recent") or {}).get("L", [])]
        missing = [i for i in recent if i not in seen]
        if missing:
            fresh = self._batch_get(tenant, missing, consistent=True)
            listed = {f.fact_id for f in facts}
            facts += [f for f in fresh if f.is_active(q.now) and f.fact_id not in listed]
            facts = [f for f in facts if f.fact_id not in {g.fact_id for g in fresh if not g.is_active(q.now)}]
        # a fact another listed fact superseded is history, even where the index still shows it active
        replaced = {f.supersedes for f in facts if f.supersedes}
        facts = sorted(
            (f for f in facts if f.fact_id not in replaced), key=lambda f: (f.created_at, f.seq), reverse=True
        )
        return DecisionPool(facts, (tenant, entity_slug, version, tuple(recent)))

    def _pool(self, tenant: str, entity_slug: str | None, now: datetime, limit: int) -> tuple[set[str], list[Fact]]:
        """(ids of every fact read, the active ones) — for no entity, the unattributed facts among
        the tenant's `limit` newest active ones."""
        if entity_slug is not None:
            ent = keys.key(tenant, entity_slug)
            it = self._query(tenant, "by_entity", "ent", ent, page_size=self._page_size(limit))
        else:
            it = self._query(tenant, "by_time", "tp", keys.tenant(tenant), page_size=self._page_size(limit))
        seen: set[str] = set()
        out: list[Fact] = []
        active = 0
        for f in it:
            if active >= limit:
                break
            seen.add(f.fact_id)
            if f.is_active(now):
                active += 1
                if entity_slug is not None or f.entity_slug is None:
                    out.append(f)
        return seen, out

    def put_decided(self, tenant: str, entity_slug: str | None, decide: Decide, **opts: Unpack[DecidedOptions]) -> None:
        # no lock to decide under: decide on the pool, and the decision record's condition tells
        # whether another decision committed since (Conflict: the caller decides again)
        q = Decided.of(opts)
        pool = q.pool if q.pool is not None else self.decision_pool(tenant, entity_slug, now=q.now, limit=q.limit)
        write = decide(pool)
        if write is not None:
            self.store.put(write.fact, supersede=write.supersede, audit=write.audit, decided=pool)

    def count_active(self, tenant: str, entity_slug: str, *, now: datetime, world_only: bool = True) -> int:
        return sum(
            1
            for f in self._query(tenant, "by_entity", "ent", keys.key(tenant, entity_slug), page_size=500)
            if f.is_active(now) and (not world_only or f.visibility == "world")
        )
