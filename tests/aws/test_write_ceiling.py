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
