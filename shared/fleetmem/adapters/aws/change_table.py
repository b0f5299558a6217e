"""The base of the tables whose rows carry change numbers (facts and pages, D14/D21): the settle
horizon, the tenant's numbering pass, change floor and backfill, over `fleetmem.adapters.aws.changes`."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.changes import Numbering, backfill_changes, change_floor, number_pending
from fleetmem.adapters.aws.dynamo import AwsClients, DynamoStore, query_all


class ChangeTable(DynamoStore):
    """A table with a per-tenant change counter and a `by_change` index (`tp`, `cs`)."""

    def __init__(self, clients: AwsClients, prefix: str, *, settle_ms: int = 0) -> None:
        super().__init__(clients, prefix)
        self.settle = timedelta(milliseconds=settle_ms)

    def _counter_key(self, tenant: str) -> dict[str, Any]:
        """The key of the tenant's change counter; its attribute names are the table's key names."""
        raise NotImplementedError

    def _number(self, tenant: str, now: datetime | None = None) -> Numbering:
        """D21: number the tenant's pending changes of this table before reading positions."""
        return number_pending(
            self._db, table=self.table, counter_key=self._counter_key(tenant), tp=keys.tenant(tenant), now=now
        )

    def _floor(self, tenant: str, since_query: dict[str, Any] | None) -> int:
        """D14: `changes.change_floor` of the tenant's counter (`since_query`: the time position's Query)."""
        return change_floor(
            self._db,
            table=self.table,
            counter_key=self._counter_key(tenant),
            tp=keys.tenant(tenant),
            since_query=since_query,
        )

    def _tenant_range(
        self, index: str, tenant: str, *, values: dict[str, Any] | None = None, **more: Any
    ) -> dict[str, Any]:
        """A Query of the tenant's whole range of a `tp`-keyed index (`values`: for `more`'s expressions)."""
        return self._index_request(index, "tp = :k", {":k": {"S": keys.tenant(tenant)}, **(values or {})}, **more)

    def _backfill(self, tenant: str, req: dict[str, Any]) -> int:
        """Number the rows `req` finds that have no change number (`fleetmem admin reindex`), as if
        just written; returns how many."""
        names = list(self._counter_key(tenant))
        found = [{k: i[k] for k in names} for i in query_all(self._db, req)]
        return backfill_changes(
            self._db, table=self.table, counter_key=self._counter_key(tenant), tp=keys.tenant(tenant), item_keys=found
        )
