"""delta's retracted[] on SQLite AND the AWS set (DynamoDB Local + the real OpenSearch node): a
follower that got a fact or a page learns on a later wake that it was forgotten, superseded or
deleted or that its TTL ran out — a session and a stateless caller passing back next_cursor's exact
positions alike —
budgeted (one token each), world-only for remote callers, listed in `text`, and counted by
has_more; a page written again after its deletion is delivered as a page again.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tests.unit.domain.delta_backends import BACKENDS, open_deps

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.memory.budget import cost
from fleetmem.memory.verbs import delete_page, delta, forget, put_page
from fleetmem.models import Caller, Fact
from fleetmem.ports import CallContext
from fleetmem.timefmt import iso, to_ms

CTX = CallContext("t")


@pytest.fixture
def clock() -> FixedClock:
    """Fixed, but at the real time: DynamoDB Local expires cursors by their TTL on the wall clock."""
    return FixedClock(to_ms(datetime.now(UTC)))


@pytest.fixture(params=BACKENDS)
def bdeps(request: pytest.FixtureRequest, clock: Any) -> Any:
    with open_deps(request.param, request, clock) as d:
        d.test_tenant = "t-" + uuid.uuid4().hex[:12]
        yield d


@pytest.fixture
def caller(bdeps: Any) -> Caller:
    return Caller(tenant=bdeps.test_tenant, client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)


def wake(deps: Any, caller: Caller, **kw: Any) -> dict:
    return delta.run(deps, caller, delta.DeltaParams(**kw), CTX).body


def add_fact(
    deps: Any, text: str, *, visibility: str = "world", supersede: Fact | None = None, ttl: timedelta | None = None
) -> Fact:
    now = deps.clock.now()
    fact = Fact(
        tenant=deps.test_tenant,
        fact_id=deps.ids.new_id("f_"),
        seq=deps.facts.next_seq(deps.test_tenant),
        text=text,
        provenance="test",
        client_id="agent-a",
        visibility=visibility,
        created_at=now,
        valid_until=now + ttl if ttl else None,
    )
    deps.facts.put(fact, supersede=supersede)
    return fact


class Stateless:
    """A caller passing back every next_cursor field (the exact positions)."""

    def __init__(self, start: str) -> None:
        self.args: dict[str, Any] = {"since": start}

    def wake(self, deps: Any, caller: Caller, **kw: Any) -> dict:
        body = wake(deps, caller, **self.args, **kw)
        nxt = body["next_cursor"]
        self.args = {"since": nxt["since"], "since_slug": nxt["slug"]}
        for field in ("page_seq", "fact_seq", "expiry"):
            if nxt.get(field) is not None:
                self.args[f"since_{field}"] = nxt[field]
        return body


@pytest.fixture(params=["session", "stateless"])
def follower(request: pytest.FixtureRequest, bdeps: Any, caller: Caller) -> Any:
    """A wake function: a session, or a stateless caller with the exact positions."""
    if request.param == "session":
        wake(bdeps, caller, session_id="hb")
        return lambda **kw: wake(bdeps, caller, session_id="hb", **kw)
    reader = Stateless(iso(bdeps.clock.now()))
    reader.wake(bdeps, caller)  # drained: the exact positions from here on
    return lambda **kw: reader.wake(bdeps, caller, **kw)


def test_a_forgotten_fact_is_reported_to_a_follower_that_got_it(bdeps, caller, clock, follower):
    clock.advance(seconds=1)
    fact = add_fact(bdeps, "The launch is on Friday")
    assert [f["fact"] for f in follower()["facts"]] == ["The launch is on Friday"]
    clock.advance(seconds=1)
    forget.run(bdeps, caller, forget.ForgetParams(id=fact.fact_id, reason="wrong date"), CTX)
    body = follower()
    assert body["facts"] == []
    assert body["retracted"] == [{"kind": "fact", "id": fact.fact_id, "reason": "forgotten", "at": iso(clock.now())}]
    assert fact.fact_id in body["text"] and "forgotten" in body["text"]
    assert follower()["retracted"] == []  # once
    delta.DeltaResult.model_validate(body)


def test_a_superseded_fact_is_reported_with_the_fact_that_replaces_it(bdeps, caller, clock, follower):
    clock.advance(seconds=1)
    old = add_fact(bdeps, "The deadline is 2027-01-15")
    follower()
    clock.advance(seconds=1)
    new = add_fact(bdeps, "The deadline is 2027-02-01", supersede=old)
    body = follower()
    assert [f["fact_id"] for f in body["facts"]] == [new.fact_id]
    assert body["retracted"] == [
        {
            "kind": "fact",
            "id": old.fact_id,
            "reason": "superseded",
            "at": iso(clock.now()),
            "superseded_by": new.fact_id,
        }
    ]


def test_a_deleted_page_is_reported_and_a_rewrite_brings_it_back(bdeps, caller, clock, follower):
    clock.advance(seconds=1)
    put_page.run(bdeps, caller, put_page.PutPageParams(slug="notes/plan", content="The plan."), CTX)
    assert [p["slug"] for p in follower()["pages"]] == ["notes/plan"]
    clock.advance(seconds=1)
    delete_page.run(bdeps, caller, delete_page.DeletePageParams(slug="notes/plan"), CTX)
    body = follower()
    assert body["pages"] == []
    assert body["retracted"] == [{"kind": "page", "slug": "notes/plan", "reason": "deleted", "at": iso(clock.now())}]
    assert "notes/plan" in body["text"] and "deleted" in body["text"]
    clock.advance(seconds=1)
    put_page.run(bdeps, caller, put_page.PutPageParams(slug="notes/plan", content="The plan, again."), CTX)
    again = follower()
    assert [p["slug"] for p in again["pages"]] == ["notes/plan"] and again["retracted"] == []
    # list_pages never shows a tombstone
    assert [h.slug for h in bdeps.page_listing.list(caller.tenant, world_only=True, limit=10)] == ["notes/plan"]


def drain_retractions(follower: Any, budget: int) -> list[str]:
    """Wake at `budget` until nothing is pending: every retraction a wake lists is in its text."""
    seen: list[str] = []
    for calls in range(1, 9):
        body = follower(budget_tokens=budget)
        assert cost(body["text"]) <= budget and body["budget_used"] == cost(body["text"])
        assert all(r["id"] in body["text"] for r in body["retracted"])
        seen += [r["id"] for r in body["retracted"]]
        if not body["has_more"]:
            assert calls > 1  # the budget held some of the lines, not all
            return seen
    raise AssertionError("the retractions did not drain")


@pytest.mark.parametrize("budget", [100, 120])
def test_retractions_cost_their_line_and_drain_over_calls_at_a_small_budget(bdeps, caller, clock, follower, budget):
    clock.advance(seconds=1)
    facts = [add_fact(bdeps, f"Fact {i} that will be forgotten soon") for i in range(5)]
    assert len(follower()["facts"]) == 5
    clock.advance(seconds=1)
    for f in facts:
        forget.run(bdeps, caller, forget.ForgetParams(id=f.fact_id), CTX)
    assert drain_retractions(follower, budget) == [f.fact_id for f in facts]


def test_remote_callers_never_learn_about_private_retractions(bdeps, caller, clock):
    local = Caller(tenant=caller.tenant, client_id="local", scopes=frozenset({"read", "write", "admin"}), remote=False)
    start = iso(clock.now())
    clock.advance(seconds=1)
    secret = add_fact(bdeps, "A private note", visibility="private")
    put_page.run(bdeps, local, put_page.PutPageParams(slug="notes/secret", content="x", visibility="private"), CTX)
    zero = {"since": start, "since_page_seq": 0, "since_fact_seq": 0}
    clock.advance(seconds=1)
    forget.run(bdeps, local, forget.ForgetParams(id=secret.fact_id), CTX)
    delete_page.run(bdeps, local, delete_page.DeletePageParams(slug="notes/secret"), CTX)
    assert wake(bdeps, caller, include_private=True, **zero)["retracted"] == []
    wide = wake(bdeps, local, include_private=True, **zero)["retracted"]
    assert {(r["kind"], r["reason"]) for r in wide} == {("fact", "forgotten"), ("page", "deleted")}


def test_a_fact_whose_ttl_ran_out_is_reported_once_in_expiry_order(bdeps, caller, clock, follower):
    clock.advance(seconds=1)
    later = add_fact(bdeps, "Parking is free this week", ttl=timedelta(hours=2))
    sooner = add_fact(bdeps, "The lobby door is broken", ttl=timedelta(hours=1))
    assert len(follower()["facts"]) == 2
    clock.advance(minutes=90)
    body = follower()
    assert body["retracted"] == [
        {"kind": "fact", "id": sooner.fact_id, "reason": "expired", "at": iso(sooner.valid_until)}
    ]
    assert "expired" in body["text"]
    clock.advance(hours=1)
    assert [r["id"] for r in follower()["retracted"]] == [later.fact_id]
    assert follower()["retracted"] == []


def test_ttl_expiries_sharing_a_millisecond_drain_at_a_small_budget(bdeps, caller, clock, follower):
    clock.advance(seconds=1)
    facts = [add_fact(bdeps, f"Short-lived fact {i}", ttl=timedelta(minutes=5)) for i in range(5)]
    assert len(follower()["facts"]) == 5
    clock.advance(minutes=10)
    assert drain_retractions(follower, 100) == [f.fact_id for f in facts]


def test_remote_callers_never_learn_about_a_private_fact_running_out(bdeps, caller, clock):
    local = Caller(tenant=caller.tenant, client_id="local", scopes=frozenset({"read", "write", "admin"}), remote=False)
    start = iso(clock.now())
    add_fact(bdeps, "A private reminder", visibility="private", ttl=timedelta(minutes=1))
    clock.advance(minutes=2)
    zero = {"since": start, "since_page_seq": 0, "since_fact_seq": 0}
    assert wake(bdeps, caller, include_private=True, **zero)["retracted"] == []
    assert [r["reason"] for r in wake(bdeps, local, include_private=True, **zero)["retracted"]] == ["expired"]
