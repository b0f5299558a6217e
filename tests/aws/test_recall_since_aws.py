"""D31 on DynamoDB: recall's `since` ANDs with `entity` / `session_id` as a key condition on the
index's sort key (`ck` = "<created iso>#<seq>"), so the one Query reads only the facts after it and
`limit` counts among them; without `since` the Query is the one it was. On both local engines
(moto server and DynamoDB Local); a botocore hook records each Query's parameters.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetmem.models import Fact
from tests.aws import engines

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def stores(ddb_endpoint: str) -> Iterator[Any]:
    with engines.scratch_stores(ddb_endpoint) as stores:
        _seed(stores)
        yield stores


def _seed(stores: Any) -> None:
    for i in range(4):  # f_0 newest .. f_3 oldest, a minute apart
        stores.facts.put(
            Fact(
                tenant="acme",
                fact_id=f"f_{i}",
                seq=stores.facts.next_seq("acme"),
                text=f"fact {i}",
                provenance="test",
                client_id="planner",
                entity_slug="people/alice",
                session_id="s1",
                created_at=NOW - timedelta(minutes=i),
            )
        )


def _queries(stores: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        seen.append(dict(params))

    stores.fact_listing._db.meta.events.register("provide-client-params.dynamodb.Query", record)
    return seen


@pytest.mark.parametrize(("read", "index"), [("by_entity", "by_entity"), ("by_session", "by_session")])
def test_since_is_a_sort_key_condition_of_the_one_query(stores, read, index):
    key = "people/alice" if read == "by_entity" else "s1"
    seen = _queries(stores)
    got = getattr(stores.fact_listing, read)("acme", key, now=NOW, after=NOW - timedelta(seconds=90), limit=1)
    assert [f.fact_id for f in got] == ["f_0"]
    got = getattr(stores.fact_listing, read)("acme", key, now=NOW, after=NOW - timedelta(seconds=150))
    assert [f.fact_id for f in got] == ["f_0", "f_1", "f_2"]
    assert len(seen) == 2
    for q in seen:
        assert q["IndexName"] == index
        assert "ck > :after" in q["KeyConditionExpression"]
        assert "FilterExpression" not in q

    seen.clear()
    everything = getattr(stores.fact_listing, read)("acme", key, now=NOW)
    assert [f.fact_id for f in everything] == ["f_0", "f_1", "f_2", "f_3"]
    assert len(seen) == 1 and "ck" not in seen[0]["KeyConditionExpression"]
