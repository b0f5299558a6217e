"""D20 on DynamoDB when the `by_entity` index lags the table.

A GSI is eventually consistent: right after a write, a Query may not list the fact yet. The local
engines update their indexes at once, so the lag is made by hand: the fact's `ent` index key is
removed from the base item, which takes it out of `by_entity` exactly as a not-yet-propagated
write is absent from it. The decision pool must still hold the fact (read back through the
decision record's recent ids), or a second writer would store a second first value.
Runs on moto (server mode) and on DynamoDB Local.
"""

from __future__ import annotations

import uuid

import pytest

from fleetmem.adapters.aws.facts import fact_pk
from tests.aws import engines
from tests.contract.builders import at, fact

ENT = "projects/orion"
NOW = at(100)


@pytest.fixture
def stores(ddb_endpoint):
    with engines.scratch_stores(ddb_endpoint) as s:
        yield s
        s.close()


def _hide_from_index(stores, tenant: str, fact_id: str) -> None:
    stores.facts._db.update_item(
        TableName=stores.facts.table, Key={"pk": {"S": fact_pk(tenant, fact_id)}}, UpdateExpression="REMOVE ent"
    )


def test_the_pool_holds_a_decided_fact_the_index_does_not_list_yet(stores):
    facts, tenant = stores.facts, "t" + uuid.uuid4().hex[:8]
    facts.put(
        fact(tenant, 1, entity_slug=ENT), decided=stores.fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50)
    )
    _hide_from_index(stores, tenant, "f_0001")
    assert stores.fact_listing.by_entity(tenant, ENT, now=NOW, world_only=False) == []  # the index lags
    pool = stores.fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50)
    assert [f.fact_id for f in pool.facts] == ["f_0001"]
    # and the pool is current: a write decided on it commits
    facts.put(fact(tenant, 2, entity_slug=ENT, supersedes="f_0001"), supersede=pool.facts[0], decided=pool)
    assert facts.get(tenant, "f_0001").superseded_by == "f_0002"


def test_a_superseded_fact_the_index_still_shows_active_is_left_out(stores):
    facts, tenant = stores.facts, "t" + uuid.uuid4().hex[:8]
    facts.put(
        fact(tenant, 1, entity_slug=ENT), decided=stores.fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50)
    )
    old = facts.get(tenant, "f_0001")
    facts.put(
        fact(tenant, 2, entity_slug=ENT, supersedes="f_0001"),
        supersede=old,
        decided=stores.fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50),
    )
    # an index that has not caught up with the supersession still lists the old fact as active;
    # made by hand by clearing the retraction on the item, which the index copies
    stores.facts._db.update_item(
        TableName=stores.facts.table,
        Key={"pk": {"S": fact_pk(tenant, "f_0001")}},
        UpdateExpression="REMOVE expired_at, superseded_by",
    )
    pool = stores.fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50)
    assert [f.fact_id for f in pool.facts] == ["f_0002"]
