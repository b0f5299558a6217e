"""D16 on every budgeted verb: with `budget_tokens` set, a `text` field (delta, context_pack) never
costs more than the budget by the budget rule (ceil(len/4)), its frame lines included, and
`budget_used` never exceeds it (recall, which has no text, included) — at budgets 1, 60, 600 and
4,000, over a corpus whose packed items alone fill the larger budgets.

Runs the tools' `run` over the real local stores (in-memory SQLite) with a FixedClock.
"""

from __future__ import annotations

import pytest

from fleetmem.memory.budget import cost
from fleetmem.memory.verbs import context_pack, delta, put_page, recall, remember
from fleetmem.ports import CallContext

CTX = CallContext("t")
BUDGETS = [1, 60, 600, 4000]
EPOCH = "1970-01-01T00:00:00Z"


@pytest.fixture
def corpus(deps, remote_caller, clock):
    """40 entity pages with a timeline and 60 facts about them: more than any budget here holds."""
    for i in range(40):
        clock.advance(seconds=1)
        put_page.run(
            deps,
            remote_caller,
            put_page.PutPageParams(
                slug=f"people/person-{i:02d}",
                content=f"Person {i} works on project {i % 7} with the ops team.",
                timeline=[{"date": "2026-06-12", "text": f"Person {i} will ship the quarterly report"}],
            ),
            CTX,
        )
    for i in range(60):
        clock.advance(seconds=1)
        remember.run(
            deps,
            remote_caller,
            remember.RememberParams(
                fact=f"Person {i % 40} agreed to review the deployment runbook before release {i}",
                provenance="test",
                entity=f"people/person-{i % 40:02d}",
                kind="commitment",
            ),
            CTX,
        )
    return [f"people/person-{i:02d}" for i in range(8)]


@pytest.mark.parametrize("budget", BUDGETS)
def test_delta_text_and_budget_used_stay_within_the_budget(deps, remote_caller, corpus, budget):
    body = delta.run(
        deps,
        remote_caller,
        delta.DeltaParams(since=EPOCH, budget_tokens=budget, entities=",".join(corpus)),
        CTX,
    ).body
    assert body["budget_used"] <= budget
    assert cost(body["text"]) <= budget
    if budget >= 600:  # room for the frame and items: the text shows what was delivered
        assert body["pages"] and body["pages"][0]["slug"] in body["text"]


@pytest.mark.parametrize("budget", BUDGETS)
def test_a_session_delta_text_stays_within_the_budget(deps, remote_caller, clock, budget):
    delta.run(deps, remote_caller, delta.DeltaParams(session_id="hb", budget_tokens=budget), CTX)
    clock.advance(seconds=1)
    for i in range(30):
        put_page.run(
            deps,
            remote_caller,
            put_page.PutPageParams(slug=f"notes/n-{i:02d}", content="A note.", title=f"Note number {i}"),
            CTX,
        )
    body = delta.run(deps, remote_caller, delta.DeltaParams(session_id="hb", budget_tokens=budget), CTX).body
    assert body["budget_used"] <= budget and cost(body["text"]) <= budget


@pytest.mark.parametrize("budget", BUDGETS)
def test_context_pack_text_and_budget_used_stay_within_the_budget(deps, remote_caller, corpus, budget):
    body = context_pack.run(
        deps, remote_caller, context_pack.ContextPackParams(entities=",".join(corpus), budget_tokens=budget), CTX
    ).body
    assert body["budget_used"] <= budget
    assert cost(body["text"]) <= budget


@pytest.mark.parametrize("budget", BUDGETS)
def test_recall_budget_used_stays_within_the_budget(deps, remote_caller, corpus, budget):
    body = recall.run(
        deps, remote_caller, recall.RecallParams(query="deployment runbook review", budget_tokens=budget), CTX
    ).body
    assert body["budget_used"] <= budget
    assert "text" not in body  # recall has no text block to bound
