"""IdempotencyStore on DynamoDB (table `idempotency`, see docs/table-design.md).

A claim is one conditional PutItem: it succeeds when no record exists, the stored one has
expired (TTL deletion is lazy), or the stored one is an in-flight claim of the same request whose
lease has lapsed (its call was killed: a Lambda timeout or OOM). On failure DynamoDB hands back
the live record (`ReturnValuesOnConditionCheckFailure`), so a replay costs a single round trip.
The condition is checked atomically with the write, so of two retries taking over a lapsed
claim exactly one succeeds.

D22: a record is keyed by (tenant, client, request id) — the same `pk` attribute, its value
reshaped — and carries its receipt (client_request_id, state, updated_at, outcome); `owner` feeds
the `by_owner` index a client's receipts are listed from, newest first. No holder is recorded: a
killed Lambda cannot be observed, so the lease decides when a retry takes a claim over.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.dynamo import (
    WRITE_ID,
    DynamoStore,
    call,
    epoch,
    parse_ts,
    same_named,
    to_ddb,
    translate_client_error,
    ts,
    write_id,
)
from fleetmem.adapters.aws.tables import IDEMPOTENCY
from fleetmem.errors import Conflict
from fleetmem.models import IdempotencyRecord


def idem_pk(tenant: str, client_id: str, key: str) -> str:
    return keys.key(tenant, client_id, key)


def owner_key(tenant: str, client_id: str) -> str:
    return keys.key(tenant, client_id)


def _record(item: dict[str, Any]) -> IdempotencyRecord:
    return IdempotencyRecord(
        **same_named(item, "tenant", "client_id", "verb", "request_hash"),
        key=item["ikey"],
        # results are stored as JSON text: DynamoDB has no float type and must not reshape them
        result=json.loads(item["result"]) if item.get("result") is not None else None,
        created_at=parse_ts(item["created_at"]),  # type: ignore[arg-type]
        expires_at=parse_ts(item["expires_at"]),  # type: ignore[arg-type]
        lease_until=parse_ts(item.get("lease_until")),
        claim_id=item.get("claim_id"),
        client_request_id=item.get("client_request_id"),
        state=item.get("state") or ("running" if item.get("result") is None else "committed"),
        updated_at=parse_ts(item.get("updated_at")),
        holder=item.get("holder"),
        outcome=json.loads(item["outcome"]) if item.get("outcome") is not None else None,
    )


class DynamoIdempotencyStore(DynamoStore):
    TABLE = IDEMPOTENCY

    def claim(
        self, record: IdempotencyRecord, *, now: datetime, take_over: str | None = None
    ) -> IdempotencyRecord | None:
        from botocore.exceptions import ClientError

        item = {
            "pk": idem_pk(record.tenant, record.client_id, record.key),
            "owner": owner_key(record.tenant, record.client_id),
            "tenant": record.tenant,
            "client_id": record.client_id,
            "verb": record.verb,
            "ikey": record.key,
            "request_hash": record.request_hash,
            "result": json.dumps(record.result) if record.result is not None else None,
            "created_at": ts(record.created_at),
            "expires_at": ts(record.expires_at),
            "lease_until": ts(record.lease_until),
            "claim_id": record.claim_id,
            "client_request_id": record.client_request_id,
            "state": record.state,
            "updated_at": ts(record.updated_at or record.created_at),
            "holder": record.holder,
            "outcome": json.dumps(record.outcome) if record.outcome is not None else None,
            "ttl": epoch(record.expires_at),
        }
        stamp = write_id()
        stored = {**to_ddb(item), WRITE_ID: stamp}
        try:
            self._db.put_item(
                TableName=self.table,
                Item=stored,
                ConditionExpression=(
                    "attribute_not_exists(pk) OR expires_at <= :now OR #s = :cancelled OR "
                    "(attribute_not_exists(#r) AND request_hash = :h AND lease_until <= :now)"
                ),
                ExpressionAttributeNames={"#r": "result", "#s": "state"},
                ExpressionAttributeValues={
                    ":now": {"S": ts(now)},
                    ":h": {"S": record.request_hash},
                    ":cancelled": {"S": "cancelled"},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return None
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise translate_client_error(exc) from None
            if (exc.response.get("Item") or {}).get(WRITE_ID) == stamp:
                return None  # our own earlier attempt landed; the SDK retried after a lost response
            old = next(keys.owned_items([exc.response.get("Item")], record.tenant, table="idempotency"), None)
            if not old:  # the live record vanished between check and read: report a lost race
                raise Conflict("idempotency record changed concurrently") from None
            return _record(old)
        except Exception as exc:
            raise translate_client_error(exc) from None

    def complete(
        self,
        tenant: str,
        client_id: str,
        verb: str,
        key: str,
        result: dict,
        *,
        outcome: dict[str, Any] | None = None,
        at: datetime | None = None,
    ) -> None:
        sets = ["#r = :r", "#s = :committed"]
        values: dict[str, Any] = {":r": {"S": json.dumps(result)}, ":committed": {"S": "committed"}}
        if outcome is not None:
            sets.append("outcome = :o")
            values[":o"] = {"S": json.dumps(outcome)}
        if at is not None:
            sets.append("updated_at = :u")
            values[":u"] = {"S": ts(at)}
        call(
            self._db.update_item,
            TableName=self.table,
            Key={"pk": {"S": idem_pk(tenant, client_id, key)}},
            UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#r": "result", "#s": "state"},
            ExpressionAttributeValues=values,
        )

    def release(self, tenant: str, client_id: str, verb: str, key: str, claim_id: str | None = None) -> None:
        # only an in-flight claim is dropped (with claim_id: only that claim, not one that took
        # the key over after its lease lapsed); a completed result stays for replays
        condition = "attribute_not_exists(#r)"
        values: dict[str, Any] = {}
        if claim_id is not None:
            condition += " AND claim_id = :c"
            values[":c"] = {"S": claim_id}
        try:
            call(
                self._db.delete_item,
                TableName=self.table,
                Key={"pk": {"S": idem_pk(tenant, client_id, key)}},
                ConditionExpression=condition,
                ExpressionAttributeNames={"#r": "result"},
                **({"ExpressionAttributeValues": values} if values else {}),
            )
        except Conflict:
            return

    def get(self, tenant: str, client_id: str, key: str, *, now: datetime) -> IdempotencyRecord | None:
        raw = call(self._db.get_item, TableName=self.table, Key={"pk": {"S": idem_pk(tenant, client_id, key)}})
        item = next(keys.owned_items([raw.get("Item")], tenant, table="idempotency"), None)
        if not item or item.get("client_id") != client_id or item["expires_at"] <= ts(now):
            return None
        return _record(item)

    def recent(
        self,
        tenant: str,
        client_id: str,
        *,
        now: datetime,
        limit: int,
        state: str | None = None,
        before: tuple[datetime, str] | None = None,
    ) -> list[IdempotencyRecord]:
        """One bounded Query of the `by_owner` index, newest first (a filtered state may need a few
        pages: read until `limit` rows or the end)."""
        cond = "#o = :o" + (" AND created_at <= :b" if before is not None else "")
        values: dict[str, Any] = {":o": {"S": owner_key(tenant, client_id)}, ":now": {"S": ts(now)}}
        if before is not None:
            values[":b"] = {"S": ts(before[0])}
        filters = "expires_at > :now"
        if state is not None:
            filters += " AND #s = :s"
            values[":s"] = {"S": state}
        out: list[IdempotencyRecord] = []
        start: dict[str, Any] | None = None
        while len(out) < limit:
            page = call(
                self._db.query,
                TableName=self.table,
                IndexName="by_owner",
                KeyConditionExpression=cond,
                FilterExpression=filters,
                ExpressionAttributeNames={"#o": "owner", "#s": "state"} if state else {"#o": "owner"},
                ExpressionAttributeValues=values,
                ScanIndexForward=False,
                Limit=limit * 2,
                **({"ExclusiveStartKey": start} if start else {}),
            )
            for item in keys.owned_items(page.get("Items", []), tenant, table="idempotency"):
                rec = _record(item)
                if before is None or (rec.created_at, rec.key) < before:
                    out.append(rec)
            start = page.get("LastEvaluatedKey")
            if not start:
                break
        return out[:limit]

    def cancel(self, tenant: str, client_id: str, key: str, *, at: datetime) -> None:
        try:
            call(
                self._db.update_item,
                TableName=self.table,
                Key={"pk": {"S": idem_pk(tenant, client_id, key)}},
                UpdateExpression="SET #s = :c, updated_at = :u",
                ConditionExpression=(
                    "attribute_exists(pk) AND attribute_not_exists(#r) AND (#s = :run OR attribute_not_exists(#s))"
                ),
                ExpressionAttributeNames={"#r": "result", "#s": "state"},
                ExpressionAttributeValues={":c": {"S": "cancelled"}, ":u": {"S": ts(at)}, ":run": {"S": "running"}},
            )
        except Conflict:
            return
