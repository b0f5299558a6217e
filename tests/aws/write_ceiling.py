"""Concurrent writers into ONE tenant on DynamoDB, counting every write request sent (D21).

`measure(endpoint, writers)` starts `writers` threads at once; each stores one new fact
(`FactStore.put`) and one new page (`PageStore.put`) of the same tenant. Every write request that
reaches the endpoint is counted (botocore `before-send`, so SDK retries and failed conditional
attempts count too): TransactWriteItems, PutItem, UpdateItem, DeleteItem, BatchWriteItem. Then one
reader lists both change arms from 0, which numbers whatever is pending; its write requests are
counted apart, and every stored write must be listed exactly once, each with its own number.

Used by tests/aws/test_write_ceiling.py and by `scripts/bench-write-ceiling` (which can run it on
an older revision's code, so before and after come from the same harness). Imports only fleetmem
and boto3, lazily, so the code under test is whatever `fleetmem` resolves to.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from datetime import UTC, datetime
from typing import Any

WRITE_OPS = frozenset({"TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"})
CREDENTIALS = {"region_name": "us-east-1", "aws_access_key_id": "test", "aws_secret_access_key": "test"}


class WriteCounter:
    """Counts the write requests a boto3 client sends (each HTTP attempt, retries included)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: Counter[str] = Counter()

    def __call__(self, event_name: str = "", **_: Any) -> None:
        op = event_name.rsplit(".", 1)[-1]
        if op in WRITE_OPS:
            with self.lock:
                self.sent[op] += 1

    def total(self) -> int:
        with self.lock:
            return sum(self.sent.values())

    def reset(self) -> None:
        with self.lock:
            self.sent.clear()


def measure(endpoint: str, writers: int = 50, prefix: str | None = None) -> dict[str, Any]:
    import boto3
    from botocore.config import Config

    from fleetmem.adapters.aws import open_aws
    from fleetmem.adapters.aws.tables import create_tables
    from fleetmem.config import AwsSettings, Settings
    from fleetmem.models import Fact, Page

    prefix = prefix or "fmw" + uuid.uuid4().hex[:10]
    session = boto3.session.Session(**CREDENTIALS)
    create_tables(session.client("dynamodb", endpoint_url=endpoint), prefix)
    # one connection per writer, so all of them are in flight at once (as separate functions
    # would be); the SDK's retry policy as the adapters configure it
    cfg = Config(
        max_pool_connections=writers + 4,
        retries={"max_attempts": 3, "mode": "standard"},
        connect_timeout=2,
        read_timeout=10,
    )
    client = session.client("dynamodb", endpoint_url=endpoint, config=cfg)
    stores = open_aws(
        Settings(backend="aws", aws=AwsSettings(region="us-east-1", table_prefix=prefix)),
        session=session,
        dynamodb_endpoint=endpoint,
        clients={"dynamodb": client},
    )
    counter = WriteCounter()
    stores.aws.dynamodb.meta.events.register("before-send.dynamodb.*", counter)
    tenant = "t-" + uuid.uuid4().hex[:10]
    now = datetime.now(UTC).replace(microsecond=0)
    start = threading.Barrier(writers)
    errors: list[str] = []
    stored = 0
    lock = threading.Lock()

    def writer(w: int) -> None:
        nonlocal stored
        fact = Fact(
            tenant=tenant,
            fact_id=f"f_{w:03d}",
            seq=w + 1,
            text=f"writer {w} noted the harbour is open",
            provenance="bench",
            client_id="bench",
            created_at=now,
        )
        page = Page(
            tenant=tenant,
            slug=f"notes/w{w:03d}",
            title=f"Note {w}",
            body=f"Writer {w}.",
            created_at=now,
            updated_at=now,
        )
        start.wait()
        for put in (lambda: stores.facts.put(fact), lambda: stores.pages.put(page)):
            try:
                put()
                with lock:
                    stored += 1
            except Exception as exc:  # counted, and named in the result
                with lock:
                    errors.append(type(exc).__name__)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    write_attempts = counter.total()
    by_op = dict(counter.sent)

    counter.reset()
    later = datetime.now(UTC)
    facts = stores.fact_feed.changed_after(tenant, seq=0, now=later, world_only=False, limit=writers + 10)
    pages = stores.page_feed.changed_after(tenant, seq=0, world_only=False, limit=writers + 10)
    reader_attempts = counter.total()
    listed = [f.fact_id for _, f in facts] + [h.slug for _, h in pages]
    numbers_f = [n for n, _ in facts]
    numbers_p = [n for n, _ in pages]
    return {
        "writers": writers,
        "stored": stored,
        "errors": errors,
        "write_attempts": write_attempts,
        "attempts_per_write": write_attempts / stored if stored else float("inf"),
        "by_op": by_op,
        "reader_attempts": reader_attempts,
        "listed": len(listed),
        "listed_once": len(set(listed)) == len(listed) == stored,
        "distinct_numbers": len(set(numbers_f)) == len(numbers_f) and len(set(numbers_p)) == len(numbers_p),
        "max_number": max([*numbers_f, *numbers_p], default=0),
    }
