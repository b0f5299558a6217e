"""Conditional writes survive the SDK's automatic retry of a request whose response was lost.

The lost response is produced with botocore's own `needs-retry` hook: the first attempt reaches
the engine and is applied, then the client is told to retry it, exactly as after a read timeout.
Without care the retry fails its own condition (the item now exists) and a successful write would
be reported as a Conflict."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetmem.errors import Conflict
from fleetmem.models import Cursor, Fact, IdempotencyRecord
from tests.aws import engines

#: The wall clock: DynamoDB Local deletes a cursor or an idempotency record whose TTL is past on the
#: wall clock, at any moment, so one written at a fixed past date could vanish mid-test.
T0 = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def stores(ddb_endpoint):
    with engines.scratch_stores(ddb_endpoint) as stores:
        yield stores


def retry_once(stores: Any, operation: str) -> list[int]:
    """Force one retry of the next `operation` after it has been applied; returns the attempts seen."""
    seen: list[int] = []

    def needs_retry(attempts: int = 0, caught_exception: Any = None, **_: Any) -> int | None:
        seen.append(attempts)
        return 0 if attempts == 1 and caught_exception is None else None

    stores.aws.dynamodb.meta.events.register_first(f"needs-retry.dynamodb.{operation}", needs_retry)
    return seen


def test_a_retried_fact_put_is_not_a_conflict(stores):
    # a fact is written in one transaction with its D14 change counter
    attempts = retry_once(stores, "TransactWriteItems")
    fact = Fact(tenant="t1", fact_id="f_1", seq=1, text="x", provenance="p", client_id="c", created_at=T0)
    stores.facts.put(fact)
    assert attempts[:2] == [1, 2]
    assert stores.facts.get("t1", "f_1") == fact
    with pytest.raises(Conflict):
        stores.facts.put(fact)  # a genuine second write of the same id still conflicts


def test_a_retried_cursor_creation_is_not_a_conflict(stores):
    attempts = retry_once(stores, "PutItem")
    cursor = Cursor(tenant="t1", client_id="c", session_id="s", since=T0, touched_at=T0)
    stored = stores.cursors.put(cursor, expected_version=None)
    assert attempts[:2] == [1, 2] and stored.version == 1
    assert stores.cursors.get("t1", "c", "s", now=T0) == stored


def test_a_retried_idempotency_claim_is_still_ours_and_a_second_claim_sees_it(stores):
    record = IdempotencyRecord(
        tenant="t1",
        client_id="c",
        verb="remember",
        key="k",
        request_hash="h",
        created_at=T0,
        expires_at=T0 + timedelta(hours=24),
    )
    attempts = retry_once(stores, "PutItem")
    assert stores.idempotency.claim(record, now=T0) is None
    assert attempts[:2] == [1, 2]
    again = stores.idempotency.claim(record, now=T0)
    assert again is not None and again.request_hash == "h" and again.result is None


def test_a_retried_sequence_allocation_does_not_skip_a_number(stores):
    assert stores.facts.next_seq("t1") == 1
    attempts = retry_once(stores, "UpdateItem")
    assert stores.facts.next_seq("t1") == 2
    assert attempts[:2] == [1, 2]
    assert stores.facts.next_seq("t1") == 3
