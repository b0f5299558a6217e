"""FactStore on DynamoDB (table `facts`, see docs/table-design.md): the fact writes and reads by id, the
sequence, and the whole-tenant reads of memory packs. The other fact roles are `fact_decisions`,
`fact_feed` and `fact_listing`, over the same table (`fact_table.FactTable`)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Unpack

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.changes import transact_pending
from fleetmem.adapters.aws.dynamo import (
    WRITE_ID,
    call,
    from_ddb,
    parse_ts,
    to_ddb,
    translate_client_error,
    ts,
    write_id,
)
from fleetmem.adapters.aws.fact_table import (  # noqa: F401 (re-exported: the stream indexer and tools read items)
    FactTable,
    decision_pk,
    fact_items,
    fact_pk,
    fact_to_item,
    is_fact_item,
    item_to_fact,
)
from fleetmem.errors import Conflict, NotFound
from fleetmem.models import Fact
from fleetmem.ports.facts import Expiry, ExpiryOptions, FactPut, FactPutOptions, Withdrawal

_SEQ_LOCK = threading.Lock()
_ACTIVE = "attribute_not_exists(expired_at) AND attribute_not_exists(superseded_by)"


class DynamoFactStore(FactTable):
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

    def put(self, fact: Fact, **opts: Unpack[FactPutOptions]) -> None:
        q = FactPut.of(opts)
        supersede, audit, decided = q.supersede, q.audit, q.decided
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

    def many(self, tenant: str, fact_ids: Sequence[str]) -> list[Fact]:
        return self._batch_get(tenant, fact_ids)

    def expire(self, tenant: str, fact_id: str, **opts: Unpack[ExpiryOptions]) -> bool:
        q = Expiry.of(opts)
        values: dict[str, Any] = {":at": {"S": ts(q.at)}, ":by": {"S": q.actor}, ":fact": {"S": "fact"}}
        sets = "SET expired_at = :at, expired_by = :by, cs = :cs"
        if q.reason is not None:
            sets += ", expired_reason = :reason"
            values[":reason"] = {"S": q.reason}
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
            audits = self._audit_puts([q.audit] if q.audit is not None else [])
            if q.withdraw is not None:  # D23: the claim withdrawn in the same transaction
                audits.append({"Put": {"TableName": self.table, "Item": _withdrawal_item(tenant, q.withdraw)}})
            return [{"Update": update}, *audits]

        try:
            transact_pending(self._db, build=build)
            return True
        except Conflict:
            # The fact's condition failed: one read tells a missing fact from an expired one.
            if self.get(tenant, fact_id) is None:
                raise NotFound("no such fact") from None
            return False

    def withdrawals(self, tenant: str, claim: str, *, entity_slug: str | None, visibility: str) -> list[Withdrawal]:
        scopes = [None, *([entity_slug] if entity_slug else [])]
        request: dict[str, Any] = {
            self.table: {
                "Keys": [{"pk": {"S": _withdrawal_pk(tenant, claim, e, visibility)}} for e in scopes],
                "ConsistentRead": True,
            }
        }
        found: list[Withdrawal] = []
        while request:
            out = call(self._db.batch_get_item, RequestItems=request)
            for raw in out.get("Responses", {}).get(self.table, []):
                item = from_ddb(raw) or {}
                if item.get("typ") == "withdrawal" and item.get("tenant") == tenant:
                    found.append(_withdrawal_of(item))
            request = out.get("UnprocessedKeys") or {}
        return sorted(found, key=lambda w: w.at, reverse=True)

    def reinstate(self, tenant: str, withdrawals: Sequence[Withdrawal]) -> None:
        for w in withdrawals:
            key = {"pk": {"S": _withdrawal_pk(tenant, w.claim, w.entity_slug, w.visibility)}}
            call(self._db.delete_item, TableName=self.table, Key=key)

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
        req = self._tenant_range(
            "by_time", tenant, FilterExpression="attribute_not_exists(cs)", ProjectionExpression="pk"
        )
        return self._backfill(tenant, req)


# D23: one item per withdrawn claim, entity ("" for every entity) and visibility, in the facts table
# ("<tenant>#~wd#<claim>#<entity>#<visibility>"): read by key, never by an index or the stream
WITHDRAWN_PART = "~wd"


def _withdrawal_pk(tenant: str, claim: str, entity_slug: str | None, visibility: str) -> str:
    parts = (keys.part(claim), keys.part(entity_slug or ""), keys.part(visibility))
    return keys.SEP.join((keys.reserved(tenant, WITHDRAWN_PART), *parts))


def _withdrawal_item(tenant: str, w: Withdrawal) -> dict[str, Any]:
    item = {
        "pk": _withdrawal_pk(tenant, w.claim, w.entity_slug, w.visibility),
        "typ": "withdrawal",
        "tenant": tenant,
        "claim": w.claim,
        "entity_slug": w.entity_slug,
        "visibility": w.visibility,
        "fact_id": w.fact_id,
        "client_id": w.client_id,
        "at": ts(w.at),
    }
    return to_ddb(item)


def _withdrawal_of(item: dict[str, Any]) -> Withdrawal:
    at = parse_ts(item.get("at"))
    assert at is not None
    return Withdrawal(
        item["claim"], item.get("entity_slug") or None, item["visibility"], item["fact_id"], item["client_id"], at
    )
