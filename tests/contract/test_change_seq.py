"""D14 change sequences, on every PageStore / FactStore backend: each write gets the tenant's next
number inside the write, `changed_after` lists by it (ascending, strictly after), a rewrite moves a
page to a new number, `change_floor` turns a timestamp position into a number, tenants count apart."""

from __future__ import annotations

from datetime import timedelta

from tests.contract.builders import fact as make_fact
from tests.contract.builders import page as make_page


def test_pages_are_numbered_in_write_order_and_a_rewrite_moves_the_page(pages, page_feed, tenant, other_tenant, now):
    pages.put(make_page(tenant, "p/late-stamp", updated_at=now + timedelta(seconds=5)))
    pages.put(make_page(tenant, "p/early-stamp", updated_at=now))
    pages.put(make_page(other_tenant, "p/elsewhere", updated_at=now))
    listed = page_feed.changed_after(tenant, seq=0, world_only=False, limit=10)
    assert [(n, h.slug) for n, h in listed] == [(1, "p/late-stamp"), (2, "p/early-stamp")]
    pages.put(make_page(tenant, "p/late-stamp", updated_at=now + timedelta(seconds=6)))
    assert [(n, h.slug) for n, h in page_feed.changed_after(tenant, seq=1, world_only=False, limit=10)] == [
        (2, "p/early-stamp"),
        (3, "p/late-stamp"),
    ]
    assert [h.slug for _, h in page_feed.changed_after(other_tenant, seq=0, world_only=False, limit=10)] == [
        "p/elsewhere"
    ]


def test_page_change_floor_resumes_a_timestamp_position(pages, page_feed, tenant, now):
    assert page_feed.change_floor(tenant, since=now, slug="") == 0
    pages.put(make_page(tenant, "p/a", updated_at=now))
    pages.put(make_page(tenant, "p/b", updated_at=now + timedelta(seconds=2)))
    pages.put(make_page(tenant, "p/c", updated_at=now + timedelta(seconds=1)))  # committed last
    assert page_feed.change_floor(tenant, since=now, slug="p/a") == 1  # p/b (2) and p/c (3) follow
    assert page_feed.change_floor(tenant, since=now + timedelta(seconds=1), slug="p/c") == 1
    assert page_feed.change_floor(tenant, since=now + timedelta(days=1), slug="") == 3  # nothing after: the counter


def test_private_pages_are_hidden_from_world_only_change_lists(pages, page_feed, tenant, now):
    pages.put(make_page(tenant, "p/secret", updated_at=now, visibility="private"))
    pages.put(make_page(tenant, "p/open", updated_at=now))
    assert [h.slug for _, h in page_feed.changed_after(tenant, seq=0, world_only=True, limit=10)] == ["p/open"]


def test_facts_are_numbered_in_write_order_and_listed_active_only(facts, fact_feed, tenant, other_tenant, now):
    late = make_fact(tenant, 1, fact_id="f_late", created_at=now + timedelta(seconds=5))
    early = make_fact(tenant, 2, fact_id="f_early", created_at=now)
    gone = make_fact(tenant, 3, fact_id="f_gone", created_at=now)
    for f in (late, early, gone, make_fact(other_tenant, 1, fact_id="f_other", created_at=now)):
        facts.put(f)
    facts.expire(tenant, "f_gone", at=now, reason="test", actor="t")
    listed = fact_feed.changed_after(tenant, seq=0, now=now + timedelta(seconds=10), world_only=False, limit=10)
    assert [(n, f.fact_id) for n, f in listed] == [(1, "f_late"), (2, "f_early")]
    assert listed[0][1] == late
    after = fact_feed.changed_after(tenant, seq=1, now=now + timedelta(seconds=10), world_only=False, limit=10)
    assert [f.fact_id for _, f in after] == ["f_early"]


def test_fact_change_floor_resumes_a_timestamp_position(facts, fact_feed, tenant, now):
    assert fact_feed.change_floor(tenant, after=now) == 0
    facts.put(make_fact(tenant, 1, fact_id="f_1", created_at=now))
    facts.put(make_fact(tenant, 2, fact_id="f_2", created_at=now + timedelta(seconds=2)))
    facts.put(make_fact(tenant, 3, fact_id="f_3", created_at=now + timedelta(seconds=1)))
    assert fact_feed.change_floor(tenant, after=now) == 1
    assert fact_feed.change_floor(tenant, after=now + timedelta(seconds=5)) == 3


def test_facts_created_after_a_time_position_come_oldest_first_active_and_visible_only(
    facts, fact_feed, tenant, other_tenant, now
):
    """delta from a bare since: (created_at, seq) keyset, ascending; `after_seq` resumes inside a
    millisecond."""
    same = now + timedelta(seconds=1)
    for n, fact_id, at, vis in (
        (1, "f_before", now, "world"),
        (2, "f_a", same, "world"),
        (3, "f_b", same, "world"),
        (4, "f_private", same, "private"),
        (5, "f_gone", same, "world"),
        (6, "f_c", same + timedelta(seconds=1), "world"),
    ):
        facts.put(make_fact(tenant, n, fact_id=fact_id, created_at=at, visibility=vis))
    facts.put(make_fact(other_tenant, 1, fact_id="f_other", created_at=same))
    facts.expire(tenant, "f_gone", at=same, reason="test", actor="t")
    later = now + timedelta(seconds=10)

    def ids(**kw):
        return [f.fact_id for f in fact_feed.created_after(tenant, now=later, **kw)]

    assert ids(after=now, after_seq=None) == ["f_a", "f_b", "f_c"]
    assert ids(after=now, after_seq=None, world_only=False) == ["f_a", "f_b", "f_private", "f_c"]
    assert ids(after=same, after_seq=2) == ["f_b", "f_c"]  # inside the millisecond, after seq 2
    assert ids(after=same, after_seq=None) == ["f_c"]
    assert ids(after=now, after_seq=None, limit=1) == ["f_a"]


def test_facts_whose_ttl_ran_out_are_listed_by_expiry_time(facts, fact_feed, tenant, other_tenant, now):
    """D19: (valid_until, seq) keyset up to `until`; forgotten ones left out (listed as changes)."""
    soon, later = now + timedelta(minutes=1), now + timedelta(minutes=2)
    for n, fact_id, until, vis in (
        (1, "f_later", later, "world"),
        (2, "f_soon", soon, "world"),
        (3, "f_soon_too", soon, "world"),
        (4, "f_private", soon, "private"),
        (5, "f_forgot", soon, "world"),
        (6, "f_forever", None, "world"),
    ):
        facts.put(make_fact(tenant, n, fact_id=fact_id, created_at=now, valid_until=until, visibility=vis))
    facts.put(make_fact(other_tenant, 1, fact_id="f_other", created_at=now, valid_until=soon))
    facts.expire(tenant, "f_forgot", at=now, reason="test", actor="t")

    def ids(**kw):
        return [f.fact_id for f in fact_feed.expired_between(tenant, **kw)]

    end = now + timedelta(minutes=5)
    assert ids(after=now, after_seq=None, until=end) == ["f_soon", "f_soon_too", "f_later"]
    assert ids(after=now, after_seq=None, until=end, world_only=False) == [
        "f_soon",
        "f_soon_too",
        "f_private",
        "f_later",
    ]
    assert ids(after=soon, after_seq=2, until=end) == ["f_soon_too", "f_later"]
    assert ids(after=now, after_seq=None, until=soon) == ["f_soon", "f_soon_too"]
    assert ids(after=soon, after_seq=None, until=end, limit=1) == ["f_later"]
    assert ids(after=end, after_seq=None, until=now) == []
