"""Copy one stage's tables into another stage's (`fleetmem admin copy-tables`, docs/operate.md
"Restore a stage"): the tables a point-in-time restore made (which carry no stream, TTL or PITR
settings) into the tables a deploy created (which do), item for item.

Each source table is read with a Scan and written with BatchWriteItem (25 items a call,
UnprocessedItems retried with backoff). Items are copied as stored, counters included, so change
numbers and sequences continue where the source left them. The destination tables must be empty:
nothing is merged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fleetmem.adapters.aws.dynamo import call
from fleetmem.adapters.aws.tables import TABLES
from fleetmem.errors import Unavailable

BATCH = 25
_RETRIES = 8


def non_empty(db: Any, prefix: str) -> list[str]:
    """The tables of `prefix` that hold at least one item."""
    return [
        spec.physical_name(prefix)
        for spec in TABLES
        if call(db.scan, TableName=spec.physical_name(prefix), Limit=1).get("Items")
    ]


def copy_tables(
    db: Any, source: str, dest: str, *, progress: Callable[[str, int], None] = lambda _t, _n: None
) -> dict[str, int]:
    """Every item of `source`'s tables into `dest`'s; returns the items copied per table."""
    copied: dict[str, int] = {}
    for spec in TABLES:
        name, target = spec.physical_name(source), spec.physical_name(dest)
        req: dict[str, Any] = {"TableName": name}
        copied[spec.logical] = 0
        while True:
            out = call(db.scan, **req)
            items = out.get("Items", [])
            for start in range(0, len(items), BATCH):
                _write(db, target, items[start : start + BATCH])
            copied[spec.logical] += len(items)
            progress(spec.logical, copied[spec.logical])
            if not out.get("LastEvaluatedKey"):
                break
            req["ExclusiveStartKey"] = out["LastEvaluatedKey"]
    return copied


def _write(db: Any, table: str, items: list[dict[str, Any]]) -> None:
    pending: dict[str, Any] = {table: [{"PutRequest": {"Item": i}} for i in items]}
    for attempt in range(_RETRIES):
        pending = call(db.batch_write_item, RequestItems=pending).get("UnprocessedItems") or {}
        if not pending:
            return
        time.sleep(min(2.0, 0.05 * 2**attempt))
    raise Unavailable("dynamodb kept items of a batch unprocessed", retry_after_seconds=5, reason="throttled")
