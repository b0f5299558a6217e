"""AuditLog on DynamoDB (table `audit`, see docs/table-design.md).

`pk = "<tenant>#<subject>"`, `sk = "<at iso>#<unique>"`: one Query returns a subject's history
oldest first. Rows are append-only (PutItem conditional on a fresh key).
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from typing import Any

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.dynamo import DynamoStore, answers, parse_ts, query_all, same_named, time_key_range, ts
from fleetmem.adapters.aws.tables import AUDIT
from fleetmem.models import AuditEvent
from fleetmem.ports import ActivityFilter


def audit_pk(tenant: str, subject: str) -> str:
    return keys.key(tenant, subject)


_ORDER = itertools.count()


def audit_item(event: AuditEvent) -> dict[str, Any]:
    return {
        "pk": audit_pk(event.tenant, event.subject),
        # time first keeps the order; within one millisecond the append order (wall-clock ns,
        # then a process counter) decides, and the random tail keeps writers on other hosts apart
        "sk": f"{ts(event.at)}#{time.time_ns():020d}{next(_ORDER) % 1_000_000:06d}#{secrets.token_hex(4)}",
        "tenant": event.tenant,
        "subject": event.subject,
        "action": event.action,
        "actor": event.actor,
        "at": ts(event.at),
        "reason": event.reason,
        "provenance": event.provenance,
        "detail": json.dumps(event.detail, default=str) if event.detail else None,
    }


class DynamoAuditLog(DynamoStore):
    TABLE = AUDIT

    def append(self, event: AuditEvent) -> None:
        self._put_new(audit_item(event), ("pk", "sk"))

    def for_subject(self, tenant: str, subject: str) -> list[AuditEvent]:
        req: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": audit_pk(tenant, subject)}},
            "ScanIndexForward": True,
        }
        return [_event_of(item) for item in keys.owned_items(query_all(self._db, req), tenant, table="audit")]

    def activity(
        self, tenant: str, *, where: ActivityFilter, before: str | None, limit: int
    ) -> list[tuple[str, AuditEvent]]:
        """Queries of the `by_tenant` index (the tenant's partition), newest first, the `sk` range
        cut by the times and `before`, actor and actions as a filter; a position is the row's `sk`."""
        want = max(0, int(limit))
        if want == 0:
            return []
        # sk = "<at iso>#<unique>"
        span = time_key_range("sk", after=where.since, until=where.until, before=before or None)
        if span is None:
            return []
        extra, values, high = span
        cond = "tenant = :t" + extra
        values = {":t": {"S": tenant}} | values
        filters, names = [], {}
        if where.actor is not None:
            filters.append("actor = :a")
            values[":a"] = {"S": where.actor}
        if where.actions is not None:
            marks = [f":x{i}" for i in range(len(where.actions))]
            filters.append(f"#act IN ({', '.join(marks)})")
            names["#act"] = "action"
            values |= {m: {"S": a} for m, a in zip(marks, where.actions, strict=True)}
        req: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "by_tenant",
            "KeyConditionExpression": cond,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
            "Limit": min(max(want + 1, 25), 500),
        }
        if filters:
            req["FilterExpression"] = " AND ".join(filters)
        if names:
            req["ExpressionAttributeNames"] = names
        out: list[tuple[str, AuditEvent]] = []
        for item in keys.owned_items(query_all(self._db, req), tenant, table="audit"):
            if high is not None and item.get("sk") == high:
                continue
            out.append((str(item["sk"]), _event_of(item)))
            if len(out) >= want:
                break
        return out

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[list[AuditEvent], str | None]:
        """Every audit event of the tenant (a table Scan filtered on the tenant: an admin read of
        the whole table, for memory packs), each subject's events in order; `after` is the opaque
        position the previous batch returned."""
        req: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "tenant = :t",
            "ExpressionAttributeValues": {":t": {"S": tenant}},
            "Limit": max(1, int(limit)),
        }
        if after:
            req["ExclusiveStartKey"] = json.loads(after)
        events: list[AuditEvent] = []
        for out in answers(self._db.scan, req):
            events.extend(_event_of(item) for item in keys.owned_items(out.get("Items", []), tenant, table="audit"))
            lek = out.get("LastEvaluatedKey")
            if lek and len(events) >= limit:
                return events, json.dumps(lek, sort_keys=True)
        return events, None


def _event_of(item: dict[str, Any]) -> AuditEvent:
    return AuditEvent(
        **same_named(item, "tenant", "subject", "action", "actor"),
        at=parse_ts(item["at"]),  # type: ignore[arg-type]
        reason=item.get("reason"),
        provenance=item.get("provenance"),
        detail=json.loads(item["detail"]) if item.get("detail") else {},
    )
