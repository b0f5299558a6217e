"""delta: input rules, first wake, keyset paging (incl. equal-timestamp clusters larger than the fetch
limit), budget packing, session cursor advance rules, 7-day expiry and per-client namespaces.

Runs the tool's `run` over the real local stores (in-memory SQLite) with a FixedClock.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from fleetmem.errors import VerbError
from fleetmem.memory.budget import cost
from fleetmem.memory.render import render_delta
from fleetmem.memory.verbs import delta, put_page
from fleetmem.models import Caller, Fact
from fleetmem.ports import CallContext
from fleetmem.timefmt import iso

CTX = CallContext("t")


def put(deps, caller, slug, content="Body.", **kw):
    return put_page.run(deps, caller, put_page.PutPageParams(slug=slug, content=content, **kw), CTX).body


def wake(deps, caller, **kw):
    return delta.run(deps, caller, delta.DeltaParams(**kw), CTX)


def add_fact(deps, text, *, visibility="world", entity_slug=None, kind="fact"):
    fact = Fact(
        tenant="t1",
        fact_id=deps.ids.new_id("f_"),
        seq=deps.facts.next_seq("t1"),
        text=text,
        kind=kind,
        entity_slug=entity_slug,
        provenance="test",
        visibility=visibility,
        client_id="local",
        created_at=deps.clock.now(),
    )
    deps.facts.put(fact)
    return fact


def cursor(deps, client, session):
    return deps.cursors.get("t1", client, session, now=deps.clock.now())


def page_slugs(body):
    return [p["slug"] for p in body["pages"]]


def test_neither_since_nor_session_is_invalid_params_with_a_since_fix(deps, remote_caller):
    with pytest.raises(VerbError) as err:
        wake(deps, remote_caller, budget_tokens=100)
    assert err.value.code == "invalid_params"
    assert err.value.suggestion
    args = err.value.fix.mcp["arguments"]
    assert args["budget_tokens"] == 100 and args["since"] == "2026-06-10T09:30:00.000Z"


def test_an_unparseable_since_is_invalid_params(deps, remote_caller):
    with pytest.raises(VerbError) as err:
        wake(deps, remote_caller, since="yesterday-ish", session_id="s")
    assert err.value.code == "invalid_params"
    assert err.value.fix.mcp is None and "ISO 8601" in err.value.fix.why  # no made-up time


def test_since_is_echoed_in_the_millisecond_z_form(deps, remote_caller):
    body = wake(deps, remote_caller, since="1970-01-01T00:00:00Z").body
    assert body["since"] == "1970-01-01T00:00:00.000Z"
    assert wake(deps, remote_caller, since="2026-06-11T11:30:00+02:00").body["since"] == "2026-06-11T09:30:00.000Z"


def test_the_first_wake_creates_the_cursor_at_now_and_returns_an_empty_delta(deps, remote_caller, clock):
    put(deps, remote_caller, "notes/old")
    add_fact(deps, "An old fact")
    clock.advance(seconds=5)
    out = wake(deps, remote_caller, session_id="hb", budget_tokens=50)
    assert out.body["since"] == "2026-06-11T09:30:05.000Z"
    assert (out.body["pages"], out.body["facts"], out.body["threads"]) == ([], [], [])
    assert out.body["has_more"] is False
    # D14: the exact positions start at the current change counters (one page, one fact so far)
    assert {k: v for k, v in out.body["next_cursor"].items() if k != "cursor"} == {  # and the opaque cursor (D33)
        "since": "2026-06-11T09:30:05.000Z",
        "slug": "",
        "page_seq": 1,
        "fact_seq": 1,
        "expiry": "2026-06-11T09:30:05.000Z",  # TTL expiries are reported from now on
    }
    assert (out.body["budget_used"], out.body["dropped_count"]) == (cost(out.body["text"]), 0)
    assert [n.code for n in out.notices] == ["empty_retrieval"]  # the first wake says so (D33)
    stored = cursor(deps, "agent-a", "hb")
    assert (stored.since, stored.slug) == (clock.now(), "")


def test_later_wakes_deliver_changes_once_and_then_move_to_now_minus_two_seconds(deps, remote_caller, clock):
    wake(deps, remote_caller, session_id="hb")
    clock.advance(seconds=10)
    put(deps, remote_caller, "notes/b")
    add_fact(deps, "first fact")
    clock.advance(seconds=10)
    put(deps, remote_caller, "notes/a")
    add_fact(deps, "second fact")
    second = wake(deps, remote_caller, session_id="hb").body
    assert page_slugs(second) == ["notes/b", "notes/a"]  # oldest first
    assert [f["fact"] for f in second["facts"]] == ["first fact", "second fact"]  # oldest first (D14)
    assert second["has_more"] is False
    assert {k: v for k, v in second["next_cursor"].items() if k != "cursor"} == {  # and the opaque cursor (D33)
        "since": "2026-06-11T09:30:20.000Z",
        "slug": "notes/a",
        "page_seq": 2,
        "fact_seq": 2,
        "expiry": "2026-06-11T09:30:00.000Z",
    }
    assert "notes/a" in second["text"] and "second fact" in second["text"]
    stored = cursor(deps, "agent-a", "hb")
    assert (iso(stored.since), stored.slug) == ("2026-06-11T09:30:20.000Z", "notes/a")

    clock.advance(seconds=30)
    third = wake(deps, remote_caller, session_id="hb").body
    assert page_slugs(third) == [] and third["facts"] == [] and third["has_more"] is False
    stored = cursor(deps, "agent-a", "hb")
    assert (stored.since, stored.slug) == (clock.now() - timedelta(seconds=2), "")


def test_a_cluster_of_equal_timestamps_larger_than_the_fetch_limit_drains_across_wakes(deps, remote_caller, clock):
    wake(deps, remote_caller, session_id="bulk")
    clock.advance(seconds=1)
    slugs = [f"bulk/p{i:03d}" for i in range(120)]
    for slug in reversed(slugs):  # all share one updated_at
        put(deps, remote_caller, slug)
    seen: list[str] = []
    more = []
    for _ in range(3):
        body = wake(deps, remote_caller, session_id="bulk").body
        seen += page_slugs(body)
        more.append(body["has_more"])
    assert seen == list(reversed(slugs))  # each exactly once, in commit (change) order
    assert more == [True, True, False]


def test_stateless_callers_resume_with_next_cursor_since_and_slug(deps, remote_caller, clock):
    start = iso(clock.now())
    clock.advance(seconds=1)
    slugs = [f"bulk/p{i:03d}" for i in range(75)]
    for slug in slugs:
        put(deps, remote_caller, slug)
    first = wake(deps, remote_caller, since=start).body
    assert len(first["pages"]) == 50 and first["has_more"] is True
    nxt = first["next_cursor"]
    second = wake(deps, remote_caller, since=nxt["since"], since_slug=nxt["slug"]).body
    assert page_slugs(first) + page_slugs(second) == slugs
    assert second["has_more"] is False


def test_budget_packs_pages_then_facts_as_the_prefix_its_text_shows(deps, remote_caller, clock):
    """The budget is spent on the text (frame included): the wake delivers exactly the prefix its
    text shows, and budget_used is the text's cost."""
    start = iso(clock.now())
    clock.advance(seconds=1)
    for slug in ["p/one", "p/two", "p/three"]:
        put(deps, remote_caller, slug)
        clock.advance(seconds=1)
    add_fact(deps, "a fact that will not fit in the budget")
    full = wake(deps, remote_caller, since=start).body
    two = render_delta(full["since"], full["pages"][:2], [], has_more=True, left_out=2)
    body = wake(deps, remote_caller, since=start, budget_tokens=cost(two)).body
    assert page_slugs(body) == ["p/one", "p/two"] and body["text"] == two
    assert body["facts"] == []
    assert (body["budget_tokens"], body["budget_used"], body["dropped_count"]) == (cost(two), cost(two), 2)
    assert body["has_more"] is True
    assert "p/three" not in body["text"] and "will not fit" not in body["text"]
    assert body["next_cursor"]["slug"] == "p/two"


def test_without_a_budget_there_are_no_budget_fields(deps, remote_caller):
    body = wake(deps, remote_caller, since="2026-01-01").body
    assert not {"budget_tokens", "budget_used", "dropped_count"} & set(body)


def test_budget_drops_advance_the_session_only_to_the_last_delivered_page(deps, remote_caller, clock):
    wake(deps, remote_caller, session_id="hb")
    clock.advance(seconds=1)
    for slug in ["p/a", "p/b", "p/c"]:  # a line longer than the lines counting what was left out
        put(deps, remote_caller, slug, title=f"The page {slug} with a title long enough to outweigh two short lines")
    held = cursor(deps, "agent-a", "hb")
    full = wake(
        deps, remote_caller, since=iso(held.since), since_page_seq=held.page_seq, since_fact_seq=held.fact_seq
    ).body
    two = render_delta(full["since"], full["pages"][:2], [], has_more=True, left_out=1)
    first = wake(deps, remote_caller, session_id="hb", budget_tokens=cost(two)).body
    assert page_slugs(first) == ["p/a", "p/b"] and first["has_more"] is True
    assert cursor(deps, "agent-a", "hb").slug == "p/b"
    second = wake(deps, remote_caller, session_id="hb").body
    assert page_slugs(second) == ["p/c"] and second["has_more"] is False


def test_held_back_with_nothing_delivered_holds_the_cursor_and_says_wait_then_report(deps, remote_caller, clock):
    """The deadline holds everything back: wait and retry, then report. (A budget never holds a
    fact or page back: below the text's frame the first one arrives cut, D14.)"""
    wake(deps, remote_caller, session_id="hb")
    before = cursor(deps, "agent-a", "hb")
    clock.advance(seconds=1)
    add_fact(deps, "a fact the deadline keeps back")
    expired = CallContext("t", deadline_at=time.monotonic() - 1)
    streak_fixes = []
    for _ in range(3):
        clock.advance(seconds=30)
        out = delta.run(deps, remote_caller, delta.DeltaParams(session_id="hb", budget_tokens=1), expired)
        assert out.body["pages"] == [] and out.body["facts"] == [] and out.body["has_more"] is True
        assert out.body["next_cursor"]["fact_seq"] == before.fact_seq
        stored = cursor(deps, "agent-a", "hb")
        assert (stored.since, stored.slug, stored.fact_seq) == (before.since, before.slug, before.fact_seq)
        [notice] = out.notices
        assert (notice.code, notice.kind) == ("delta_incomplete", "degraded")
        streak_fixes.append(notice.fix)
    assert all(f.actor == "provider" for f in streak_fixes)
    assert streak_fixes[0].retry_after_seconds and streak_fixes[0].mcp == {
        "tool": "delta",
        "arguments": {"session_id": "hb", "budget_tokens": 1},
    }
    assert streak_fixes[1].mcp is not None
    assert streak_fixes[2].mcp is None and streak_fixes[2].argv is None  # third in a row: report
    # Below the text's frame the session still progresses (D14): the fact arrives cut to the budget,
    # its text the cut words alone, and the next wake goes on after it.
    short = wake(deps, remote_caller, session_id="hb", budget_tokens=1)
    assert short.notices == [] and cost(short.body["text"]) <= 1
    [cut] = short.body["facts"]
    assert cut["truncated"] is True and cut["fact"] == short.body["text"] == "a f…"
    assert wake(deps, remote_caller, session_id="hb").body["facts"] == []
    assert cursor(deps, "agent-a", "hb").incomplete_streak == 0


def test_stateless_callers_with_nothing_delivered_always_get_the_wait_fix(deps, remote_caller, clock):
    start = iso(clock.now())
    clock.advance(seconds=1)
    add_fact(deps, "a fact the deadline keeps back")
    expired = CallContext("t", deadline_at=time.monotonic() - 1)
    for _ in range(4):
        out = delta.run(deps, remote_caller, delta.DeltaParams(since=start, budget_tokens=1), expired)
        [notice] = out.notices
        assert notice.code == "delta_incomplete" and notice.fix.mcp["tool"] == "delta"


def test_an_explicit_since_wins_over_the_session_cursor_but_never_moves_it_backwards(deps, remote_caller, clock):
    early = iso(clock.now())
    clock.advance(seconds=1)
    put(deps, remote_caller, "p/old")
    clock.advance(seconds=1)
    wake(deps, remote_caller, session_id="hb")  # cursor at now, after p/old
    established = cursor(deps, "agent-a", "hb")
    body = wake(deps, remote_caller, session_id="hb", since=early).body
    assert page_slugs(body) == ["p/old"]
    after = cursor(deps, "agent-a", "hb")
    assert (after.since, after.slug) == (established.since, established.slug)


def test_idle_cursors_expire_after_seven_days_and_re_establish_at_now(deps, remote_caller, clock):
    wake(deps, remote_caller, session_id="hb")
    clock.advance(days=6)
    put(deps, remote_caller, "p/during")
    assert page_slugs(wake(deps, remote_caller, session_id="hb").body) == ["p/during"]
    clock.advance(days=7, seconds=1)
    put(deps, remote_caller, "p/while-asleep")
    clock.advance(seconds=1)
    body = wake(deps, remote_caller, session_id="hb").body
    assert body["pages"] == [] and body["since"] == iso(clock.now()) and body["has_more"] is False


def test_cursors_are_namespaced_per_client_and_remote_callers_never_use_the_local_lane(
    deps,
    remote_caller,
    local_caller,
    clock,
):
    other = Caller(tenant="t1", client_id="agent-b", scopes=frozenset({"read"}), remote=True)
    impostor = Caller(tenant="t1", client_id="local", scopes=frozenset({"read"}), remote=True)
    wake(deps, remote_caller, session_id="same")
    clock.advance(seconds=1)
    put(deps, remote_caller, "p/x")
    assert wake(deps, other, session_id="same").body["pages"] == []  # its own first wake
    assert page_slugs(wake(deps, remote_caller, session_id="same").body) == ["p/x"]
    clock.advance(seconds=1)
    assert wake(deps, local_caller, session_id="same").body["pages"] == []
    clock.advance(seconds=1)
    put(deps, remote_caller, "p/y")
    assert wake(deps, impostor, session_id="same").body["pages"] == []  # first wake in "remote"
    assert cursor(deps, "remote", "same") is not None
    local_before = cursor(deps, "local", "same")
    assert page_slugs(wake(deps, local_caller, session_id="same").body) == ["p/y"]
    assert cursor(deps, "local", "same").version == local_before.version + 1


def test_the_session_id_is_clipped_to_200_characters(deps, remote_caller):
    wake(deps, remote_caller, session_id="s" * 250)
    assert cursor(deps, "agent-a", "s" * 200) is not None


def test_remote_callers_get_world_only_data_even_when_asking_for_private(deps, remote_caller, local_caller, clock):
    start = iso(clock.now())
    clock.advance(seconds=1)
    put(deps, local_caller, "p/private", visibility="private")
    put(deps, local_caller, "p/public")
    add_fact(deps, "private fact", visibility="private")
    add_fact(deps, "world fact")
    remote = wake(deps, remote_caller, since=start, include_private=True).body
    assert page_slugs(remote) == ["p/public"] and [f["fact"] for f in remote["facts"]] == ["world fact"]
    local_default = wake(deps, local_caller, since=start).body
    assert page_slugs(local_default) == ["p/public"]
    local_wide = wake(deps, local_caller, since=start, include_private=True).body
    assert page_slugs(local_wide) == ["p/private", "p/public"]
    assert [f["fact"] for f in local_wide["facts"]] == ["private fact", "world fact"]


def test_threads_report_open_thread_events_after_the_cursor_for_named_entities(deps, remote_caller, clock):
    put(
        deps,
        remote_caller,
        "people/alice",
        "Alice.",
        timeline=[
            {"date": "2026-06-01", "text": "Before"},
            {"date": "2026-06-11T10:00:00Z", "text": "After"},
        ],
    )
    add_fact(deps, "Alice will call back", entity_slug="people/alice", kind="commitment")
    body = wake(deps, remote_caller, since="2026-06-05", entities=" alice , ,unknown-entity").body
    assert [(t["slug"], t["kind"], t["text"]) for t in body["threads"]] == [
        ("people/alice", "commitment", "Alice will call back"),
        ("people/alice", "recent_event", "After"),
    ]


def test_more_than_fifty_new_facts_set_has_more_and_the_rest_follows_the_cursor(deps, remote_caller, clock):
    start = iso(clock.now())
    clock.advance(seconds=1)
    for i in range(51):
        add_fact(deps, f"fact {i}")
    body = wake(deps, remote_caller, since=start).body
    assert len(body["facts"]) == 50 and body["has_more"] is True
    assert body["facts"][0]["fact"] == "fact 0"  # oldest first (D14)
    nxt = body["next_cursor"]
    rest = wake(
        deps,
        remote_caller,
        since=nxt["since"],
        since_slug=nxt["slug"],
        since_page_seq=nxt["page_seq"],
        since_fact_seq=nxt["fact_seq"],
    ).body
    assert [f["fact"] for f in rest["facts"]] == ["fact 50"] and rest["has_more"] is False


def test_delta_is_a_read_only_verb_on_the_verbs_surface():
    spec = delta.SPEC
    assert (spec.surface, spec.scope, spec.writes) == ("verbs", "read", False)
    assert spec.annotations.get("readOnlyHint") is True
    assert spec.description.startswith("MEMORY VERB (v1):")


def test_a_passed_deadline_skips_facts_and_threads_sets_has_more_and_says_why(deps, remote_caller, clock):
    start = iso(clock.now())
    clock.advance(seconds=1)
    put(deps, remote_caller, "p/a")
    add_fact(deps, "a fact")
    expired = CallContext("t", deadline_at=time.monotonic() - 1)
    body = delta.run(deps, remote_caller, delta.DeltaParams(since=start), expired).body
    assert page_slugs(body) == ["p/a"] and body["facts"] == []
    assert body["degraded_reason"] and body["has_more"] is True


class RacingCursors:
    """The real cursor store, plus a rival wake that advances the same cursor just before our write.

    A second process cannot be interleaved deterministically in a unit test, so the rival's write is
    injected at the one point where the race matters (between our read and our conditional put).
    """

    def __init__(self, inner, rival_position):
        self.inner = inner
        self.rival_position = rival_position
        self.raced = False

    def get(self, *a, **kw):
        return self.inner.get(*a, **kw)

    def put(self, cursor, *, expected_version):
        if not self.raced and expected_version is not None:
            self.raced = True
            current = self.inner.get(cursor.tenant, cursor.client_id, cursor.session_id, now=cursor.touched_at)
            since, slug = self.rival_position
            self.inner.put(current.model_copy(update={"since": since, "slug": slug}), expected_version=current.version)
        return self.inner.put(cursor, expected_version=expected_version)


def test_a_lost_cursor_race_is_retried_once_and_never_moves_the_cursor_backwards(deps, remote_caller, clock):
    wake(deps, remote_caller, session_id="hb")
    clock.advance(seconds=1)
    put(deps, remote_caller, "p/a")
    rival = (clock.now() + timedelta(seconds=30), "p/zzz")
    deps.cursors = RacingCursors(deps.cursors, rival)
    body = wake(deps, remote_caller, session_id="hb").body
    assert page_slugs(body) == ["p/a"]
    assert deps.cursors.raced
    stored = cursor(deps, "agent-a", "hb")
    assert (stored.since, stored.slug) == rival  # the rival was ahead: ours did not pull it back


def test_a_deadline_cut_wake_moves_only_the_delivered_arm(deps, remote_caller, clock):
    wake(deps, remote_caller, session_id="hb")
    before = cursor(deps, "agent-a", "hb")
    clock.advance(seconds=1)
    put(deps, remote_caller, "p/a")
    add_fact(deps, "a fact")
    expired = CallContext("t", deadline_at=time.monotonic() - 1)
    body = delta.run(deps, remote_caller, delta.DeltaParams(session_id="hb"), expired).body
    assert page_slugs(body) == ["p/a"] and body["has_more"] is True
    after = cursor(deps, "agent-a", "hb")
    # D14: the delivered page arm moves; the skipped fact arm keeps its position
    assert after.page_seq == before.page_seq + 1 and after.fact_seq == before.fact_seq
    again = wake(deps, remote_caller, session_id="hb").body
    assert page_slugs(again) == [] and [f["fact"] for f in again["facts"]] == ["a fact"]
