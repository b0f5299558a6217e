"""D20 on every FactStore backend: `decision_pool` and the decided `put` that is conditional on it."""

from __future__ import annotations

import pytest
from tests.contract.builders import at, fact

from fleetmem.errors import Conflict
from fleetmem.ports import FactWrite

ENT = "projects/orion"
NOW = at(100)


def test_a_decided_put_commits_against_the_pool_it_was_decided_on(facts, fact_decisions, tenant):
    pool = fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50)
    assert pool.facts == []
    facts.put(fact(tenant, 1, entity_slug=ENT), decided=pool)
    again = fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50)
    assert [f.fact_id for f in again.facts] == ["f_0001"]
    # a second decision on the fresh pool supersedes the first value
    facts.put(fact(tenant, 2, entity_slug=ENT, supersedes="f_0001"), supersede=again.facts[0], decided=again)
    assert [f.fact_id for f in fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50).facts] == ["f_0002"]


def test_a_put_decided_on_a_pool_another_decision_changed_is_a_conflict(facts, fact_decisions, tenant):
    first = fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50)
    second = fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50)
    facts.put(fact(tenant, 1, entity_slug=ENT), decided=first)
    # both read an empty entity: the second may not also store a first value
    with pytest.raises(Conflict):
        facts.put(fact(tenant, 2, entity_slug=ENT), decided=second)
    assert facts.get(tenant, "f_0002") is None
    # deciding again on the current pool goes through
    facts.put(fact(tenant, 2, entity_slug=ENT), decided=fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50))
    assert {f.fact_id for f in fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50).facts} == {
        "f_0001",
        "f_0002",
    }


def test_decisions_on_other_entities_and_tenants_do_not_conflict(facts, fact_decisions, tenant, other_tenant):
    pool = fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50)
    facts.put(
        fact(tenant, 1, entity_slug="projects/other"),
        decided=fact_decisions.decision_pool(tenant, "projects/other", now=NOW, limit=50),
    )
    facts.put(
        fact(other_tenant, 1, entity_slug=ENT),
        decided=fact_decisions.decision_pool(other_tenant, ENT, now=NOW, limit=50),
    )
    facts.put(fact(tenant, 2, entity_slug=ENT), decided=pool)
    assert [f.fact_id for f in fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50).facts] == ["f_0002"]


def test_a_pool_decides_only_for_its_own_entity(facts, fact_decisions, tenant):
    pool = fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50)
    with pytest.raises(Conflict):
        facts.put(fact(tenant, 1, entity_slug="projects/other"), decided=pool)
    assert facts.get(tenant, "f_0001") is None


def test_the_unattributed_pool_holds_active_facts_on_no_entity_newest_first(facts, fact_decisions, tenant):
    facts.put(fact(tenant, 1))
    facts.put(fact(tenant, 2, entity_slug=ENT))
    facts.put(fact(tenant, 3))
    facts.put(fact(tenant, 4, valid_until=at(50)))  # past its valid_until at NOW
    pool = fact_decisions.decision_pool(tenant, None, now=NOW, limit=50)
    assert [f.fact_id for f in pool.facts] == ["f_0003", "f_0001"]
    stale = fact_decisions.decision_pool(tenant, None, now=NOW, limit=50)
    facts.put(fact(tenant, 5), decided=pool)
    with pytest.raises(Conflict):
        facts.put(fact(tenant, 6), decided=stale)


def test_the_unattributed_pool_is_the_unattributed_among_the_newest_active_facts(facts, fact_decisions, tenant):
    """`limit` counts the tenant's newest active facts of any entity; the pool keeps the unattributed
    ones among them (the same on every backend), newest first."""
    facts.put(fact(tenant, 1))
    for n in (2, 3, 4):
        facts.put(fact(tenant, n, entity_slug=ENT))
    facts.put(fact(tenant, 5))
    facts.put(fact(tenant, 6, valid_until=at(50)))  # expired at NOW: not among the newest active
    assert [f.fact_id for f in fact_decisions.decision_pool(tenant, None, now=NOW, limit=3).facts] == ["f_0005"]
    assert [f.fact_id for f in fact_decisions.decision_pool(tenant, None, now=NOW, limit=5).facts] == [
        "f_0005",
        "f_0001",
    ]


def test_the_pool_holds_every_visibility_and_only_active_facts(facts, fact_decisions, tenant):
    facts.put(fact(tenant, 1, entity_slug=ENT, visibility="private"))
    facts.put(fact(tenant, 2, entity_slug=ENT))
    facts.expire(tenant, "f_0002", at=at(10), reason="wrong", actor="agent-a")
    assert [f.fact_id for f in fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50).facts] == ["f_0001"]


def test_put_decided_stores_what_the_decision_returns_on_the_current_pool(facts, fact_decisions, tenant):
    seen: list[list[str]] = []

    def first_value(pool):
        seen.append([f.fact_id for f in pool.facts])
        return None if pool.facts else FactWrite(fact(tenant, 1, entity_slug=ENT))

    fact_decisions.put_decided(tenant, ENT, first_value, now=NOW, limit=50)
    fact_decisions.put_decided(tenant, ENT, first_value, now=NOW, limit=50)  # decides "nothing to write"
    assert seen == [[], ["f_0001"]]
    assert [f.fact_id for f in fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50).facts] == ["f_0001"]


def test_put_decided_on_a_stale_pool_never_writes_a_stale_decision(facts, fact_decisions, tenant):
    stale = fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50)
    facts.put(fact(tenant, 1, entity_slug=ENT), decided=fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50))
    seen: list[list[str]] = []

    def insert_if_empty(pool):
        seen.append([f.fact_id for f in pool.facts])
        return FactWrite(fact(tenant, 2 + len(seen), entity_slug=ENT)) if not pool.facts else None

    try:
        # a store that decides under its lock reads the pool itself; the others lose the round
        fact_decisions.put_decided(tenant, ENT, insert_if_empty, now=NOW, limit=50, pool=stale)
    except Conflict:
        fact_decisions.put_decided(tenant, ENT, insert_if_empty, now=NOW, limit=50)
    assert seen[-1] == ["f_0001"]
    assert [f.fact_id for f in fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50).facts] == ["f_0001"]


def test_put_decided_on_a_pool_still_current_decides_on_that_pool_as_read(facts, fact_decisions, tenant):
    """The pool remember read before the write is the one decided on when nothing changed since
    (no second read of the entity's facts); the write goes through."""
    facts.put(fact(tenant, 1, entity_slug=ENT), decided=fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50))
    pool = fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50)
    decided_on = []

    def insert(current):
        decided_on.append(current)
        return FactWrite(fact(tenant, 2, entity_slug=ENT))

    fact_decisions.put_decided(tenant, ENT, insert, now=NOW, limit=50, pool=pool)
    assert decided_on == [pool] and decided_on[0] is pool
    assert {f.fact_id for f in fact_decisions.decision_pool(tenant, ENT, now=NOW, limit=50).facts} == {
        "f_0001",
        "f_0002",
    }
