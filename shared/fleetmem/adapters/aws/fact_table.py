"""The facts table (`tables.FACTS`) every DynamoDB fact role reads and writes: item conversion, the
keys, and `FactTable`, the base the role stores (`facts`, `fact_decisions`, `fact_feed`,
`fact_listing`) share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.audit import audit_item
from fleetmem.adapters.aws.change_table import ChangeTable
from fleetmem.adapters.aws.dynamo import AwsClients, as_bytes, as_int, call, chunks, parse_ts, query_all, to_ddb, ts
from fleetmem.adapters.aws.tables import AUDIT, FACTS
from fleetmem.errors import Conflict
from fleetmem.models import AuditEvent, Fact
from fleetmem.ports import DecisionPool

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
        "content_origin": fact.content_origin,
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
        content_origin=item.get("content_origin"),
    )


def is_fact_item(item: dict[str, Any]) -> bool:
    return item.get("typ") == "fact"


def fact_items(raws: Iterable[dict[str, Any] | None], tenant: str) -> Iterator[dict[str, Any]]:
    """The fact items of raw answers that are the tenant's: every read goes through here, so an
    item of another tenant is dropped (and logged) as if missing; counters are skipped."""
    return (i for i in keys.owned_items(raws, tenant, table="facts") if is_fact_item(i))


class FactTable(ChangeTable):
    """One role over the facts table: the shared reads and the transaction helpers."""

    TABLE = FACTS

    def __init__(self, clients: AwsClients, prefix: str, *, settle_ms: int = 0) -> None:
        super().__init__(clients, prefix, settle_ms=settle_ms)
        self.audit_table = AUDIT.physical_name(prefix)

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

    def _decision_key(self, tenant: str, entity_slug: str | None) -> dict[str, Any]:
        return {"pk": {"S": decision_pk(tenant, keys.part(entity_slug or ""))}}

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

    def _counter_key(self, tenant: str) -> dict[str, Any]:
        return {"pk": {"S": keys.reserved(tenant, keys.CHANGE)}}

    def _query(
        self, tenant: str, index: str, key_attr: str, key: str, *, after: datetime | None = None, page_size: int = 100
    ) -> Iterator[Fact]:
        """Newest first over one GSI partition, lazily paged."""
        values: dict[str, Any] = {":k": {"S": key}}
        cond = f"{key_attr} = :k"
        if after is not None:
            # ck = "<created iso>#<seq>"; "~" sorts after every digit, so this is created_at > after
            cond += " AND ck > :after"
            values[":after"] = {"S": f"{ts(after)}#~"}
        req = self._index_request(index, cond, values, ScanIndexForward=False, Limit=page_size)
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

    @staticmethod
    def _page_size(limit: int) -> int:
        # a little headroom so a few hidden (expired/private) facts do not cost a second page
        return max(10, min(limit * 2, 500))

    def _origins(self, tenant: str, fact_ids: Sequence[str]) -> dict[str, str]:
        """fact id -> `content_origin` of those of `fact_ids` that have one (BatchGetItem, that
        attribute and the ownership keys only)."""
        found: dict[str, str] = {}
        for group in chunks(list(dict.fromkeys(fact_ids)), 100):
            wanted_keys = [{"pk": {"S": fact_pk(tenant, fid)}} for fid in group]
            request: dict[str, Any] = {
                self.table: {
                    "Keys": wanted_keys,
                    "ProjectionExpression": "pk, typ, tenant, fact_id, content_origin",
                }
            }
            while request:
                out = call(self._db.batch_get_item, RequestItems=request)
                for item in fact_items(out.get("Responses", {}).get(self.table, []), tenant):
                    if item.get("content_origin"):
                        found[item["fact_id"]] = item["content_origin"]
                request = out.get("UnprocessedKeys") or {}
        return found

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
