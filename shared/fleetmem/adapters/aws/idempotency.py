"""IdempotencyStore on DynamoDB (table `idempotency`, see docs/table-design.md).

A claim is one conditional PutItem: it succeeds when no record exists, the stored one has
expired (TTL deletion is lazy), or the stored one is an in-flight claim of the same request whose
lease has lapsed (its call was killed: a Lambda timeout or OOM). On failure DynamoDB hands back
the live record (`ReturnValuesOnConditionCheckFailure`), so a replay costs a single round trip.
The condition is checked atomically with the write, so of two retries taking over a lapsed
claim exactly one succeeds.
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


def idem_pk(tenant: str, client_id: str, verb: str, key: str) -> str:
    return keys.key(tenant, client_id, verb, key)


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
    )


class DynamoIdempotencyStore(DynamoStore):
    TABLE = IDEMPOTENCY

    def claim(self, record: IdempotencyRecord, *, now: datetime) -> IdempotencyRecord | None:
        from botocore.exceptions import ClientError

        item = {
            "pk": idem_pk(record.tenant, record.client_id, record.verb, record.key),
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
            "ttl": epoch(record.expires_at),
        }
        stamp = write_id()
        stored = {**to_ddb(item), WRITE_ID: stamp}
        try:
            self._db.put_item(
                TableName=self.table,
                Item=stored,
                ConditionExpression=(
                    "attribute_not_exists(pk) OR expires_at <= :now OR "
                    "(attribute_not_exists(#r) AND request_hash = :h AND lease_until <= :now)"
                ),
                ExpressionAttributeNames={"#r": "result"},
                ExpressionAttributeValues={":now": {"S": ts(now)}, ":h": {"S": record.request_hash}},
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

    def complete(self, tenant: str, client_id: str, verb: str, key: str, result: dict) -> None:
        call(
            self._db.update_item,
            TableName=self.table,
            Key={"pk": {"S": idem_pk(tenant, client_id, verb, key)}},
            UpdateExpression="SET #r = :r",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#r": "result"},
            ExpressionAttributeValues={":r": {"S": json.dumps(result)}},
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
                Key={"pk": {"S": idem_pk(tenant, client_id, verb, key)}},
                ConditionExpression=condition,
                ExpressionAttributeNames={"#r": "result"},
                **({"ExpressionAttributeValues": values} if values else {}),
            )
        except Conflict:
            return
