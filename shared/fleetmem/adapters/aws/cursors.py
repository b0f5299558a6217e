"""CursorStore on DynamoDB (table `cursors`, see docs/table-design.md).

`pk = "<tenant>#<client_id>"`, `sk = session_id`. Every write is conditional on the stored
version, so two wakes of one session can never move the cursor backwards. The `ttl` attribute
(touched_at + SESSION_IDLE_DAYS) lets DynamoDB drop idle cursors; reads still check `touched_at`
because TTL deletion is lazy.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.dynamo import (
    AwsClients,
    DynamoStore,
    answers,
    as_int,
    call,
    conditional_put,
    epoch,
    parse_ts,
    query_all,
    to_ddb,
    ts,
)
from fleetmem.adapters.aws.tables import CLIENTS, CURSORS
from fleetmem.models import Cursor
from fleetmem.protocol import SESSION_IDLE_DAYS, SESSIONS_PER_CLIENT

_IDLE = timedelta(days=SESSION_IDLE_DAYS)


def cursor_pk(tenant: str, client_id: str) -> str:
    return keys.key(tenant, client_id)


def _item(c: Cursor, version: int) -> dict[str, Any]:
    return {
        "pk": cursor_pk(c.tenant, c.client_id),
        "sk": c.session_id,
        "tenant": c.tenant,
        "client_id": c.client_id,
        "since": ts(c.since),
        "slug": c.slug,
        "touched_at": ts(c.touched_at),
        "incomplete_streak": c.incomplete_streak,
        "version": version,
        "page_seq": c.page_seq,
        "fact_seq": c.fact_seq,
        "expiry": c.expiry,
        "ttl": epoch(c.touched_at + _IDLE),
    }


def _cursor(item: dict[str, Any]) -> Cursor:
    return Cursor(
        tenant=item["tenant"],
        client_id=item["client_id"],
        session_id=item["sk"],
        since=parse_ts(item["since"]),  # type: ignore[arg-type]
        slug=item.get("slug", ""),
        touched_at=parse_ts(item["touched_at"]),  # type: ignore[arg-type]
        incomplete_streak=as_int(item.get("incomplete_streak")),
        version=as_int(item.get("version")),
        page_seq=None if item.get("page_seq") is None else as_int(item["page_seq"]),
        fact_seq=None if item.get("fact_seq") is None else as_int(item["fact_seq"]),
        expiry=item.get("expiry"),
    )


class DynamoCursorStore(DynamoStore):
    TABLE = CURSORS

    def __init__(self, clients: AwsClients, prefix: str, *, max_sessions: int = SESSIONS_PER_CLIENT) -> None:
        super().__init__(clients, prefix)
        self.max_sessions = max_sessions
        self.clients_table = CLIENTS.physical_name(prefix)

    def count_live(self, tenant: str, *, now: datetime) -> int:
        """A cursor's partition is its client's: the tenant's client ids come from the clients
        `by_tenant` index (one Query), then each client's live cursors are counted (one Query with
        Select=COUNT each). A cursor of a client with no credential in this tenant is not counted."""
        req: dict[str, Any] = {
            "TableName": self.clients_table,
            "IndexName": "by_tenant",
            "KeyConditionExpression": "#t = :t",
            "ExpressionAttributeNames": {"#t": "tenant", "#c": "client_id"},
            "ExpressionAttributeValues": {":t": {"S": keys.tenant(tenant)}},
            "ProjectionExpression": "#t, #c",
        }
        client_ids = sorted(
            {
                i["client_id"]["S"]
                for i in query_all(self._db, req)
                if i.get("tenant", {}).get("S") == tenant and "S" in i.get("client_id", {})
            }
        )
        total = 0
        cutoff = ts(now - _IDLE)
        for client_id in client_ids:
            count: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :pk",
                "FilterExpression": "touched_at >= :cutoff",
                "Select": "COUNT",
                "ExpressionAttributeValues": {":pk": {"S": cursor_pk(tenant, client_id)}, ":cutoff": {"S": cutoff}},
            }
            total += sum(int(out.get("Count", 0)) for out in answers(self._db.query, count))
        return total

    def get(self, tenant: str, client_id: str, session_id: str, *, now: datetime) -> Cursor | None:
        out = call(
            self._db.get_item,
            TableName=self.table,
            Key={"pk": {"S": cursor_pk(tenant, client_id)}, "sk": {"S": session_id}},
            ConsistentRead=True,
        )
        item = next(keys.owned_items([out.get("Item")], tenant, table="cursors"), None)
        if item is None:
            return None
        cursor = _cursor(item)
        if now > cursor.touched_at + _IDLE:
            return None
        return cursor

    def for_tenant(self, tenant: str, *, now: datetime, limit: int) -> list[Cursor]:
        """One Query of the `by_tenant` index (the tenant's cursors by touched_at, newest first),
        from the idle cutoff on; eventually consistent, as a listing may be."""
        if limit <= 0:
            return []
        req: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "by_tenant",
            "KeyConditionExpression": "tenant = :t AND touched_at >= :cutoff",
            "ExpressionAttributeValues": {":t": {"S": keys.tenant(tenant)}, ":cutoff": {"S": ts(now - _IDLE)}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        out: list[Cursor] = []
        for answer in answers(self._db.query, req):
            out += [_cursor(i) for i in keys.owned_items(answer.get("Items", []), tenant, table="cursors")]
            if len(out) >= limit:
                break
        return out[:limit]

    def put(self, cursor: Cursor, *, expected_version: int | None) -> Cursor:
        version = (expected_version or 0) + 1
        stored = cursor.model_copy(update={"version": version})
        if expected_version is None:
            # "must not exist" also admits an idle-expired cursor TTL has not deleted yet
            cond = "attribute_not_exists(pk) OR touched_at < :cutoff"
            values: dict[str, Any] = {":cutoff": {"S": ts(cursor.touched_at - _IDLE)}}
        else:
            cond = "version = :v"
            values = {":v": {"N": str(expected_version)}}
        conditional_put(
            self._db,
            table=self.table,
            item=to_ddb(_item(stored, version)),
            key_names=("pk", "sk"),
            condition=cond,
            values=values,
        )
        if expected_version is None:
            self._evict(cursor.tenant, cursor.client_id)
        return stored

    def _evict(self, tenant: str, client_id: str) -> None:
        """Drop the client's least recently touched cursors beyond the cap (only new sessions can
        push a client over it, so only creation pays for this query)."""
        req: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": cursor_pk(tenant, client_id)}},
            "ProjectionExpression": "sk, touched_at",
            "ConsistentRead": True,  # the cursor just written must be counted
        }
        rows = [(i["touched_at"]["S"], i["sk"]["S"]) for i in query_all(self._db, req)]
        if len(rows) <= self.max_sessions:
            return
        rows.sort()
        for _, sk in rows[: len(rows) - self.max_sessions]:
            call(
                self._db.delete_item,
                TableName=self.table,
                Key={"pk": {"S": cursor_pk(tenant, client_id)}, "sk": {"S": sk}},
            )
