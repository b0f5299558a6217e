"""FactStore on DynamoDB (table `facts`, see docs/table-design.md)."""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.audit import audit_item
from fleetmem.adapters.aws.changes import (
    PENDING,
    backfill_changes,
    change_floor,
    change_time,
    number_pending,
    read_counter,
    settle_horizon,
    transact_pending,
)
from fleetmem.adapters.aws.dynamo import (
    WRITE_ID,
    AwsClients,
    DynamoStore,
    answers,
    as_bytes,
    as_int,
    call,
    chunks,
    from_ddb,
    parallel,
    parse_ts,
    query_all,
    to_ddb,
    translate_client_error,
    ts,
    write_id,
)
from fleetmem.adapters.aws.tables import AUDIT, FACTS
from fleetmem.errors import Conflict, NotFound
from fleetmem.models import AuditEvent, Fact, provenance_matches
from fleetmem.ports import DecisionPool, FactFilter, FactTallies, FactWrite

_SEQ_LOCK = threading.Lock()
_ACTIVE = "attribute_not_exists(expired_at) AND attribute_not_exists(superseded_by)"
# D20: one decision record per (tenant, entity) — "<tenant>#~dec#<slug>" (the slug escaped by
# keys.part), "<tenant>#~dec#" for the unattributed facts — with the number of decided writes (`v`)
# and the ids of the last few (`recent`)
_DECISION_ID = "~dec"
_RECENT = 8


def decision_pk(tenant: str, encoded_slug: str) -> str:
    """The pk of the tenant's decision record for an entity (its slug as `keys.part` encodes it;
    "" for the facts about no entity)."""
    return f"{keys.reserved(tenant, _DECISION_ID)}{keys.SEP}{encoded_slug}"


def fact_pk(tenant: str, fact_id: str) -> str:
    return keys.key(tenant, fact_id)


def _ck(fact: Fact) -> str:
    return f"{ts(fact.created_at)}#{fact.seq:012d}"


def fact_to_item(fact: Fact) -> dict[str, Any]:
    item: dict[str, Any] = {
        "pk": fact_pk(fact.tenant, fact.fact_id),
        "typ": "fact",
        "tenant": fact.tenant,
        "tp": keys.tenant(fact.tenant),
        "fact_id": fact.fact_id,
        "seq": fact.seq,
        "ck": _ck(fact),
        "text": fact.text,
        "kind": fact.kind,
        "entity_slug": fact.entity_slug or None,
        "ent": keys.key(fact.tenant, fact.entity_slug) if fact.entity_slug else None,
        "provenance": fact.provenance,
        "visibility": fact.visibility,
        "session_id": fact.session_id or None,
        "sess": keys.key(fact.tenant, fact.session_id) if fact.session_id else None,
        "client_id": fact.client_id,
        "created_at": ts(fact.created_at),
        "valid_until": ts(fact.valid_until),
        "xp": keys.tenant(fact.tenant) if fact.valid_until else None,
        "xk": f"{ts(fact.valid_until)}#{fact.seq:012d}" if fact.valid_until else None,
        "expired_at": ts(fact.expired_at),
        "expired_reason": fact.expired_reason,
        "expired_by": fact.expired_by,
        "superseded_by": fact.superseded_by,
        "supersedes": fact.supersedes,
        "vector": fact.vector,
        "vector_model": fact.vector_model,
    }
    return item


def item_to_fact(item: dict[str, Any]) -> Fact:
    return Fact(
        tenant=item["tenant"],
        fact_id=item["fact_id"],
        seq=as_int(item.get("seq")),
        text=item["text"],
        kind=item.get("kind", "fact"),
        entity_slug=item.get("entity_slug"),
        provenance=item.get("provenance", ""),
        visibility=item.get("visibility", "world"),
        session_id=item.get("session_id"),
        client_id=item.get("client_id", ""),
        created_at=parse_ts(item["created_at"]),  # type: ignore[arg-type]
        valid_until=parse_ts(item.get("valid_until")),
        expired_at=parse_ts(item.get("expired_at")),
        expired_reason=item.get("expired_reason"),
        expired_by=item.get("expired_by"),
        superseded_by=item.get("superseded_by"),
        supersedes=item.get("supersedes"),
        vector=as_bytes(item.get("vector")),
        vector_model=item.get("vector_model"),
    )


def is_fact_item(item: dict[str, Any]) -> bool:
    return item.get("typ") == "fact"


def fact_items(raws: Iterable[dict[str, Any] | None], tenant: str) -> Iterator[dict[str, Any]]:
    """The fact items of raw answers that are the tenant's: every read goes through here, so an
    item of another tenant is dropped (and logged) as if missing; counters are skipped."""
    return (i for i in keys.owned_items(raws, tenant, table="facts") if is_fact_item(i))


class DynamoFactStore(DynamoStore):
    TABLE = FACTS

    def __init__(self, clients: AwsClients, prefix: str, *, settle_ms: int = 0) -> None:
        super().__init__(clients, prefix)
        self.settle = timedelta(milliseconds=settle_ms)
        self.audit_table = AUDIT.physical_name(prefix)

    def next_seq(self, tenant: str) -> int:
        from botocore.exceptions import ClientError

        # ADD is atomic in DynamoDB but not idempotent: if a response is lost and the SDK retries,
        # the counter would move twice. The write id makes such a retry fail its condition and read
        # back our own number instead. The process lock only serialises this process's own
        # allocations (DynamoDB orders concurrent processes itself; moto's server does not order
        # concurrent requests, so without it local runs could hand out one number twice).
        stamp = write_id()
        with _SEQ_LOCK:
            try:
                out = self._db.update_item(
                    TableName=self.table,
                    Key={"pk": {"S": keys.reserved(tenant, keys.SEQ)}},
                    UpdateExpression="ADD n :one SET typ = :typ, #w = :stamp",
                    ConditionExpression="attribute_not_exists(#w) OR #w <> :stamp",
                    ExpressionAttributeNames={"#w": WRITE_ID},
                    ExpressionAttributeValues={":one": {"N": "1"}, ":typ": {"S": "counter"}, ":stamp": stamp},
                    ReturnValues="UPDATED_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return int(out["Attributes"]["n"]["N"])
            except ClientError as exc:
                old = exc.response.get("Item") or {}
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException" and (
                    old.get(WRITE_ID) == stamp
                ):
                    return int(old["n"]["N"])
                raise translate_client_error(exc) from None
            except Exception as exc:
                raise translate_client_error(exc) from None

    def _audit_puts(self, events: Sequence[AuditEvent]) -> list[dict[str, Any]]:
        return [
            {
                "Put": {
                    "TableName": self.audit_table,
                    "Item": to_ddb(audit_item(e)),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
            for e in events
        ]

    def _transact(self, items: list[dict[str, Any]]) -> None:
        # The request token makes an SDK retry of a transaction that already landed a no-op.
        call(self._db.transact_write_items, TransactItems=items, ClientRequestToken=uuid.uuid4().hex)

    # -- decisions (D20) -------------------------------------------------------------------------

    def _decision_key(self, tenant: str, entity_slug: str | None) -> dict[str, Any]:
        return {"pk": {"S": decision_pk(tenant, keys.part(entity_slug or ""))}}

    def decision_pool(self, tenant: str, entity_slug: str | None, *, now: datetime, limit: int) -> DecisionPool:
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
            lambda: self._pool(tenant, entity_slug, now, limit),
        ]
        record, (seen, facts) = parallel(reads)
        version = as_int((record.get("v") or {}).get("N"))
        recent = [x["S"] for x in (record.get("recent") or {}).get("L", [])]
        missing = [i for i in recent if i not in seen]
        if missing:
            fresh = self._batch_get(tenant, missing, consistent=True)
            listed = {f.fact_id for f in facts}
            facts += [f for f in fresh if f.is_active(now) and f.fact_id not in listed]
            facts = [f for f in facts if f.fact_id not in {g.fact_id for g in fresh if not g.is_active(now)}]
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

    def put_decided(
        self,
        tenant: str,
        entity_slug: str | None,
        decide: Callable[[DecisionPool], FactWrite | None],
        *,
        now: datetime,
        limit: int,
        pool: DecisionPool | None = None,
    ) -> None:
        # no lock to decide under: decide on the pool, and the decision record's condition tells
        # whether another decision committed since (Conflict: the caller decides again)
        pool = pool if pool is not None else self.decision_pool(tenant, entity_slug, now=now, limit=limit)
        write = decide(pool)
        if write is not None:
            self.put(write.fact, supersede=write.supersede, audit=write.audit, decided=pool)

    def _decision_actions(self, fact: Fact, decided: DecisionPool | None) -> list[dict[str, Any]]:
        """The decision record's move from the pool's version to the next, conditional on it."""
        if decided is None:
            return []
        tenant, entity_slug, version, recent = decided.token
        if tenant != fact.tenant or entity_slug != fact.entity_slug:
            raise Conflict("the decision pool belongs to another entity")
        values: dict[str, Any] = {
            ":v": {"N": str(version + 1)},
            ":typ": {"S": "decision"},
            ":recent": {"L": [{"S": i} for i in [*recent, fact.fact_id][-_RECENT:]]},
        }
        condition = "attribute_not_exists(v)"
        if version:
            condition = "v = :prev"
            values[":prev"] = {"N": str(version)}
        update = {
            "TableName": self.table,
            "Key": self._decision_key(tenant, entity_slug),
            "UpdateExpression": "SET v = :v, typ = :typ, recent = :recent",
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        return [{"Update": update}]

    def put(
        self,
        fact: Fact,
        *,
        supersede: Fact | None = None,
        audit: Sequence[AuditEvent] = (),
        decided: DecisionPool | None = None,
    ) -> None:
        if supersede is not None and supersede.tenant != fact.tenant:
            raise Conflict("the superseded fact belongs to another tenant")
        base = fact_to_item(fact)
        stamp = write_id()

        def build(p: int) -> list[dict[str, Any]]:
            # One transaction: the new fact carrying a pending change number (D21), the old one's
            # expiry (a change of the old fact: the number before), the entity's decision record
            # (D20) and the audit trail. No counter: readers number the change.
            item = {**to_ddb({**base, "cs": p + 1 if supersede else p}), WRITE_ID: stamp}
            put = {"TableName": self.table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}
            return [{"Put": put}, *self._supersede_actions(fact, supersede, p), *decision, *audits]

        decision = self._decision_actions(fact, decided)
        audits = self._audit_puts(audit)
        try:
            transact_pending(self._db, build=build)
        except Conflict:
            # An SDK retry of a transaction that already landed fails its own conditions: the
            # stored fact carrying OUR write id means the write succeeded.
            out = call(
                self._db.get_item,
                TableName=self.table,
                Key={"pk": {"S": fact_pk(fact.tenant, fact.fact_id)}},
                ConsistentRead=True,
            )
            if (out.get("Item") or {}).get(WRITE_ID) != stamp:
                raise

    def _counter_key(self, tenant: str) -> dict[str, Any]:
        return {"pk": {"S": keys.reserved(tenant, keys.CHANGE)}}

    def _number(self, tenant: str, now: datetime | None = None) -> Any:
        """D21: number the tenant's pending fact changes before reading positions."""
        return number_pending(
            self._db, table=self.table, counter_key=self._counter_key(tenant), tp=keys.tenant(tenant), now=now
        )

    def _supersede_actions(self, fact: Fact, supersede: Fact | None, n: int) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if supersede is not None:
            items.append(
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": {"pk": {"S": fact_pk(supersede.tenant, supersede.fact_id)}},
                        "UpdateExpression": "SET expired_at = :at, superseded_by = :by, cs = :cs",
                        "ConditionExpression": f"attribute_exists(pk) AND {_ACTIVE}",
                        "ExpressionAttributeValues": {
                            ":at": {"S": ts(fact.created_at)},
                            ":by": {"S": fact.fact_id},
                            ":cs": {"N": str(n)},
                        },
                    }
                }
            )
        return items

    def get(self, tenant: str, fact_id: str) -> Fact | None:
        out = call(self._db.get_item, TableName=self.table, Key={"pk": {"S": fact_pk(tenant, fact_id)}})
        return next((item_to_fact(i) for i in fact_items([out.get("Item")], tenant)), None)

    # -- queries -------------------------------------------------------------------------------

    def _query(
        self, tenant: str, index: str, key_attr: str, key: str, *, after: datetime | None = None, page_size: int = 100
    ) -> Iterator[Fact]:
        """Newest first over one GSI partition, lazily paged."""
        req: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": index,
            "ScanIndexForward": False,
            "Limit": page_size,
        }
        values: dict[str, Any] = {":k": {"S": key}}
        cond = f"{key_attr} = :k"
        if after is not None:
            # ck = "<created iso>#<seq>"; "~" sorts after every digit, so this is created_at > after
            cond += " AND ck > :after"
            values[":after"] = {"S": f"{ts(after)}#~"}
        req["KeyConditionExpression"] = cond
        req["ExpressionAttributeValues"] = values
        for item in fact_items(query_all(self._db, req), tenant):
            yield item_to_fact(item)

    @staticmethod
    def _take(
        facts: Iterator[Fact],
        *,
        world_only: bool,
        limit: int,
        now: datetime | None = None,
        active_only: bool = False,
        keep: Callable[[Fact], bool] | None = None,
    ) -> list[Fact]:
        """The first `limit` of `facts` that pass: active at `now` (`active_only`), world-visible
        (`world_only`), and `keep`."""
        out: list[Fact] = []
        if limit <= 0:
            return out
        for f in facts:
            if active_only and now is not None and not f.is_active(now):
                continue
            if world_only and f.visibility != "world":
                continue
            if keep is not None and not keep(f):
                continue
            out.append(f)
            if len(out) >= limit:
                break
        return out
        for f in facts:
            if active_only and not f.is_active(now):
                continue
            if world_only and f.visibility != "world":
                continue
            out.append(f)
            if len(out) >= limit:
                break
        return out

    @staticmethod
    def _page_size(limit: int) -> int:
        # a little headroom so a few hidden (expired/private) facts do not cost a second page
        return max(10, min(limit * 2, 500))

    def by_entity(
        self,
        tenant: str,
        entity_slug: str,
        *,
        now: datetime,
        active_only: bool = True,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        it = self._query(tenant, "by_entity", "ent", keys.key(tenant, entity_slug), page_size=self._page_size(limit))
        return self._take(it, now=now, active_only=active_only, world_only=world_only, limit=limit)

    def by_session(
        self,
        tenant: str,
        session_id: str,
        *,
        now: datetime,
        active_only: bool = True,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        """Facts of one session, newest first, without `vector`: the by_session index does not
        carry it (tables.FACT_INDEX_ATTRS) because its readers (recall, context_pack) never use it."""
        it = self._query(tenant, "by_session", "sess", keys.key(tenant, session_id), page_size=self._page_size(limit))
        return self._take(it, now=now, active_only=active_only, world_only=world_only, limit=limit)

    def recent(
        self,
        tenant: str,
        *,
        now: datetime,
        after: datetime | None = None,
        active_only: bool = True,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        it = self._query(tenant, "by_time", "tp", keys.tenant(tenant), after=after, page_size=self._page_size(limit))
        return self._take(it, now=now, active_only=active_only, world_only=world_only, limit=limit)

    def created_after(
        self,
        tenant: str,
        *,
        after: datetime,
        after_seq: int | None,
        now: datetime,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        # ck = "<created iso>#<seq:012d>": "~" sorts after every digit (created_at > after)
        start = f"{ts(after)}#" + ("~" if after_seq is None else f"{int(after_seq):012d}")
        req: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "by_time",
            "KeyConditionExpression": "tp = :k AND ck > :after",
            "ExpressionAttributeValues": {":k": {"S": keys.tenant(tenant)}, ":after": {"S": start}},
            "ScanIndexForward": True,
            "Limit": self._page_size(limit),
        }
        horizon = settle_horizon(now, self.settle)
        settled: Iterator[Fact] = (item_to_fact(i) for i in fact_items(query_all(self._db, req), tenant))
        if horizon is not None:  # not settled: an earlier write may still be on its way into the index
            settled = itertools.takewhile(lambda f: f.created_at <= horizon, settled)
        return self._take(settled, now=now, active_only=True, world_only=world_only, limit=limit)

    def many(self, tenant: str, fact_ids: Sequence[str]) -> list[Fact]:
        return self._batch_get(tenant, fact_ids)

    def _batch_get(self, tenant: str, fact_ids: Sequence[str], *, consistent: bool = False) -> list[Fact]:
        wanted = list(dict.fromkeys(fact_ids))
        found: dict[str, Fact] = {}
        for group in chunks(wanted, 100):
            wanted_keys = [{"pk": {"S": fact_pk(tenant, fid)}} for fid in group]
            consistency = {"ConsistentRead": True} if consistent else {}
            request: dict[str, Any] = {self.table: {"Keys": wanted_keys, **consistency}}
            while request:
                out = call(self._db.batch_get_item, RequestItems=request)
                for item in fact_items(out.get("Responses", {}).get(self.table, []), tenant):
                    found[item["fact_id"]] = item_to_fact(item)
                request = out.get("UnprocessedKeys") or {}
        return [found[f] for f in fact_ids if f in found]

    def count_active(self, tenant: str, entity_slug: str, *, now: datetime, world_only: bool = True) -> int:
        return sum(
            1
            for f in self._query(tenant, "by_entity", "ent", keys.key(tenant, entity_slug), page_size=500)
            if f.is_active(now) and (not world_only or f.visibility == "world")
        )

    # -- listing and tallies (list_facts, memory_stats) ----------------------------------------

    def listing(
        self,
        tenant: str,
        *,
        now: datetime,
        world_only: bool,
        where: FactFilter,
        before: tuple[datetime, int] | None = None,
        limit: int = 50,
    ) -> list[Fact]:
        """One Query, newest first, on the narrowest index the filter names (the entity's, the
        session's, else the tenant's by_time range), its `ck` range cut by the times and `before`;
        the other conditions are checked on the items read."""
        if where.entity_slug is not None:
            index, attr, key = "by_entity", "ent", keys.key(tenant, where.entity_slug)
        elif where.session_id is not None:
            index, attr, key = "by_session", "sess", keys.key(tenant, where.session_id)
        else:
            index, attr, key = "by_time", "tp", keys.tenant(tenant)
        # ck = "<created iso>#<seq:012d>": "~" sorts after every digit, "#" before every ck of that instant
        low = f"{ts(where.created_after)}#~" if where.created_after is not None else None
        highs = [f"{ts(where.created_before)}#"] if where.created_before is not None else []
        if before is not None:
            highs.append(f"{ts(before[0])}#{int(before[1]):012d}")
        high = min(highs) if highs else None
        values: dict[str, Any] = {":k": {"S": key}}
        cond = f"{attr} = :k"
        if low is not None and high is not None:
            if low >= high:
                return []
            cond += " AND ck BETWEEN :lo AND :hi"  # inclusive: an item at `high` is skipped below
            values |= {":lo": {"S": low}, ":hi": {"S": high}}
        elif high is not None:
            cond += " AND ck < :hi"
            values[":hi"] = {"S": high}
        elif low is not None:
            cond += " AND ck > :lo"
            values[":lo"] = {"S": low}
        req: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": index,
            "KeyConditionExpression": cond,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
            "Limit": self._page_size(limit),
        }

        def keep(item: dict[str, Any]) -> bool:
            if high is not None and item.get("ck") == high:
                return False
            f = item_to_fact(item)
            return (
                (where.entity_slug is None or f.entity_slug == where.entity_slug)
                and (where.session_id is None or f.session_id == where.session_id)
                and (where.kind is None or f.kind == where.kind)
                and (where.provenance is None or provenance_matches(f.provenance, where.provenance))
                and (where.state == "any" or f.status(now) == where.state)
            )

        found = self._take(
            (item_to_fact(i) for i in fact_items(query_all(self._db, req), tenant) if keep(i)),
            world_only=world_only,
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
        req: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "by_change",
            "KeyConditionExpression": "tp = :k",
            "ExpressionAttributeValues": {":k": {"S": keys.tenant(tenant)}},
        }
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

    # -- changes -------------------------------------------------------------------------------

    def expire(
        self,
        tenant: str,
        fact_id: str,
        *,
        at: datetime,
        reason: str | None,
        actor: str,
        audit: AuditEvent | None = None,
    ) -> bool:
        values: dict[str, Any] = {":at": {"S": ts(at)}, ":by": {"S": actor}, ":fact": {"S": "fact"}}
        sets = "SET expired_at = :at, expired_by = :by, cs = :cs"
        if reason is not None:
            sets += ", expired_reason = :reason"
            values[":reason"] = {"S": reason}
        # read-time expiry (valid_until) counts as already expired, like the other stores
        condition = (
            f"attribute_exists(pk) AND typ = :fact AND {_ACTIVE}"
            " AND (attribute_not_exists(valid_until) OR valid_until > :at)"
        )

        def build(n: int) -> list[dict[str, Any]]:
            # the expiry is a change of the fact: it takes a pending change number (delta's
            # retracted[], D21), in the same transaction as the audit row
            update = {
                "TableName": self.table,
                "Key": {"pk": {"S": fact_pk(tenant, fact_id)}},
                "UpdateExpression": sets,
                "ConditionExpression": condition,
                "ExpressionAttributeValues": {**values, ":cs": {"N": str(n)}},
            }
            return [{"Update": update}, *self._audit_puts([audit] if audit is not None else [])]

        try:
            transact_pending(self._db, build=build)
            return True
        except Conflict:
            # The fact's condition failed: one read tells a missing fact from an expired one.
            if self.get(tenant, fact_id) is None:
                raise NotFound("no such fact") from None
            return False

    def changed_after(
        self,
        tenant: str,
        *,
        seq: int,
        now: datetime,
        world_only: bool = True,
        limit: int = 50,
        retracted: bool = False,
    ) -> list[tuple[int, Fact]]:
        # D21: pending changes are numbered next to the listing (one concurrent round); without a
        # settle horizon (an index read as consistent) a pass that numbered something lists again,
        # so what it numbered is listed at once; with one, what it numbered has not settled yet
        # anyway and comes on a later wake
        numbering, listed = parallel(
            [
                lambda: self._number(tenant, now),
                lambda: self._list_changes(
                    tenant, seq=seq, now=now, world_only=world_only, limit=limit, retracted=retracted
                ),
            ]
        )
        if numbering.fresh and settle_horizon(now, self.settle) is None:
            return self._list_changes(tenant, seq=seq, now=now, world_only=world_only, limit=limit, retracted=retracted)
        return listed

    def _list_changes(
        self, tenant: str, *, seq: int, now: datetime, world_only: bool, limit: int, retracted: bool
    ) -> list[tuple[int, Fact]]:
        """Numbered changes only (`cs` below 2**53: a pending one is never a position), ascending."""
        if int(seq) >= PENDING - 1:
            return []  # no number is above the largest position (and BETWEEN would be empty and refused)
        req = keys.numbered_changes(self.table, tenant, seq, page_size=self._page_size(limit))
        out_: list[tuple[int, Fact]] = []
        horizon = settle_horizon(now, self.settle)
        if limit <= 0:
            return out_
        for out in answers(self._db.query, req):
            for item in fact_items(out.get("Items", []), tenant):
                if horizon is not None and change_time(item, "created_at") > str(ts(horizon)):
                    return out_  # not settled: an earlier number may still be on its way into the index
                fact = item_to_fact(item)
                written_off = fact.expired_at is not None or fact.superseded_by is not None
                if not fact.is_active(now) and not (retracted and written_off):
                    continue  # (a TTL expiry alone is listed by expired_between)
                if world_only and fact.visibility != "world":
                    continue
                out_.append((as_int(item["cs"]), fact))
                if len(out_) >= limit:
                    return out_
        return out_

    def expired_between(
        self,
        tenant: str,
        *,
        after: datetime,
        after_seq: int | None,
        until: datetime,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        if after > until:
            return []
        # xk = "<valid_until>#<seq:012d>"; "~" sorts after every digit (BETWEEN is inclusive)
        low = f"{ts(after)}#" + ("~" if after_seq is None else f"{int(after_seq) + 1:012d}")
        req: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "by_expiry",
            "KeyConditionExpression": "xp = :k AND xk BETWEEN :low AND :until",
            "ExpressionAttributeValues": {
                ":k": {"S": keys.tenant(tenant)},
                ":low": {"S": low},
                ":until": {"S": f"{ts(until)}#~"},
            },
            "ScanIndexForward": True,
            "Limit": self._page_size(limit),
        }
        found = (item_to_fact(item) for item in fact_items(query_all(self._db, req), tenant))
        return self._take(found, keep=_lapsed_in_place, world_only=world_only, limit=limit)

    def change_floor(
        self, tenant: str, *, after: datetime | None, walk: bool = False, after_seq: int | None = None
    ) -> int:
        # ck = "<created iso>#<seq:012d>"; "~" sorts after every digit (created_at > after)
        start = f"{ts(after)}#" + ("~" if after_seq is None else f"{int(after_seq):012d}")
        if walk and after is not None:
            self._number(tenant)
            top = read_counter(self._db, table=self.table, key=self._counter_key(tenant))
            req: dict[str, Any] = {
                "TableName": self.table,
                "IndexName": "by_change",
                "KeyConditionExpression": "tp = :k AND cs < :p",
                "ExpressionAttributeValues": {":k": {"S": keys.tenant(tenant)}, ":p": {"N": str(PENDING)}},
                "ScanIndexForward": True,
                "Limit": 100,
            }
            for item in fact_items(query_all(self._db, req), tenant):
                if f"{item.get('created_at', '')}#{as_int(item.get('seq')):012d}" > start:
                    return min(top, as_int(item["cs"]) - 1)
            return top
        since_query = None
        if after is not None:
            since_query = {
                "IndexName": "by_time",
                "KeyConditionExpression": "tp = :k AND ck > :after",
                "ExpressionAttributeValues": {":k": {"S": keys.tenant(tenant)}, ":after": {"S": start}},
            }
        return change_floor(
            self._db,
            table=self.table,
            counter_key=self._counter_key(tenant),
            tp=keys.tenant(tenant),
            since_query=since_query,
        )

    def purge(self, tenant: str, fact_id: str) -> bool:
        try:
            call(
                self._db.delete_item,
                TableName=self.table,
                Key={"pk": {"S": fact_pk(tenant, fact_id)}},
                ConditionExpression="typ = :fact",  # never the sequence counter
                ExpressionAttributeValues={":fact": {"S": "fact"}},
            )
        except Conflict:
            return False
        return True

    # -- memory packs (fleetmem.pack) ----------------------------------------------------------

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[list[Fact], str | None]:
        """Every fact of the tenant in any state, by (created_at, seq) ascending (the by_time
        index, then the items themselves); `after` is the last `ck` of the previous batch."""
        req: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "by_time",
            "KeyConditionExpression": "tp = :k" + (" AND ck > :after" if after else ""),
            "ExpressionAttributeValues": {":k": {"S": tenant}, **({":after": {"S": after}} if after else {})},
            "ProjectionExpression": "fact_id, ck",
            "ScanIndexForward": True,
            "Limit": max(1, int(limit)),
        }
        out = call(self._db.query, **req)
        rows = [from_ddb(raw) or {} for raw in out.get("Items", [])]
        facts = self.many(tenant, [r["fact_id"] for r in rows if r.get("fact_id")])
        return facts, (rows[-1]["ck"] if rows and out.get("LastEvaluatedKey") else None)

    def raise_seq(self, tenant: str, at_least: int) -> None:
        from botocore.exceptions import ClientError

        try:
            self._db.update_item(
                TableName=self.table,
                Key={"pk": {"S": keys.reserved(tenant, keys.SEQ)}},
                UpdateExpression="SET n = :v, typ = :typ",
                ConditionExpression="attribute_not_exists(n) OR n < :v",
                ExpressionAttributeValues={":v": {"N": str(int(at_least))}, ":typ": {"S": "counter"}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise translate_client_error(exc) from None  # else: the counter is already above
        except Exception as exc:
            raise translate_client_error(exc) from None

    def backfill_changes(self, tenant: str) -> int:
        """Number the tenant's facts written before change numbers existed (no `cs`), so delta
        lists them (`fleetmem admin reindex`); returns how many."""
        req: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "by_time",
            "KeyConditionExpression": "tp = :k",
            "FilterExpression": "attribute_not_exists(cs)",
            "ProjectionExpression": "pk",
            "ExpressionAttributeValues": {":k": {"S": keys.tenant(tenant)}},
        }
        found = [{"pk": i["pk"]} for i in query_all(self._db, req)]
        return backfill_changes(
            self._db, table=self.table, counter_key=self._counter_key(tenant), tp=keys.tenant(tenant), item_keys=found
        )


def _lapsed_in_place(fact: Fact) -> bool:
    """Expired by its validity, not replaced by another fact (what `expired_between` lists)."""
    return fact.expired_at is None and fact.superseded_by is None
