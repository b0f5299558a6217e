"""ClientStore on DynamoDB (table `clients`, see docs/table-design.md).

The partition key is the token's SHA-256: the credential itself decides the tenant, so the token
lookup (every authenticated request) is one GetItem. `by_tenant` lists a tenant's credentials;
`by_token_id` finds the row `token revoke` names.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fleetmem.adapters.aws.dynamo import DynamoStore, answers, call, from_ddb, parse_ts, same_named, ts
from fleetmem.adapters.aws.tables import CLIENTS
from fleetmem.errors import Conflict
from fleetmem.models import ClientRecord


def _item(r: ClientRecord) -> dict[str, Any]:
    return {
        "pk": r.token_hash,
        **same_named(r, "token_id", "tenant", "client_id"),
        "scopes": sorted(r.scopes),
        "created_at": ts(r.created_at),
        "revoked_at": ts(r.revoked_at),
        **({"tier": r.tier} if r.tier else {}),
    }


def _record(item: dict[str, Any]) -> ClientRecord:
    return ClientRecord(
        token_hash=item["pk"],
        **same_named(item, "token_id", "tenant", "client_id"),
        scopes=frozenset(item.get("scopes") or ()),
        created_at=parse_ts(item["created_at"]),  # type: ignore[arg-type]
        revoked_at=parse_ts(item.get("revoked_at")),
        tier=item.get("tier") or None,
        last_used_at=parse_ts(item.get("last_used_at")),
    )


class DynamoClientStore(DynamoStore):
    TABLE = CLIENTS

    def create(self, record: ClientRecord) -> None:
        self._put_new(_item(record), ("pk",))

    def by_hash(self, token_hash: str) -> ClientRecord | None:
        out = call(self._db.get_item, TableName=self.table, Key={"pk": {"S": token_hash}})
        item = from_ddb(out.get("Item"))
        return _record(item) if item else None

    def list(self, tenant: str | None = None) -> list[ClientRecord]:
        req: dict[str, Any] = {"TableName": self.table}
        if tenant is not None:
            req.update(
                IndexName="by_tenant",
                KeyConditionExpression="tenant = :t",
                ExpressionAttributeValues={":t": {"S": tenant}},
            )
        op = self._db.query if tenant is not None else self._db.scan
        items = (from_ddb(x) for out in answers(op, req) for x in out.get("Items", []))
        out_items = [_record(i) for i in items if i and (tenant is None or i.get("tenant") == tenant)]
        return sorted(out_items, key=lambda r: (r.tenant, r.created_at, r.token_id))

    def revoke(self, token_id: str, *, at: datetime, tenant: str | None = None) -> bool:
        out = call(
            self._db.query,
            TableName=self.table,
            IndexName="by_token_id",
            KeyConditionExpression="token_id = :i",
            ExpressionAttributeValues={":i": {"S": token_id}},
        )
        changed = False
        for raw in out.get("Items", []):
            if tenant is not None and raw.get("tenant", {}).get("S") != tenant:
                continue
            try:
                call(
                    self._db.update_item,
                    TableName=self.table,
                    Key={"pk": raw["pk"]},
                    UpdateExpression="SET revoked_at = :at",
                    ConditionExpression="attribute_exists(pk) AND attribute_not_exists(revoked_at)",
                    ExpressionAttributeValues={":at": {"S": ts(at)}},
                )
                changed = True
            except Conflict:
                continue
        return changed

    def touch(self, token_hash: str, *, at: datetime) -> None:
        try:
            call(
                self._db.update_item,
                TableName=self.table,
                Key={"pk": {"S": token_hash}},
                UpdateExpression="SET last_used_at = :at",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":at": {"S": ts(at)}},
            )
        except Conflict:
            return  # the credential is gone: nothing to record
