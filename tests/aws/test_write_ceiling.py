"""D21 on DynamoDB Local: 50 concurrent writers into one tenant cost about one write request each.

Before D21 every write raced for the tenant's change counter inside its own transaction, so N
concurrent writers cost about N(N+1)/2 attempts (some 10 requests per write at 50 writers). Now
a write commits with a pending change number and touches nothing shared; a reader numbers the
pending changes afterwards. Counted are the write requests the client sends (retries and failed
conditional attempts included, tests/aws/write_ceiling.py); nothing here measures time.
"""

from __future__ import annotations

import pytest

from tests.aws.write_ceiling import measure

pytestmark = pytest.mark.dynamodb_local


def test_fifty_concurrent_writers_into_one_tenant_cost_at_most_1_2_requests_per_write(
    dynamodb_local_endpoint: str,
) -> None:
    r = measure(dynamodb_local_endpoint, writers=50)
    assert r["errors"] == [] and r["stored"] == 100
    assert r["attempts_per_write"] <= 1.2, r
    # the reader numbered every change: each stored write listed once, each with its own number
    assert r["listed_once"] and r["distinct_numbers"] and r["max_number"] <= 100


def test_the_settle_horizon_counts_from_when_a_change_was_numbered(dynamodb_local_endpoint: str) -> None:
    """D21: an index entry appears after the transaction that NUMBERED the change, so a change
    numbered just now is held back for the horizon however long ago it was written, and comes once
    the horizon has passed its numbering."""
    from datetime import UTC, datetime, timedelta

    from fleetmem.models import Fact
    from tests.aws import engines

    stores = engines.open_stores(dynamodb_local_endpoint, engines.fresh_prefix())
    stores.fact_feed.settle = timedelta(seconds=5)
    t = datetime.now(UTC).replace(microsecond=0)
    old = Fact(
        tenant="t1",
        fact_id="f_old",
        seq=1,
        text="written a minute ago",
        provenance="t",
        client_id="w",
        created_at=t - timedelta(minutes=1),
    )
    stores.facts.put(old)

    def listed(now: datetime) -> list[str]:
        return [f.fact_id for _, f in stores.fact_feed.changed_after("t1", seq=0, now=now, world_only=False)]

    assert listed(t) == []  # pending: this call numbers it (at t)
    assert listed(t + timedelta(seconds=3)) == []  # numbered 3 s ago: not settled
    assert listed(t + timedelta(seconds=6)) == ["f_old"]
