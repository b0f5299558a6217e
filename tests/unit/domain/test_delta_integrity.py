"""delta integrity (issue 8 items 1, 2, 3-progress, 9; D14) on SQLite AND the AWS set (DynamoDB Local
+ the real OpenSearch node): a write committed after a later-stamped one is still delivered, facts dropped by the
budget come later, more than 50 facts drain, an oversized first item is delivered truncated, and
fact items carry `fact` and `kind`.

The lost-write interleaving is reproduced deterministically: a write stamped at t1 commits after
a write stamped at t2 > t1 was already delivered (exactly what concurrent writers do when the
first one is slower between stamping and committing).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tests.unit.domain.delta_backends import BACKENDS, open_deps

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.sqlite.facts import SqliteFactStore
from fleetmem.memory.budget import cost
from fleetmem.memory.verbs import delta, put_page
from fleetmem.models import Caller, Fact, Page
from fleetmem.ports import CallContext
from fleetmem.timefmt import to_ms

CTX = CallContext("t")
EPOCH = "1970-01-01T00:00:00Z"


@pytest.fixture
def clock() -> FixedClock:
    """Fixed, but at the real time: DynamoDB Local expires cursors by their TTL on the wall clock."""
    return FixedClock(to_ms(datetime.now(UTC)))


@pytest.fixture(params=BACKENDS)
def bdeps(request: pytest.FixtureRequest, clock: Any) -> Any:
    with open_deps(request.param, request, clock) as d:
        # the wall clock again once the engines are up (starting them can take tens of seconds):
        # DynamoDB stamps when it numbers a change with the wall clock, and the settle tests compare
        # that stamp with this clock
        clock.set(datetime.now(UTC))
        d.test_tenant = "t-" + uuid.uuid4().hex[:12]  # a fresh tenant per test (shared tables)
        yield d


@pytest.fixture
def caller(bdeps: Any) -> Caller:
    return Caller(tenant=bdeps.test_tenant, client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)


def wake(deps: Any, caller: Caller, **kw: Any) -> dict:
    return delta.run(deps, caller, delta.DeltaParams(**kw), CTX).body


def put(deps: Any, caller: Caller, slug: str, **kw: Any) -> None:
    put_page.run(deps, caller, put_page.PutPageParams(slug=slug, content="Body.", **kw), CTX)


def stamped_page(deps: Any, slug: str, at: Any, *, title: str | None = None) -> Page:
    """A page written straight to the store with an explicit updated_at (a write stamped at `at`)."""
    page = Page(tenant=deps.test_tenant, slug=slug, title=title or slug, created_at=at, updated_at=at, body="Body.")
    deps.pages.put(page)
    return page


def stamped_fact(deps: Any, text: str, at: Any, *, kind: str = "fact") -> Fact:
    fact = Fact(
        tenant=deps.test_tenant,
        fact_id=deps.ids.new_id("f_"),
        seq=deps.facts.next_seq(deps.test_tenant),
        text=text,
        kind=kind,
        provenance="test",
        client_id="agent-a",
        created_at=at,
    )
    deps.facts.put(fact)
    return fact


def follow(body: dict) -> dict:
    """The next call's arguments from next_cursor: every field it has (the exact positions too)."""
    nxt = body["next_cursor"]
    args = {"since": nxt["since"], "since_slug": nxt["slug"]}
    for field in ("page_seq", "fact_seq"):
        if nxt.get(field) is not None:
            args[f"since_{field}"] = nxt[field]
    return args


def texts(body: dict) -> list[str]:
    """Fact texts of a response (`fact`; item 9's own test checks the name, the others the delivery)."""
    return [f["fact"] if "fact" in f else f["text"] for f in body["facts"]]


# -- item 1: a late commit of an earlier-stamped write ------------------------------------------


def test_a_page_stamped_earlier_but_committed_later_is_still_delivered_to_a_session(bdeps, caller, clock):
    wake(bdeps, caller, session_id="hb")
    t1 = clock.advance(seconds=1)
    t2 = clock.advance(seconds=1)
    stamped_page(bdeps, "p/later-stamp", t2)  # committed first
    clock.advance(seconds=1)
    first = wake(bdeps, caller, session_id="hb", budget_tokens=120)
    assert [p["slug"] for p in first["pages"]] == ["p/later-stamp"]
    stamped_page(bdeps, "p/earlier-stamp", t1)  # stamped at t1 < t2, committed after the wake
    second = wake(bdeps, caller, session_id="hb", budget_tokens=120)
    assert [p["slug"] for p in second["pages"]] == ["p/earlier-stamp"]


def test_a_fact_created_earlier_but_committed_later_is_still_delivered(bdeps, caller, clock):
    wake(bdeps, caller, session_id="hb")
    t1 = clock.advance(seconds=1)
    t2 = clock.advance(seconds=1)
    stamped_fact(bdeps, "committed first", t2)
    clock.advance(seconds=1)
    first = wake(bdeps, caller, session_id="hb")
    assert texts(first) == ["committed first"]
    stamped_fact(bdeps, "stamped earlier, committed later", t1)
    second = wake(bdeps, caller, session_id="hb")
    assert texts(second) == ["stamped earlier, committed later"]


def test_a_stateless_caller_following_next_cursor_gets_late_commits_too(bdeps, caller, clock):
    t1 = clock.advance(seconds=1)
    t2 = clock.advance(seconds=1)
    stamped_page(bdeps, "p/b", t2)
    stamped_fact(bdeps, "fact b", t2)
    first = wake(bdeps, caller, since=EPOCH)
    assert [p["slug"] for p in first["pages"]] == ["p/b"] and texts(first) == ["fact b"]
    stamped_page(bdeps, "p/a", t1)
    stamped_fact(bdeps, "fact a", t1)
    second = wake(bdeps, caller, **follow(first))
    assert [p["slug"] for p in second["pages"]] == ["p/a"] and texts(second) == ["fact a"]


# -- item 2: facts the budget drops ----------------------------------------------------------------


def test_a_stateless_drain_at_budget_150_delivers_every_page_and_every_fact(bdeps, caller, clock):
    slugs = [f"notes/page-{i:02d}" for i in range(11)]
    facts = [f"Fact number {i} about the drain" for i in range(35)]
    for i, slug in enumerate(slugs):
        clock.advance(seconds=1)
        put(bdeps, caller, slug)
        for text in facts[i * 35 // 11 : (i + 1) * 35 // 11]:
            stamped_fact(bdeps, text, clock.now())
    for text in facts[(11 * 35) // 11 :]:
        stamped_fact(bdeps, text, clock.now())
    got_pages: list[str] = []
    got_facts: list[str] = []
    args: dict = {"since": EPOCH}
    for _ in range(200):
        body = wake(bdeps, caller, budget_tokens=150, **args)
        assert body["budget_used"] <= 150
        got_pages += [p["slug"] for p in body["pages"]]
        got_facts += texts(body)
        if not body["has_more"]:
            break
        args = follow(body)
    assert body["has_more"] is False
    assert set(got_pages) == set(slugs) and set(got_facts) == set(facts)


def reference_follow(body: dict) -> dict:
    """What a client written for the reference implementation passes back: since and slug only."""
    return {"since": body["next_cursor"]["since"], "since_slug": body["next_cursor"]["slug"]}


def _passes(nxt: dict, catalog: dict[str, tuple[str, str | None]], missing: set[str]) -> list[str]:
    """Items not delivered yet that a call from next_cursor's since + slug alone would skip."""
    since, slug = nxt["since"], nxt["slug"]
    skipped = []
    for key in missing:
        at, page_slug = catalog[key]
        if page_slug is not None and (at, page_slug) <= (since, slug):
            skipped.append(key)
        if page_slug is None and (at < since or (at == since and not slug.startswith("#f"))):
            skipped.append(key)
    return skipped


@pytest.mark.parametrize("follower", [reference_follow, follow], ids=["since-and-slug-only", "every-field"])
def test_35_facts_then_11_pages_drain_at_budget_150_whatever_the_client_passes_back(bdeps, caller, clock, follower):
    facts = [f"Drained fact number {i} about the reference client" for i in range(35)]
    clock.advance(seconds=1)
    for text in facts[:20]:  # many facts in one millisecond: the cursor must step inside it
        stamped_fact(bdeps, text, clock.now())
    for text in facts[20:]:
        clock.advance(milliseconds=1)
        stamped_fact(bdeps, text, clock.now())
    slugs = [f"notes/after-{i:02d}" for i in range(11)]
    for slug in slugs:
        clock.advance(seconds=1)
        put(bdeps, caller, slug)
    everything = wake(bdeps, caller, since=EPOCH)
    catalog = {f["fact"]: (f["created_at"], None) for f in everything["facts"]}
    catalog.update({p["slug"]: (p["updated_at"], p["slug"]) for p in everything["pages"]})
    assert len(catalog) == 46
    got_pages: list[str] = []
    got_facts: list[str] = []
    args: dict = {"since": EPOCH}
    for _ in range(100):
        body = wake(bdeps, caller, budget_tokens=150, **args)
        assert body["budget_used"] <= 150 and (body["pages"] or body["facts"])
        got_pages += [p["slug"] for p in body["pages"]]
        got_facts += texts(body)
        # next_cursor.since (+ slug) never passes an item of either arm not delivered yet
        assert _passes(body["next_cursor"], catalog, set(catalog) - set(got_pages) - set(got_facts)) == []
        if not body["has_more"]:
            break
        args = follower(body)
    assert body["has_more"] is False
    assert set(got_pages) == set(slugs) and set(got_facts) == set(facts)


def test_a_reference_client_gets_facts_that_share_a_millisecond_past_the_budget(bdeps, caller, clock):
    """Facts created in one millisecond that do not fit one call are not re-sent forever: the
    cursor steps inside the millisecond (since_slug "#f<seq>") and every call makes progress."""
    clock.advance(seconds=1)
    facts = [f"Same-millisecond fact {i:02d} with a few more words" for i in range(12)]
    for text in facts:
        stamped_fact(bdeps, text, clock.now())
    stamped_page(bdeps, "p/same-ms", clock.now())
    got: list[str] = []
    pages: list[str] = []
    args: dict = {"since": EPOCH}
    for _ in range(30):
        body = wake(bdeps, caller, budget_tokens=140, **args)  # the frame and a few lines
        assert len(body["facts"]) + len(body["pages"]) >= 1
        got += texts(body)
        pages += [p["slug"] for p in body["pages"]]
        if not body["has_more"]:
            break
        args = reference_follow(body)
    assert got == facts and pages == ["p/same-ms"] and body["has_more"] is False


def test_facts_dropped_by_the_budget_on_a_session_wake_come_on_the_next_wake(bdeps, caller, clock):
    wake(bdeps, caller, session_id="hb")
    clock.advance(seconds=1)
    written = [f"Budget-dropped fact {i} with some words" for i in range(5)]
    for text in written:
        stamped_fact(bdeps, text, clock.now())
    first = wake(bdeps, caller, session_id="hb", budget_tokens=110)  # the frame and a line or two
    got = texts(first)
    assert 1 <= len(got) < 5 and got == written[: len(got)] and all(t in first["text"] for t in got)
    assert first["dropped_count"] == 5 - len(got) and first["has_more"] is True
    rest = wake(bdeps, caller, session_id="hb")
    assert texts(rest) == written[len(got) :] and rest["has_more"] is False


def test_more_than_fifty_facts_between_wakes_drain_over_later_wakes(bdeps, caller, clock):
    wake(bdeps, caller, session_id="hb")
    clock.advance(seconds=1)
    written = [f"Bulk fact {i:03d}" for i in range(120)]
    for text in written:
        stamped_fact(bdeps, text, clock.now())
    seen: list[str] = []
    more = []
    for _ in range(3):
        body = wake(bdeps, caller, session_id="hb")
        seen += texts(body)
        more.append(body["has_more"])
    assert seen == written and more == [True, True, False]


# -- item 3 (progress): an oversized first item never freezes a session ---------------------------


def test_an_oversized_first_fact_is_delivered_truncated_and_the_session_moves_on(bdeps, caller, clock):
    wake(bdeps, caller, session_id="hb")
    clock.advance(seconds=1)
    stamped_fact(bdeps, "x" * 280_000, clock.now())
    stamped_fact(bdeps, "a normal fact after the big one", clock.now())
    first = wake(bdeps, caller, session_id="hb", budget_tokens=3000)
    [big] = first["facts"]
    assert big["truncated"] is True and cost(big["fact"]) <= 3000 and first["budget_used"] <= 3000
    assert first["has_more"] is True
    second = wake(bdeps, caller, session_id="hb", budget_tokens=3000)
    assert texts(second) == ["a normal fact after the big one"]
    assert "truncated" not in second["facts"][0] and second["has_more"] is False


def test_an_oversized_first_page_is_delivered_truncated_and_a_stateless_drain_ends(bdeps, caller, clock):
    # DynamoDB index keys cap a slug near 1 KB and a title near 2 KB; SQLite takes the issue's
    # 3,000-character slug. Either way title + slug cost more than the budget of 500.
    local = isinstance(bdeps.facts, SqliteFactStore)
    long_slug = "s/" + "a" * (3000 if local else 900)
    clock.advance(seconds=1)
    stamped_page(bdeps, long_slug, clock.now(), title="Long title " * (300 if local else 172))
    stamped_page(bdeps, "p/small", clock.now() + timedelta(milliseconds=1))
    first = wake(bdeps, caller, since=EPOCH, budget_tokens=500)
    [page] = first["pages"]
    assert page["truncated"] is True and cost(f"{page['title']} {page['slug']}") <= 500
    assert first["next_cursor"]["slug"] == long_slug  # the cursor names the real page
    second = wake(bdeps, caller, budget_tokens=500, **follow(first))
    assert [p["slug"] for p in second["pages"]] == ["p/small"] and second["has_more"] is False


# -- item 9: fact items as recall lists them ---------------------------------------------------------


def test_delta_fact_items_carry_fact_and_kind_and_the_text_block_renders_them(bdeps, caller, clock):
    clock.advance(seconds=1)
    stamped_fact(bdeps, "Alice will send the contract", clock.now(), kind="commitment")
    body = wake(bdeps, caller, since=EPOCH)
    [item] = body["facts"]
    assert item["fact"] == "Alice will send the contract" and item["kind"] == "commitment"
    assert "text" not in item
    assert "Alice will send the contract" in body["text"]
    delta.DeltaResult.model_validate(body)


# -- the settle horizon of the DynamoDB change indexes -----------------------------------------------


@pytest.mark.dynamodb_local
@pytest.mark.parametrize("bdeps", [BACKENDS[1]], indirect=True)
def test_on_dynamodb_a_change_is_listed_only_once_it_has_settled(bdeps, caller, clock):
    """The change indexes are GSIs (eventually consistent on the service, not on DynamoDB Local):
    with a settle horizon, delta lists changes in change-number order only up to the first one
    younger than the horizon, so a higher number is never delivered while a lower one may still be
    on its way into the index. Nothing is skipped: the held-back change comes on a later wake."""
    from datetime import timedelta as td

    bdeps.page_feed.settle = bdeps.fact_feed.settle = td(seconds=5)
    t0 = clock.now()
    stamped_page(bdeps, "p/old", t0)
    stamped_fact(bdeps, "fact old", t0)
    clock.advance(seconds=4)
    stamped_page(bdeps, "p/new", clock.now())
    stamped_fact(bdeps, "fact new", clock.now())
    clock.advance(seconds=2)  # t0 + 6 s: the first writes have settled, the second have not
    first = wake(bdeps, caller, since=EPOCH)
    assert [p["slug"] for p in first["pages"]] == ["p/old"] and texts(first) == ["fact old"]
    clock.advance(seconds=4)  # t0 + 10 s: everything has settled
    second = wake(bdeps, caller, **follow(first))
    assert [p["slug"] for p in second["pages"]] == ["p/new"] and texts(second) == ["fact new"]
