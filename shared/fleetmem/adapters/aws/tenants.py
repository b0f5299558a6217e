"""Deleting a tenant from a stage's stores (`fleetmem tenant delete --backend aws`, docs/portability.md).

Each table is walked the cheapest way its keys allow, streaming (one result page at a time):

- `clients`: a Query of `by_tenant`;
- `facts`: a Query of `by_time` (`tp` is the tenant on every fact, in any state) and the two
  counters, whose keys are known (`<tenant>#~seq`, `<tenant>#~chg`), then a filtered Scan for
  the withdrawn claims (D23, `<tenant>#~wd#…`), which no index lists;
- `pages`: a Query of `by_slug` (page rows and tombstones), then a Query of each page's own
  partition for its derived rows (aliases, links, words, prefixes), the change counter and the core item (D32), and a
  filtered Scan for the name items (D24, `<tenant>#~name#…`), which no index lists;
- `cursors`, `idempotency`, `audit`: a Scan filtered on the `tenant` attribute every item of those
  tables carries (the whole table is read; no index of idempotency or audit has the tenant as its
  partition, and the cursors' `by_tenant` index, like every GSI, may lag a write just made).

Deletes go out as BatchWriteItem (25 keys a call, UnprocessedItems retried with backoff). The
search index loses the tenant's documents in every index of the stage's prefix (one per embedding
model). The keys come from the stores' key module (`fleetmem.adapters.aws.keys`).

`TenantQueues` finds the tenant's messages in the stage's SQS queues (every queue named
`<prefix>-…`: the heartbeat destinations and their dead-letter queues, the indexer's replay
queue): a message whose JSON body names the tenant (`"tenant": …`) is the tenant's; the others are
made visible again at once. `revoke_clients` revokes every API token of the tenant (the deletion
revokes first, then waits out the authorizer cache, then deletes: docs/portability.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.dynamo import answers, call, chunks, query_all
from fleetmem.adapters.aws.fact_table import decision_pk
from fleetmem.adapters.aws.facts import WITHDRAWN_PART
from fleetmem.adapters.aws.page_table import CHANGE_SK, NAME_PART, core_key
from fleetmem.adapters.aws.tables import AUDIT, CLIENTS, CURSORS, FACTS, IDEMPOTENCY, PAGES, TableSpec
from fleetmem.errors import Unavailable

#: The tables in the order they are emptied: credentials first (`fleetmem tenant delete` has
#: revoked them and waited out the authorizer cache before any table is emptied).
ORDER: tuple[TableSpec, ...] = (CLIENTS, FACTS, PAGES, CURSORS, IDEMPOTENCY, AUDIT)
#: The report's names for the search index and the stage's queues beside the tables.
SEARCH = "search"
QUEUES = "queues"
BATCH = 25
#: progress on stderr every this many items of a table, and at its end
PROGRESS_EVERY = 1000
_RETRIES = 8

Key = dict[str, Any]
Progress = Callable[[str, int], None]


def _key_names(spec: TableSpec) -> list[str]:
    return [spec.partition.name, *([spec.sort.name] if spec.sort else [])]


def _projection(spec: TableSpec) -> dict[str, Any]:
    names = _key_names(spec)
    return {
        "ProjectionExpression": ", ".join(f"#k{i}" for i in range(len(names))),
        "ExpressionAttributeNames": {f"#k{i}": n for i, n in enumerate(names)},
    }


def _keys_of(spec: TableSpec, items: Iterator[dict[str, Any]]) -> Iterator[Key]:
    names = _key_names(spec)
    for item in items:
        yield {n: item[n] for n in names}


def _existing(db: Any, table: str, spec: TableSpec, keys: list[Key]) -> list[Key]:
    """The keys whose item exists now (strongly consistent reads)."""
    found: list[Key] = []
    for group in chunks(keys, 100):
        request: dict[str, Any] = {table: {"Keys": list(group), "ConsistentRead": True, **_projection(spec)}}
        while request:
            out = call(db.batch_get_item, RequestItems=request)
            found.extend(_keys_of(spec, iter(out.get("Responses", {}).get(table, []))))
            request = out.get("UnprocessedKeys") or {}
    return found


class TenantTables:
    """The tenant's keys in each table of one prefix, and their deletion."""

    def __init__(self, db: Any, prefix: str) -> None:
        self.db = db
        self.names = {spec.logical: spec.physical_name(prefix) for spec in ORDER}

    # -- finding keys ----------------------------------------------------------------------------

    def keys(self, spec: TableSpec, tenant: str, *, confirm: bool = False) -> Iterator[list[Key]]:
        """The tenant's keys in one table, a result page at a time. Keys read from a secondary
        index (eventually consistent) are checked against the table itself with `confirm`, so a
        count taken right after a deletion does not count index entries of deleted items."""
        table = self.names[spec.logical]
        walk = {
            CLIENTS.logical: self._clients,
            FACTS.logical: self._facts,
            PAGES.logical: self._pages,
        }.get(spec.logical, self._scan)
        for batch in walk(spec, table, tenant):
            if confirm and batch and spec.logical in (CLIENTS.logical, FACTS.logical, PAGES.logical):
                batch = _existing(self.db, table, spec, batch)
            if batch:
                yield batch

    def _pages_of(self, req: dict[str, Any], op: Any) -> Iterator[list[dict[str, Any]]]:
        return (out.get("Items", []) for out in answers(op, req))

    def _index_query(self, spec: TableSpec, table: str, index: str, attr: str, tenant: str) -> Iterator[list[Key]]:
        req = {
            "TableName": table,
            "IndexName": index,
            "KeyConditionExpression": "#p = :t",
            "ExpressionAttributeValues": {":t": {"S": tenant}},
            **_projection(spec),
        }
        req["ExpressionAttributeNames"] = {**req["ExpressionAttributeNames"], "#p": attr}
        for items in self._pages_of(req, self.db.query):
            yield list(_keys_of(spec, iter(items)))

    def _clients(self, spec: TableSpec, table: str, tenant: str) -> Iterator[list[Key]]:
        return self._index_query(spec, table, "by_tenant", "tenant", tenant)

    def _facts(self, spec: TableSpec, table: str, tenant: str) -> Iterator[list[Key]]:
        # Every fact in any state is on by_time; the entities they name lead to the per-entity
        # decision records (D20), which no index lists.
        req = {
            "TableName": table,
            "IndexName": "by_time",
            "KeyConditionExpression": "tp = :t",
            "ExpressionAttributeValues": {":t": {"S": tenant}},
            "ProjectionExpression": "pk, entity_slug",
        }
        entities: set[str] = {""}
        for items in self._pages_of(req, self.db.query):
            entities.update(keys.part(i["entity_slug"]["S"]) for i in items if "S" in i.get("entity_slug", {}))
            yield [{"pk": item["pk"]} for item in items]
        counters = [{"pk": {"S": keys.reserved(tenant, c)}} for c in (keys.SEQ, keys.CHANGE)]
        records = [{"pk": {"S": decision_pk(tenant, encoded)}} for encoded in sorted(entities)]
        yield _existing(self.db, table, spec, counters + records)
        # D23's withdrawn claims, which no index lists (and which outlive a purged fact)
        yield from self._prefix_scan(spec, table, keys.reserved(tenant, WITHDRAWN_PART) + keys.SEP)

    def _pages(self, spec: TableSpec, table: str, tenant: str) -> Iterator[list[Key]]:
        seen: set[str] = set()
        for heads in self._index_query(spec, table, "by_slug", "tp", tenant):
            for pk in dict.fromkeys(k["pk"]["S"] for k in heads):  # a page row and its tombstone share one
                if pk in seen:
                    continue
                seen.add(pk)
                req = {
                    "TableName": table,
                    "KeyConditionExpression": "pk = :pk",
                    "ExpressionAttributeValues": {":pk": {"S": pk}},
                    "ConsistentRead": True,
                    **_projection(spec),
                }
                yield list(_keys_of(spec, query_all(self.db, req)))
        counter = {"pk": {"S": keys.reserved(tenant, keys.CHANGE)}, "sk": {"S": CHANGE_SK}}
        yield _existing(self.db, table, spec, [counter, core_key(tenant)])  # D32's core item too
        # D24's name items, which no index lists (and which outlive the pages that named them)
        yield from self._prefix_scan(spec, table, keys.reserved(tenant, NAME_PART) + keys.SEP)

    def _prefix_scan(self, spec: TableSpec, table: str, prefix: str) -> Iterator[list[Key]]:
        """The items whose `pk` starts with `prefix`: a Scan of the whole table, filtered (the
        reserved items no index lists; a tenant deletion is rare and already scans three tables)."""
        return self._filtered_scan(spec, table, "begins_with(#a, :v)", "pk", prefix)

    def _scan(self, spec: TableSpec, table: str, tenant: str) -> Iterator[list[Key]]:
        return self._filtered_scan(spec, table, "#a = :v", "tenant", tenant)

    def _filtered_scan(self, spec: TableSpec, table: str, condition: str, attr: str, value: str) -> Iterator[list[Key]]:
        """The keys of the items of a whole-table Scan that meet `condition` on `attr` (`#a`) and
        `value` (`:v`), one result page at a time."""
        proj = _projection(spec)
        req = {
            "TableName": table,
            "FilterExpression": condition,
            "ExpressionAttributeValues": {":v": {"S": value}},
            "ConsistentRead": True,
            "ProjectionExpression": proj["ProjectionExpression"],
            "ExpressionAttributeNames": {**proj["ExpressionAttributeNames"], "#a": attr},
        }
        for items in self._pages_of(req, self.db.scan):
            yield list(_keys_of(spec, iter(items)))

    # -- counting and deleting -------------------------------------------------------------------

    def count(self, tenant: str, *, confirm: bool = False) -> dict[str, int]:
        return {spec.logical: sum(len(b) for b in self.keys(spec, tenant, confirm=confirm)) for spec in ORDER}

    def delete(self, tenant: str, *, progress: Progress | None = None) -> dict[str, int]:
        """Delete every item of the tenant, table by table; returns the items deleted per table."""
        deleted: dict[str, int] = {}
        for spec in ORDER:
            table = self.names[spec.logical]
            n = told = 0
            for batch in self.keys(spec, tenant):
                for group in chunks(batch, BATCH):
                    self._batch_delete(table, list(group))
                    n += len(group)
                if progress is not None and n - told >= PROGRESS_EVERY:
                    progress(spec.logical, told := n)
            if progress is not None:
                progress(spec.logical, n)  # each table's total
            deleted[spec.logical] = n
        return deleted

    def _batch_delete(self, table: str, keys: list[Key]) -> None:
        pending: dict[str, Any] = {table: [{"DeleteRequest": {"Key": k}} for k in keys]}
        for attempt in range(_RETRIES):
            out = call(self.db.batch_write_item, RequestItems=pending)
            pending = out.get("UnprocessedItems") or {}
            if not pending:
                return
            time.sleep(min(0.05 * 2**attempt, 2.0))  # the table is throttling: back off, then resend the rest
        raise Unavailable(
            "dynamodb kept refusing part of a batch delete (throttled)", retry_after_seconds=5, reason="throttled"
        )


def revoke_clients(store: Any, tenant: str, *, at: datetime) -> int:
    """Revoke every API token of the tenant not yet revoked (`ClientStore.list` and `revoke`);
    returns how many were revoked now."""
    n = 0
    for record in store.list(tenant):
        if record.revoked_at is None and store.revoke(record.token_id, at=at, tenant=tenant):
            n += 1
    return n


#: Messages one receive asks for (SQS's most), and how long a message read by the sweep stays
#: invisible to the queue's consumer before the sweep makes it visible again.
SQS_BATCH = 10
SWEEP_VISIBILITY_S = 60


def _message_tenant(body: str) -> str | None:
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    tenant = doc.get("tenant") if isinstance(doc, dict) else None
    return tenant if isinstance(tenant, str) else None


class TenantQueues:
    """The tenant's messages in the stage's SQS queues (every queue named `<prefix>-…`)."""

    def __init__(self, sqs: Any, prefix: str) -> None:
        self.sqs = sqs
        self.prefix = f"{prefix}-"

    def urls(self) -> list[str]:
        found: list[str] = []
        req: dict[str, Any] = {"QueueNamePrefix": self.prefix, "MaxResults": 1000}
        while True:
            out = call(self.sqs.list_queues, **req)
            found.extend(out.get("QueueUrls") or ())
            if not out.get("NextToken"):
                return sorted(found)
            req["NextToken"] = out["NextToken"]

    def count(self, tenant: str) -> int:
        return sum(self._sweep(url, tenant, delete=False) for url in self.urls())

    def delete(self, tenant: str) -> int:
        return sum(self._sweep(url, tenant, delete=True) for url in self.urls())

    def _sweep(self, url: str, tenant: str, *, delete: bool) -> int:
        """Read the queue to its end (long polls, so every SQS server is asked), delete the
        tenant's messages when `delete`, then make every other message read visible again."""
        held: list[str] = []
        n = 0
        try:
            while True:
                out = call(
                    self.sqs.receive_message,
                    QueueUrl=url,
                    MaxNumberOfMessages=SQS_BATCH,
                    VisibilityTimeout=SWEEP_VISIBILITY_S,
                    WaitTimeSeconds=1,
                )
                messages = out.get("Messages") or []
                if not messages:
                    break
                mine = [m for m in messages if _message_tenant(m.get("Body", "")) == tenant]
                n += len(mine)
                if delete and mine:
                    entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(mine)]
                    call(self.sqs.delete_message_batch, QueueUrl=url, Entries=entries)
                    mine_ids = {id(m) for m in mine}
                    messages = [m for m in messages if id(m) not in mine_ids]
                held.extend(m["ReceiptHandle"] for m in messages)
        finally:
            for group in chunks(held, SQS_BATCH):
                entries = [{"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0} for i, h in enumerate(group)]
                call(self.sqs.change_message_visibility_batch, QueueUrl=url, Entries=entries)
        return n
