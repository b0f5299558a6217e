"""PageStore contract (fleetmem.ports.PageStore), run against every backend that provides `pages`."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from tests.contract.builders import at, page

from fleetmem.errors import Conflict
from fleetmem.models import Link, TimelineEntry
from fleetmem.protocol import MENTION_LINK_TYPE


def _slugs(items) -> list[str]:
    return [getattr(i, "slug", None) or i.page.slug for i in items]


def _ways(matches) -> set[tuple[str, str]]:
    return {(m.page.slug, m.via) for m in matches}


def _lookup(pages, tenant, *, alias="", title="", slugs=(), suffix="", world_only=True, limit=10):
    return pages.lookup(
        tenant,
        aliases=[alias] if alias else [],
        titles=[title] if title else [],
        slugs=list(slugs),
        suffix=suffix,
        world_only=world_only,
        limit=limit,
    )


def test_put_then_get_round_trips_every_field(pages, tenant):
    p = page(
        tenant,
        "people/alice-example",
        title="Alice Example",
        type="person",
        aliases=("Ally", "A. Example"),
        summary="Engineer at Acme",
        visibility="private",
        body="# Alice\n\nLikes tea. ünïcødé ✓",
        links=(Link(type="works_at", target="companies/acme", context="since 2020"), Link(target="x")),
        timeline=(TimelineEntry(date="2026-01-02", text="joined"),),
        frontmatter={"tags": ["a", "b"], "nested": {"n": 1}},
        created_at=at(-60).replace(microsecond=5000),
        updated_at=at(-1),
        last_retrieved_at=at(-2),
        author="agent-a",
    )
    pages.put(p)
    assert pages.get(tenant, p.slug) == p


def test_put_replaces_the_page_and_its_derived_rows(pages, page_listing, tenant):
    pages.put(page(tenant, "people/bob", aliases=("Bobby",), links=(Link(target="companies/acme"),)))
    pages.put(page(tenant, "people/bob", title="Robert", aliases=("Rob",), updated_at=at(5)))
    assert pages.get(tenant, "people/bob").title == "Robert"
    assert _lookup(pages, tenant, alias="bobby") == []
    assert _ways(_lookup(pages, tenant, alias="rob")) == {("people/bob", "alias")}
    assert page_listing.backlinks(tenant, "companies/acme", world_only=True) == ([], 0)


def test_a_foreign_tenants_page_is_missing(pages, page_feed, page_listing, tenant, other_tenant):
    pages.put(page(tenant, "people/alice", title="Alice", aliases=("Ally",), links=(Link(target="x/y"),)))
    assert pages.get(other_tenant, "people/alice") is None
    assert pages.heads(other_tenant, ["people/alice"]) == []
    assert page_listing.list(other_tenant, world_only=False, limit=10) == []
    assert (
        _lookup(
            pages,
            other_tenant,
            alias="ally",
            title="alice",
            slugs=["people/alice"],
            suffix="alice",
            world_only=False,
        )
        == []
    )
    assert page_listing.backlinks(other_tenant, "x/y", world_only=False) == ([], 0)
    assert page_feed.updated_since(other_tenant, since=at(-100), slug="", world_only=False, limit=10) == []
    assert pages.keyword(other_tenant, "alice", world_only=False) == []
    assert pages.delete(other_tenant, "people/alice") is False
    assert pages.get(tenant, "people/alice") is not None


def test_lookup_matches_each_way_it_applies(pages, tenant):
    pages.put(page(tenant, "people/alice-example", title="Alice Example", aliases=("  Ally   EXAMPLE ",)))
    pages.put(page(tenant, "team/people/alice-example", title="Other"))
    pages.put(page(tenant, "alice-example", title="Top Level"))
    got = _lookup(
        pages,
        tenant,
        alias="ally example",
        title="alice example",
        slugs=["people/alice-example", "nope"],
        suffix="alice-example",
    )
    assert _ways(got) == {
        ("people/alice-example", "alias"),
        ("people/alice-example", "title"),
        ("people/alice-example", "slug"),
        ("people/alice-example", "suffix"),
        ("team/people/alice-example", "suffix"),
    }


def test_lookup_suffix_matches_whole_trailing_segments_only(pages, tenant):
    pages.put(page(tenant, "people/alice"))
    pages.put(page(tenant, "people/malice"))
    pages.put(page(tenant, "team/people/alice"))
    pages.put(page(tenant, "alice"))
    assert _ways(_lookup(pages, tenant, suffix="alice")) == {
        ("people/alice", "suffix"),
        ("team/people/alice", "suffix"),
    }
    assert _ways(_lookup(pages, tenant, suffix="people/alice")) == {("team/people/alice", "suffix")}
    assert _lookup(pages, tenant, suffix="") == []


def test_lookup_world_only_never_matches_private_pages(pages, tenant):
    pages.put(page(tenant, "people/secret", title="Secret", aliases=("hidden",), visibility="private"))
    assert _lookup(pages, tenant, alias="hidden", title="secret", slugs=["people/secret"], suffix="secret") == []
    got = _lookup(
        pages,
        tenant,
        alias="hidden",
        title="secret",
        slugs=["people/secret"],
        suffix="secret",
        world_only=False,
    )
    assert {m.via for m in got} == {"alias", "title", "slug", "suffix"}


def test_lookup_returns_at_most_limit_per_way(pages, tenant):
    for i in range(5):
        pages.put(page(tenant, f"group{i}/sam", title="Sam", aliases=("sammy",)))
    got = _lookup(pages, tenant, alias="sammy", title="sam", suffix="sam", limit=2)
    assert sorted(m.via for m in got) == ["alias", "alias", "suffix", "suffix", "title", "title"]


def test_heads_skip_missing_slugs(pages, tenant):
    pages.put(page(tenant, "a/one", type="t", updated_at=at(3)))
    pages.put(page(tenant, "a/two"))
    heads = pages.heads(tenant, ["a/two", "a/missing", "a/one"])
    assert {h.slug for h in heads} == {"a/one", "a/two"}
    one = next(h for h in heads if h.slug == "a/one")
    assert (one.type, one.updated_at, one.title) == ("t", at(3), "One")


def test_list_pages_by_slug_with_keyset_paging(pages, page_listing, tenant):
    slugs = ["b", "a/z", "a", "c/1", "B", "a/b"]
    for s in slugs:
        pages.put(page(tenant, s))
    seen: list[str] = []
    after = None
    while True:
        batch = page_listing.list(tenant, world_only=True, limit=2, after=after)
        if not batch:
            break
        seen += [h.slug for h in batch]
        after = batch[-1].slug
    assert seen == sorted(slugs, key=lambda s: s.encode())


def test_list_filters_by_type_and_visibility(pages, page_listing, tenant):
    pages.put(page(tenant, "p/1", type="person"))
    pages.put(page(tenant, "p/2", type="person", visibility="private"))
    pages.put(page(tenant, "c/1", type="company"))
    assert _slugs(page_listing.list(tenant, world_only=True, limit=10, type="person")) == ["p/1"]
    assert _slugs(page_listing.list(tenant, world_only=False, limit=10, type="person")) == ["p/1", "p/2"]
    assert _slugs(page_listing.list(tenant, world_only=True, limit=10)) == ["c/1", "p/1"]


def test_backlinks_list_incoming_links_and_count_non_mentions(pages, page_listing, tenant):
    """Mention links (`protocol.MENTION_LINK_TYPE`) are listed but not counted; self links are
    not incoming links."""
    target = "companies/acme"
    pages.put(page(tenant, "people/a", links=(Link(type="works_at", target=target, context="cto"),)))
    pages.put(page(tenant, "people/b", links=(Link(type=MENTION_LINK_TYPE, target=target),)))
    pages.put(page(tenant, "people/c", links=(Link(type="invests", target=target),), visibility="private"))
    pages.put(page(tenant, target, links=(Link(type="related", target=target),)))  # self link
    links, count = page_listing.backlinks(tenant, target, world_only=True)
    assert {(b.source, b.type, b.context) for b in links} == {
        ("people/a", "works_at", "cto"),
        ("people/b", MENTION_LINK_TYPE, None),
    }
    assert count == 1
    links, count = page_listing.backlinks(tenant, target, world_only=False)
    assert {b.source for b in links} == {"people/a", "people/b", "people/c"}
    assert count == 2
    links, count = page_listing.backlinks(tenant, target, world_only=False, limit=1)
    assert len(links) == 1 and count == 2


def test_backlinks_follow_rewrites_and_deletes_of_their_source_pages(pages, page_listing, tenant):
    """A rewritten source page counts with its new links and visibility only; a deleted one is
    gone from the list and the count."""
    target = "companies/acme"
    for i in range(5):
        pages.put(page(tenant, f"people/p{i}", links=(Link(type="works_at", target=target),), updated_at=at(i)))
    assert page_listing.backlinks(tenant, target, world_only=True, limit=10)[1] == 5
    pages.put(page(tenant, "people/p0", links=(Link(type=MENTION_LINK_TYPE, target=target),), updated_at=at(10)))
    pages.put(page(tenant, "people/p1", links=(), updated_at=at(11)))
    pages.put(
        page(tenant, "people/p2", links=(Link(type="invests", target=target),), updated_at=at(12), visibility="private")
    )
    assert pages.delete(tenant, "people/p3") is True
    links, count = page_listing.backlinks(tenant, target, world_only=True, limit=10)
    assert {(b.source, b.type) for b in links} == {("people/p0", MENTION_LINK_TYPE), ("people/p4", "works_at")}
    assert count == 1
    links, count = page_listing.backlinks(tenant, target, world_only=False, limit=10)
    assert {b.source for b in links} == {"people/p0", "people/p2", "people/p4"}
    assert count == 2
    pages.put(page(tenant, "people/p2", links=(Link(type="invests", target=target),), updated_at=at(13)))
    assert page_listing.backlinks(tenant, target, world_only=True, limit=10)[1] == 2


def test_updated_since_pages_by_time_then_slug_byte_order(pages, page_feed, tenant):
    same = at(10)
    for s in ["m/é", "m/z", "m/B", "m/a"]:
        pages.put(page(tenant, s, updated_at=same))
    pages.put(page(tenant, "m/early", updated_at=at(5)))
    pages.put(page(tenant, "m/late", updated_at=at(20)))
    pages.put(page(tenant, "m/private", updated_at=at(15), visibility="private"))
    got: list[str] = []
    since, slug = at(5), ""
    while True:
        batch = page_feed.updated_since(tenant, since=since, slug=slug, world_only=True, limit=2)
        if not batch:
            break
        got += [h.slug for h in batch]
        since, slug = batch[-1].updated_at, batch[-1].slug
    assert got == ["m/early", "m/B", "m/a", "m/z", "m/é", "m/late"]
    # strictly after (since, slug): a cursor on m/a at the shared timestamp resumes at m/z
    resumed = page_feed.updated_since(tenant, since=same, slug="m/a", world_only=False, limit=10)
    assert _slugs(resumed) == ["m/z", "m/é", "m/private", "m/late"]


def test_updated_since_starts_strictly_after_the_given_instant(pages, page_feed, tenant):
    pages.put(page(tenant, "x/1", updated_at=at(1)))
    pages.put(page(tenant, "x/2", updated_at=at(1) + timedelta(milliseconds=1)))
    assert _slugs(page_feed.updated_since(tenant, since=at(1), slug="", world_only=True, limit=5)) == [
        "x/1",
        "x/2",
    ]
    assert _slugs(page_feed.updated_since(tenant, since=at(1), slug="x/1", world_only=True, limit=5)) == ["x/2"]


def test_delete_removes_the_page_and_its_derived_rows(pages, page_listing, tenant):
    pages.put(page(tenant, "people/dan", aliases=("danny",), links=(Link(type="knows", target="people/eve"),)))
    assert pages.delete(tenant, "people/dan") is True
    assert pages.delete(tenant, "people/dan") is False
    assert pages.get(tenant, "people/dan") is None
    assert _lookup(pages, tenant, alias="danny", slugs=["people/dan"], suffix="dan", world_only=False) == []
    assert page_listing.backlinks(tenant, "people/eve", world_only=False) == ([], 0)
    assert pages.keyword(tenant, "dan", world_only=False) == []


def test_keyword_finds_pages_sharing_words_with_the_text(pages, tenant):
    pages.put(page(tenant, "people/alice-example", title="Alice Example"))
    pages.put(page(tenant, "companies/acme", title="Acme Corp", aliases=("Roadrunner Supplies",)))
    pages.put(page(tenant, "people/secret-alice", title="Secret Alice", visibility="private"))
    assert _slugs(pages.keyword(tenant, "alice smith", world_only=True)) == ["people/alice-example"]
    assert _slugs(pages.keyword(tenant, "roadrunner", world_only=True)) == ["companies/acme"]
    assert set(_slugs(pages.keyword(tenant, "alice", world_only=False))) == {
        "people/alice-example",
        "people/secret-alice",
    }
    assert len(pages.keyword(tenant, "alice", world_only=False, limit=1)) == 1


def test_keyword_treats_hostile_text_as_plain_words(pages, tenant):
    pages.put(page(tenant, "people/near", title="Near Star"))
    for text in ['"', "*", "NEAR(", "-", "star*", 'near" OR "x', "title:star", "(((", "", "   ", "ü∂ƒ"]:
        assert isinstance(pages.keyword(tenant, text, world_only=True), list)
    assert _slugs(pages.keyword(tenant, 'NEAR("star', world_only=True)) == ["people/near"]


def test_tallies_count_pages_and_their_last_write_per_day(pages, page_listing, tenant, other_tenant):
    from tests.contract.builders import T0

    pages.put(page(tenant, "notes/a"))
    pages.put(page(tenant, "notes/b", visibility="private"))
    pages.put(page(tenant, "notes/c", updated_at=T0 + timedelta(days=1)))
    pages.put(page(tenant, "notes/gone"))
    pages.delete(tenant, "notes/gone")
    pages.put(page(other_tenant, "notes/x"))
    day0, day1 = T0.date().isoformat(), (T0 + timedelta(days=1)).date().isoformat()
    whole = page_listing.tallies(tenant, world_only=False, since=T0)
    assert (whole.pages, whole.per_day) == (3, {day0: 2, day1: 1})
    world = page_listing.tallies(tenant, world_only=True, since=T0 + timedelta(days=1))
    assert (world.pages, world.per_day) == (2, {day1: 1})


# -- conditional writes (expected_updated_at) --------------------------------------------------


def test_a_put_expecting_an_older_updated_at_is_refused_and_writes_nothing(pages, tenant):
    stored = page(tenant, "topics/guarded", body="v2", aliases=("Kept",), updated_at=at(2))
    pages.put(stored)
    with pytest.raises(Conflict):
        pages.put(
            page(tenant, "topics/guarded", body="stale", aliases=("Lost",), updated_at=at(3)), expected_updated_at=at(1)
        )
    assert pages.get(tenant, "topics/guarded") == stored
    assert _ways(_lookup(pages, tenant, alias="lost")) == set()
    assert _ways(_lookup(pages, tenant, alias="kept")) == {("topics/guarded", "alias")}


def test_a_put_expecting_the_stored_updated_at_writes(pages, tenant):
    pages.put(page(tenant, "topics/guarded", body="v1", updated_at=at(1)))
    pages.put(page(tenant, "topics/guarded", body="v2", updated_at=at(2)), expected_updated_at=at(1))
    assert pages.get(tenant, "topics/guarded").body == "v2"


def test_a_put_expecting_no_page_is_refused_over_an_existing_one(pages, tenant):
    pages.put(page(tenant, "topics/guarded", body="first", updated_at=at(1)))
    with pytest.raises(Conflict):
        pages.put(page(tenant, "topics/guarded", body="second", updated_at=at(2)), expected_updated_at="")
    assert pages.get(tenant, "topics/guarded").body == "first"
    pages.put(page(tenant, "topics/fresh", body="new"), expected_updated_at="")
    assert pages.get(tenant, "topics/fresh").body == "new"


def test_a_put_expecting_a_time_is_refused_when_the_page_is_missing(pages, tenant):
    with pytest.raises(Conflict):
        pages.put(page(tenant, "topics/missing", updated_at=at(2)), expected_updated_at=at(1))
    assert pages.get(tenant, "topics/missing") is None


def test_of_concurrent_puts_expecting_the_same_version_exactly_one_writes(pages, tenant, request):
    """On every backend whose conditional writes are isolated: SQLite, and DynamoDB Local (as DynamoDB
    itself). moto's server checks a transaction's conditions without isolating concurrent requests
    (it let 4 of 8 racing writers through), so it cannot judge a race; the single-writer conditions
    above run on it."""
    if request.node.callspec.params.get("pages_backend") == "moto":
        pytest.skip("moto does not isolate concurrent conditional transactions; DynamoDB Local does")
    pages.put(page(tenant, "topics/raced", body="base", updated_at=at(1)))
    loaded = pages.get(tenant, "topics/raced").updated_at
    start = threading.Barrier(8)
    won: list[int] = []
    lost: list[int] = []
    lock = threading.Lock()

    def save(n: int) -> None:
        start.wait()
        mine = page(
            tenant, "topics/raced", body=f"writer {n}", updated_at=at(2, base=loaded) + timedelta(milliseconds=n)
        )
        try:
            pages.put(mine, expected_updated_at=loaded)
            outcome = won
        except Conflict:
            outcome = lost
        with lock:
            outcome.append(n)

    threads = [threading.Thread(target=save, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(lost) == 7, (won, lost)
    assert pages.get(tenant, "topics/raced").body == f"writer {won[0]}"
