"""FactStore contract (fleetmem.ports.FactStore), run against every backend that provides `facts`."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from tests.contract.builders import T0, at, fact, unit

from fleetmem.errors import Conflict, NotFound
from fleetmem.models import AuditEvent
from fleetmem.ports import FactFilter


def test_next_seq_counts_from_one_per_tenant(facts, tenant, other_tenant):
    assert [facts.next_seq(tenant) for _ in range(3)] == [1, 2, 3]
    assert facts.next_seq(other_tenant) == 1
    assert facts.next_seq(tenant) == 4


def test_next_seq_is_unique_under_concurrent_callers(facts, tenant):
    got: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        mine = [facts.next_seq(tenant) for _ in range(15)]
        with lock:
            got.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(1, 61))


def test_put_then_get_round_trips_every_field(facts, tenant):
    f = fact(
        tenant,
        1,
        kind="preference",
        entity_slug="people/alice",
        visibility="private",
        session_id="s1",
        valid_until=at(60 * 24),
        vector=unit(1, 2, 3),
        vector_model="m-1",
        supersedes=None,
        created_at=at(0).replace(microsecond=123000),
    )
    facts.put(f)
    assert facts.get(tenant, f.fact_id) == f


def test_put_with_an_existing_id_raises_conflict(facts, tenant):
    facts.put(fact(tenant, 1))
    with pytest.raises(Conflict):
        facts.put(fact(tenant, 1, text="other"))
    assert facts.get(tenant, "f_0001").text == "fact number 1"


def test_a_foreign_tenants_fact_is_missing(facts, fact_decisions, fact_listing, tenant, other_tenant, now):
    facts.put(fact(tenant, 1, entity_slug="e", session_id="s"))
    assert facts.get(other_tenant, "f_0001") is None
    assert facts.many(other_tenant, ["f_0001"]) == []
    assert fact_listing.by_entity(other_tenant, "e", now=now) == []
    assert fact_listing.by_session(other_tenant, "s", now=now) == []
    assert fact_listing.recent(other_tenant, now=now) == []
    assert fact_decisions.count_active(other_tenant, "e", now=now) == 0
    with pytest.raises(NotFound):
        facts.expire(other_tenant, "f_0001", at=now, reason=None, actor="x")
    assert facts.purge(other_tenant, "f_0001") is False
    assert facts.get(tenant, "f_0001") is not None


def test_by_entity_is_newest_first_with_seq_breaking_ties(facts, fact_listing, tenant, now):
    facts.put(fact(tenant, 1, entity_slug="e", created_at=at(-10)))
    facts.put(fact(tenant, 2, entity_slug="e", created_at=at(-5)))
    facts.put(fact(tenant, 3, entity_slug="e", created_at=at(-5)))
    facts.put(fact(tenant, 4, entity_slug="other", created_at=at(-1)))
    assert [f.seq for f in fact_listing.by_entity(tenant, "e", now=now)] == [3, 2, 1]
    assert [f.seq for f in fact_listing.by_entity(tenant, "e", now=now, limit=2)] == [3, 2]


def test_world_only_hides_private_facts(facts, fact_decisions, fact_listing, tenant, now):
    facts.put(fact(tenant, 1, entity_slug="e", session_id="s", created_at=at(-2)))
    facts.put(fact(tenant, 2, entity_slug="e", session_id="s", visibility="private", created_at=at(-1)))
    assert [f.seq for f in fact_listing.by_entity(tenant, "e", now=now)] == [1]
    assert [f.seq for f in fact_listing.by_entity(tenant, "e", now=now, world_only=False)] == [2, 1]
    assert [f.seq for f in fact_listing.by_session(tenant, "s", now=now)] == [1]
    assert [f.seq for f in fact_listing.recent(tenant, now=now)] == [1]
    assert fact_decisions.count_active(tenant, "e", now=now) == 1
    assert fact_decisions.count_active(tenant, "e", now=now, world_only=False) == 2


def test_active_only_hides_forgotten_superseded_and_lapsed_facts(facts, fact_decisions, fact_listing, tenant, now):
    facts.put(fact(tenant, 1, entity_slug="e", created_at=at(-50)))
    facts.put(fact(tenant, 2, entity_slug="e", created_at=at(-40), valid_until=now))  # lapses at now
    facts.put(fact(tenant, 3, entity_slug="e", created_at=at(-30), valid_until=at(1)))
    facts.put(fact(tenant, 4, entity_slug="e", created_at=at(-20)))
    old = facts.get(tenant, "f_0001")
    facts.put(fact(tenant, 5, entity_slug="e", created_at=at(-10), supersedes="f_0001"), supersede=old)
    assert facts.expire(tenant, "f_0004", at=at(-5), reason="wrong", actor="agent-a") is True
    assert [f.seq for f in fact_listing.by_entity(tenant, "e", now=now)] == [5, 3]
    assert fact_decisions.count_active(tenant, "e", now=now) == 2
    assert [f.seq for f in fact_listing.by_entity(tenant, "e", now=now, active_only=False)] == [5, 4, 3, 2, 1]
    # read-time expiry: the same fact is active before its valid_until
    assert [f.seq for f in fact_listing.by_entity(tenant, "e", now=at(-1))] == [5, 3, 2]
    assert [f.seq for f in fact_listing.by_entity(tenant, "e", now=at(2))] == [5]


def test_by_session_returns_that_sessions_facts_newest_first(facts, fact_listing, tenant, now):
    facts.put(fact(tenant, 1, session_id="s1", created_at=at(-3)))
    facts.put(fact(tenant, 2, session_id="s2", created_at=at(-2)))
    facts.put(fact(tenant, 3, session_id="s1", created_at=at(-1)))
    assert [f.seq for f in fact_listing.by_session(tenant, "s1", now=now)] == [3, 1]


def test_recent_returns_facts_strictly_after_the_bound(facts, fact_listing, tenant, now):
    for n, minutes in [(1, -30), (2, -20), (3, -10)]:
        facts.put(fact(tenant, n, created_at=at(minutes)))
    assert [f.seq for f in fact_listing.recent(tenant, now=now)] == [3, 2, 1]
    assert [f.seq for f in fact_listing.recent(tenant, now=now, after=at(-20))] == [3]
    assert [f.seq for f in fact_listing.recent(tenant, now=now, limit=1)] == [3]


def test_many_follows_the_requested_order_and_skips_missing(facts, tenant, other_tenant):
    for n in (1, 2, 3):
        facts.put(fact(tenant, n))
    facts.put(fact(other_tenant, 9))
    got = facts.many(tenant, ["f_0003", "f_missing", "f_0001", "f_0009", "f_0002"])
    assert [f.fact_id for f in got] == ["f_0003", "f_0001", "f_0002"]
    assert facts.many(tenant, []) == []


def test_expire_is_true_once_then_false_and_records_why(facts, tenant, now):
    facts.put(fact(tenant, 1, created_at=at(-1)))
    assert facts.expire(tenant, "f_0001", at=now, reason="obsolete", actor="agent-b") is True
    assert facts.expire(tenant, "f_0001", at=at(5), reason="again", actor="agent-c") is False
    stored = facts.get(tenant, "f_0001")
    assert (stored.expired_at, stored.expired_reason, stored.expired_by) == (now, "obsolete", "agent-b")
    assert not stored.is_active(now)


def test_expire_of_a_missing_fact_raises_not_found(facts, tenant, now):
    with pytest.raises(NotFound):
        facts.expire(tenant, "f_nope", at=now, reason=None, actor="a")


def test_expire_of_a_lapsed_or_superseded_fact_is_false(facts, tenant, now):
    facts.put(fact(tenant, 1, created_at=at(-10), valid_until=at(-1)))
    assert facts.expire(tenant, "f_0001", at=now, reason=None, actor="a") is False
    facts.put(fact(tenant, 2, created_at=at(-10)))
    facts.put(fact(tenant, 3, created_at=at(-5)), supersede=facts.get(tenant, "f_0002"))
    assert facts.expire(tenant, "f_0002", at=now, reason=None, actor="a") is False


def test_supersede_expires_the_old_fact_at_the_new_facts_creation(facts, tenant, now):
    facts.put(fact(tenant, 1, entity_slug="e", created_at=at(-10)))
    old = facts.get(tenant, "f_0001")
    new = fact(tenant, 2, entity_slug="e", created_at=at(-2), supersedes="f_0001", client_id="agent-z")
    facts.put(new, supersede=old)
    stored_old = facts.get(tenant, "f_0001")
    assert stored_old.superseded_by == "f_0002"
    assert stored_old.expired_at == new.created_at
    assert facts.get(tenant, "f_0002") == new


def test_supersede_of_an_already_superseded_fact_conflicts_and_writes_nothing(facts, tenant, now):
    facts.put(fact(tenant, 1, created_at=at(-10)))
    old = facts.get(tenant, "f_0001")
    facts.put(fact(tenant, 2, created_at=at(-5)), supersede=old)
    with pytest.raises(Conflict):
        facts.put(fact(tenant, 3, created_at=at(-4)), supersede=old)
    assert facts.get(tenant, "f_0003") is None
    assert facts.get(tenant, "f_0001").superseded_by == "f_0002"


def test_supersede_of_a_forgotten_fact_conflicts(facts, tenant, now):
    facts.put(fact(tenant, 1, created_at=at(-10)))
    old = facts.get(tenant, "f_0001")
    facts.expire(tenant, "f_0001", at=at(-6), reason=None, actor="a")
    with pytest.raises(Conflict):
        facts.put(fact(tenant, 2, created_at=at(-5)), supersede=old)
    assert facts.get(tenant, "f_0002") is None


def test_supersede_is_atomic_when_the_new_id_already_exists(facts, tenant, now):
    facts.put(fact(tenant, 1, created_at=at(-10)))
    facts.put(fact(tenant, 2, created_at=at(-9)))
    old = facts.get(tenant, "f_0001")
    with pytest.raises(Conflict):
        facts.put(fact(tenant, 2, created_at=at(-5), text="dup id"), supersede=old)
    stored = facts.get(tenant, "f_0001")
    assert stored.superseded_by is None and stored.expired_at is None
    assert facts.get(tenant, "f_0002").text == "fact number 2"


def test_supersede_of_a_missing_fact_conflicts(facts, tenant):
    ghost = fact(tenant, 1)
    with pytest.raises(Conflict):
        facts.put(fact(tenant, 2), supersede=ghost)
    assert facts.get(tenant, "f_0002") is None


def test_purge_deletes_once(facts, fact_listing, tenant, now):
    facts.put(fact(tenant, 1, entity_slug="e"))
    assert facts.purge(tenant, "f_0001") is True
    assert facts.purge(tenant, "f_0001") is False
    assert facts.get(tenant, "f_0001") is None
    assert fact_listing.by_entity(tenant, "e", now=now, active_only=False) == []


def test_millisecond_timestamps_round_trip_and_order_exactly(facts, fact_listing, tenant, now):
    base = at(0)
    for n, micro in [(1, 1000), (2, 2000), (3, 999000)]:
        facts.put(fact(tenant, n, created_at=base + timedelta(microseconds=micro)))
    got = fact_listing.recent(tenant, now=now + timedelta(days=1), after=base + timedelta(microseconds=1000))
    assert [(f.seq, f.created_at) for f in got] == [
        (3, base + timedelta(microseconds=999000)),
        (2, base + timedelta(microseconds=2000)),
    ]
    assert all(f.created_at.utcoffset() == timedelta(0) for f in got)


def _event(tenant, subject, action, when, actor="agent-a"):
    return AuditEvent(tenant=tenant, subject=subject, action=action, actor=actor, at=when, provenance="chat")


def test_a_write_and_its_audit_rows_land_together(facts_backend, tenant, now):
    facts, audit = facts_backend.facts, facts_backend.audit
    facts.put(fact(tenant, 1, created_at=at(-10)))
    old = facts.get(tenant, "f_0001")
    trail = [_event(tenant, "f_0002", "write", at(-2)), _event(tenant, "f_0001", "supersede", at(-2))]
    facts.put(fact(tenant, 2, created_at=at(-2)), supersede=old, audit=trail)
    assert [e.action for e in audit.for_subject(tenant, "f_0002")] == ["write"]
    assert [e.action for e in audit.for_subject(tenant, "f_0001")] == ["supersede"]


def test_a_refused_write_leaves_no_audit_row(facts_backend, tenant, now):
    facts, audit = facts_backend.facts, facts_backend.audit
    facts.put(fact(tenant, 1, created_at=at(-10)))
    with pytest.raises(Conflict):
        facts.put(fact(tenant, 1, text="same id"), audit=[_event(tenant, "f_0001", "write", at(-1))])
    assert audit.for_subject(tenant, "f_0001") == []


def test_expire_writes_its_audit_row_only_when_it_expires(facts_backend, tenant, now):
    facts, audit = facts_backend.facts, facts_backend.audit
    facts.put(fact(tenant, 1, created_at=at(-10)))
    event = _event(tenant, "f_0001", "expire", now)
    assert facts.expire(tenant, "f_0001", at=now, reason="old", actor="agent-a", audit=event) is True
    assert facts.expire(tenant, "f_0001", at=at(1), reason="again", actor="agent-a", audit=event) is False
    assert [e.action for e in audit.for_subject(tenant, "f_0001")] == ["expire"]
    with pytest.raises(NotFound):
        facts.expire(tenant, "f_nope", at=now, reason=None, actor="a", audit=_event(tenant, "f_nope", "expire", now))
    assert audit.for_subject(tenant, "f_nope") == []


# -- listing and tallies (list_facts, memory_stats) -------------------------------------------------


def _seed_listing(facts, tenant, other_tenant):
    facts.put(fact(tenant, 1, entity_slug="people/a", session_id="s1", provenance="Chat log"))
    facts.put(fact(tenant, 2, entity_slug="people/a", visibility="private", kind="preference"))
    old = fact(tenant, 3, entity_slug="people/b")
    facts.put(old)
    facts.put(fact(tenant, 4, entity_slug="people/b", supersedes=old.fact_id), supersede=old)
    facts.put(fact(tenant, 5, session_id="s1"))
    facts.expire(tenant, "f_0005", at=at(6), reason="wrong", actor="agent-a")
    facts.put(fact(tenant, 6, entity_slug="people/a", valid_until=at(7)))
    facts.put(fact(tenant, 7, created_at=at(4)))  # same instant as seq 4: the seq breaks the tie
    facts.put(fact(other_tenant, 8, entity_slug="people/a", session_id="s1"))
    return T0


@pytest.mark.parametrize(
    ("where", "world_only", "seqs"),
    [
        ({}, False, [7, 4, 2, 1]),
        ({}, True, [7, 4, 1]),
        ({"state": "any"}, False, [6, 5, 7, 4, 3, 2, 1]),
        ({"state": "superseded"}, False, [3]),
        ({"state": "forgotten"}, False, [5]),
        ({"state": "expired"}, False, [6]),
        ({"entity_slug": "people/a", "state": "any"}, True, [6, 1]),
        ({"session_id": "s1", "state": "any"}, False, [5, 1]),
        ({"kind": "preference"}, False, [2]),
        ({"provenance": "chat", "state": "any"}, False, [1]),
        ({"created_after": at(2), "created_before": at(6), "state": "any"}, False, [5, 7, 4, 3]),
    ],
)
def test_listing_filters_newest_first_in_the_tenant_only(
    facts, fact_listing, tenant, other_tenant, where, world_only, seqs
):
    _seed_listing(facts, tenant, other_tenant)
    found = fact_listing.listing(tenant, now=at(30), world_only=world_only, where=FactFilter(**where), limit=50)
    assert [f.seq for f in found] == seqs
    assert all(f.tenant == tenant for f in found)


@pytest.mark.parametrize("where", [{"state": "any"}, {"entity_slug": "people/a", "state": "any"}])
def test_listing_resumes_strictly_after_a_keyset_position(facts, fact_listing, tenant, other_tenant, where):
    _seed_listing(facts, tenant, other_tenant)
    whole = fact_listing.listing(tenant, now=at(30), world_only=False, where=FactFilter(**where), limit=50)
    paged, before = [], None
    while True:
        got = fact_listing.listing(
            tenant, now=at(30), world_only=False, where=FactFilter(**where), before=before, limit=2
        )
        paged += got
        if len(got) < 2:
            break
        before = (got[-1].created_at, got[-1].seq)
    assert [f.fact_id for f in paged] == [f.fact_id for f in whole]


def test_tallies_count_by_status_entity_and_day(facts, fact_listing, tenant, other_tenant):
    base = _seed_listing(facts, tenant, other_tenant)
    t = fact_listing.tallies(tenant, now=at(30), world_only=False, since=base)
    assert t.status == {"active": 4, "superseded": 1, "forgotten": 1, "expired": 1}
    assert (t.entities, t.busiest) == (2, [("people/a", 2), ("people/b", 1)])
    assert t.per_day == {base.date().isoformat(): 7}
    world = fact_listing.tallies(tenant, now=at(30), world_only=True, since=base)
    assert world.status["active"] == 3 and world.busiest == [("people/a", 1), ("people/b", 1)]
    assert fact_listing.tallies(tenant, now=at(30), world_only=False, since=at(24 * 60)).per_day == {}
