"""`FactListing` on DynamoDB: list_facts, memory_stats and the per-entity/session/time reads."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any, Unpack

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.dynamo import parallel, parse_ts, query_all, time_key_range, ts
from fleetmem.adapters.aws.fact_table import FactTable, fact_items, item_to_fact
from fleetmem.models import Fact, provenance_matches
from fleetmem.ports import EntityFacts, FactTallies
from fleetmem.ports.facts import FactList, FactListOptions, FactRead, FactReadOptions, keep_card_facts

#: What an entity's fact counts read of each fact: the keys `fact_items` checks (pk, tenant, typ),
#: its visibility and the times that decide its state and its last change.
_TALLY_ATTRS = ("pk", "tenant", "typ", "visibility", "created_at", "expired_at", "superseded_by", "valid_until")


class DynamoFactListing(FactTable):
    def by_entity(self, tenant: str, entity_slug: str, **opts: Unpack[FactReadOptions]) -> list[Fact]:
        return self._read(tenant, "by_entity", "ent", keys.key(tenant, entity_slug), FactRead.of(opts))

    def by_session(self, tenant: str, session_id: str, **opts: Unpack[FactReadOptions]) -> list[Fact]:
        """Facts of one session, newest first, without `vector`: the by_session index does not
        carry it (tables.FACT_INDEX_ATTRS) because its readers (recall, context_pack) never use it."""
        return self._read(tenant, "by_session", "sess", keys.key(tenant, session_id), FactRead.of(opts))

    def recent(self, tenant: str, **opts: Unpack[FactReadOptions]) -> list[Fact]:
        return self._read(tenant, "by_time", "tp", keys.tenant(tenant), FactRead.of(opts))

    def entity_tallies(
        self, tenant: str, slugs: Sequence[str], *, now: datetime, world_only: bool
    ) -> dict[str, EntityFacts]:
        """A Query of each slug's `by_entity` range, projecting only the key and state attributes
        (`_TALLY_ATTRS`), all of them at once (`dynamo.parallel`, bounded by its worker pool); each
        is one request per page of the entity's facts. No table scan."""
        wanted = list(dict.fromkeys(slugs))
        found = parallel([partial(self._tally, tenant, s, now, world_only) for s in wanted])
        return {s: t for s, t in zip(wanted, found, strict=True) if t is not None}

    def _tally(self, tenant: str, slug: str, now: datetime, world_only: bool) -> EntityFacts | None:
        req = self._index_request(
            "by_entity",
            "ent = :k",
            {":k": {"S": keys.key(tenant, slug)}},
            ProjectionExpression=", ".join(_TALLY_ATTRS),
        )
        active, latest, seen = 0, "", False
        at = ts(now) or ""
        for item in fact_items(query_all(self._db, req), tenant):
            if world_only and item.get("visibility", "world") != "world":
                continue
            seen = True
            lapsed = item.get("valid_until") if item.get("valid_until") and item["valid_until"] <= at else None
            if not item.get("expired_at") and not item.get("superseded_by") and not lapsed:
                active += 1
            # wire timestamps are fixed width: string order is time order
            latest = max(latest, *(str(item.get(a) or "") for a in ("created_at", "expired_at")), str(lapsed or ""))
        return EntityFacts(active=active, changed_at=parse_ts(latest or None)) if seen else None

    def _read(self, tenant: str, index: str, attr: str, key: str, q: FactRead) -> list[Fact]:
        """by_entity, by_session, recent: one index's range, newest first, as `q` asks. The three
        indexes sort on `ck` ("<created iso>#<seq>"), so `after` is a key condition on it: the
        Query reads only the items after that instant (no FilterExpression, no extra page)."""
        it = self._query(tenant, index, attr, key, after=q.after, page_size=self._page_size(q.limit))
        found = self._take(it, now=q.now, active_only=q.active_only, world_only=q.world_only, limit=q.limit)
        found = keep_card_facts(found, q.newest, lambda f: f.kind)
        return self._with_origins(tenant, found) if q.with_origin else found

    def _with_origins(self, tenant: str, facts: list[Fact]) -> list[Fact]:
        """`facts` with their `content_origin` (D24), which no index projects (a new projected
        attribute replaces the index, and a deployed table takes one index change per update):
        one BatchGetItem of the facts' items, that attribute only."""
        origins = self._origins(tenant, [f.fact_id for f in facts])
        return [
            f.model_copy(update={"content_origin": origins[f.fact_id]}) if f.fact_id in origins else f for f in facts
        ]

    def listing(self, tenant: str, **opts: Unpack[FactListOptions]) -> list[Fact]:
        """One Query, newest first, on the narrowest index the filter names (the entity's, the
        session's, else the tenant's by_time range), its `ck` range cut by the times and `before`;
        the other conditions are checked on the items read."""
        q = FactList.of(opts)
        now, where, before, limit = q.now, q.where, q.before, q.limit
        if where.entity_slug is not None:
            index, attr, key = "by_entity", "ent", keys.key(tenant, where.entity_slug)
        elif where.session_id is not None:
            index, attr, key = "by_session", "sess", keys.key(tenant, where.session_id)
        else:
            index, attr, key = "by_time", "tp", keys.tenant(tenant)
        # ck = "<created iso>#<seq:012d>"
        position = f"{ts(before[0])}#{int(before[1]):012d}" if before is not None else None
        span = time_key_range("ck", after=where.created_after, until=where.created_before, before=position)
        if span is None:
            return []
        extra, values, high = span
        cond = f"{attr} = :k" + extra
        values = {":k": {"S": key}} | values
        req = self._index_request(index, cond, values, ScanIndexForward=False, Limit=self._page_size(limit))

        def keep(item: dict[str, Any]) -> bool:
            if high is not None and item.get("ck") == high:
                return False
            f = item_to_fact(item)
            return (
                (where.entity_slug is None or f.entity_slug == where.entity_slug)
                and (where.session_id is None or f.session_id == where.session_id)
                and (where.kind is None or f.kind == where.kind)
                and (where.client_id is None or f.client_id == where.client_id)
                and (where.provenance is None or provenance_matches(f.provenance, where.provenance))
                and (where.state == "any" or f.status(now) == where.state)
            )

        found = self._take(
            (item_to_fact(i) for i in fact_items(query_all(self._db, req), tenant) if keep(i)),
            world_only=q.world_only,
            limit=limit,
        )
        if index == "by_time":
            # by_time does not carry why a fact was expired (tables.FACT_TIME_ATTRS): the items
            # themselves do, for the retracted ones listed
            full = {f.fact_id: f for f in self._batch_get(tenant, [f.fact_id for f in found if f.expired_at])}
            found = [full.get(f.fact_id, f) for f in found]
        return found

    def tallies(self, tenant: str, *, now: datetime, world_only: bool, since: datetime, top: int = 10) -> FactTallies:
        """One paginated Query of the tenant's `by_change` range (every fact, without its vector;
        facts from before change numbers get into it with `fleetmem admin reindex`)."""
        req = self._tenant_range("by_change", tenant)
        status = dict.fromkeys(("active", "superseded", "forgotten", "expired"), 0)
        per_entity: dict[str, int] = {}
        per_day: dict[str, int] = {}
        day0 = str(ts(since))[:10]
        for item in fact_items(query_all(self._db, req), tenant):
            f = item_to_fact(item)
            if world_only and f.visibility != "world":
                continue
            state = f.status(now)
            status[state] += 1
            if state == "active" and f.entity_slug:
                per_entity[f.entity_slug] = per_entity.get(f.entity_slug, 0) + 1
            day = str(item.get("created_at", ""))[:10]
            if day >= day0:
                per_day[day] = per_day.get(day, 0) + 1
        busiest = sorted(per_entity.items(), key=lambda e: (-e[1], e[0]))[: max(0, int(top))]
        return FactTallies(status=status, entities=len(per_entity), busiest=busiest, per_day=per_day)
