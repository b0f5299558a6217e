"""Reference 0.60 reads, recall (docs/protocol.md D31): `since` ANDs with `entity` and `session_id`
in the store's read, and `budget_policy` with its `budget_packing` report. On both adapter sets:
SQLite, and DynamoDB Local + the OpenSearch node (tests/unit/domain/delta_backends.py). Nothing is
mocked; there is no embedder (keyword search, exact-text dedup), so no model is needed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetmem.errors import VerbError
from fleetmem.memory import indexing
from fleetmem.memory.verbs import put_page, recall, remember
from fleetmem.models import Caller
from fleetmem.ports import CallContext
from fleetmem.timefmt import iso

CTX = CallContext("ref060r-recall")


@pytest.fixture
def bdeps_swap() -> dict[str, Any]:
    return {}  # no embedder


def _caller(d: Any) -> Caller:
    return Caller(tenant=d.test_tenant, client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)


def save(d: Any, text: str, **args: Any) -> datetime:
    """Remember `text` an hour after the previous save; returns when it was saved."""
    at = d.clock.advance(hours=1)
    remember.run(d, _caller(d), remember.RememberParams.model_validate({"fact": text, "provenance": "p", **args}), CTX)
    return at


def ask(d: Any, **args: Any) -> dict[str, Any]:
    return recall.run(d, _caller(d), recall.RecallParams.model_validate(args), CTX).body


def texts(body: dict[str, Any]) -> list[str]:
    return [f["fact"] for f in body["facts"]]


def page(d: Any, slug: str, title: str, body: str) -> None:
    caller = _caller(d)
    put_page.run(d, caller, put_page.PutPageParams(slug=slug, content=f"---\ntitle: {title}\n---\n{body}"), CTX)
    stored = d.pages.get(caller.tenant, slug)
    d.search.replace_page(caller.tenant, slug, indexing.docs_for_page(stored))  # the stream indexer's write
    client = getattr(d.search, "client", None)
    if client is not None:  # OpenSearch: make the write searchable now
        client.indices.refresh(index=d.search.index)


# -- since composes with entity and session_id -------------------------------------------------------


def test_since_ands_with_entity_before_the_limit(bdeps):
    save(bdeps, "Orion kickoff was held", entity="projects/orion")
    cut = save(bdeps, "Orion budget was drafted", entity="projects/orion")
    save(bdeps, "Orion budget was approved", entity="projects/orion")
    save(bdeps, "Orion hired a lead", entity="projects/orion")
    save(bdeps, "Vega launched", entity="projects/vega")

    assert texts(ask(bdeps, entity="projects/orion", since=iso(cut))) == [
        "Orion hired a lead",
        "Orion budget was approved",
    ]
    assert texts(ask(bdeps, entity="projects/orion", since=iso(cut), limit=1)) == ["Orion hired a lead"]
    assert ask(bdeps, entity="projects/orion", since=iso(bdeps.clock.now()))["facts"] == []
    assert len(ask(bdeps, entity="projects/orion")["facts"]) == 4  # without since: the entity's every fact


def test_since_ands_with_session_id_before_the_limit(bdeps):
    save(bdeps, "Standup moved to ten", session_id="s-1")
    cut = save(bdeps, "Deploy froze on Friday", session_id="s-1")
    save(bdeps, "Deploy thawed on Monday", session_id="s-1")
    save(bdeps, "Lunch order placed", session_id="s-2")

    assert texts(ask(bdeps, session_id="s-1", since=iso(cut))) == ["Deploy thawed on Monday"]
    assert texts(ask(bdeps, session_id="s-1", since=iso(cut - timedelta(hours=2)), limit=2)) == [
        "Deploy thawed on Monday",
        "Deploy froze on Friday",
    ]
    # entity still wins over session_id; since applies to it
    assert texts(ask(bdeps, entity="projects/none", session_id="s-1", since=iso(cut))) == []


# -- budget_policy and budget_packing ----------------------------------------------------------------


def _arms_add_up(body: dict[str, Any]) -> None:
    packing = body["budget_packing"]
    for arm in ("facts", "results"):
        a = packing[arm]
        assert a["candidates"] == a["kept"] + a["dropped"], (arm, a)
    assert len(body["facts"]) == packing["facts"]["kept"] and len(body["results"]) == packing["results"]["kept"]
    if "budget_used" in body:
        assert packing["facts"]["used"] + packing["results"]["used"] == body["budget_used"]
        assert packing["facts"]["dropped"] + packing["results"]["dropped"] == body["dropped_count"]


def test_query_first_packs_the_results_then_the_facts_into_what_is_left(bdeps):
    page(bdeps, "notes/canary", "Canary rollout", "The canary rollout starts in region west.")
    save(bdeps, "Canary rollout is paused", entity="projects/canary")  # 6 tokens
    save(bdeps, "Canary rollout note: " + "x" * 59, entity="projects/canary")  # 20 tokens, the newest
    args = {"query": "canary rollout", "entity": "projects/canary", "budget_tokens": 40}

    facts_first = ask(bdeps, **args, budget_policy="facts_first")
    assert len(facts_first["facts"]) == 2 and facts_first["results"] == []
    assert {k: facts_first["budget_packing"][k] for k in ("policy", "applied", "reason")} == {
        "policy": "facts_first",
        "applied": True,
        "reason": "packed",
    }
    assert ask(bdeps, **args)["facts"] == facts_first["facts"]  # the default order
    _arms_add_up(facts_first)

    body = ask(bdeps, **args, budget_policy="query_first")
    assert [r["slug"] for r in body["results"]] == ["notes/canary"]
    hit = body["results"][0]
    result_cost = -(-len(hit["title"]) // 4) - (-len(hit["chunk"]) // 4)
    assert 6 < 40 - result_cost < 26  # what is left holds the newest fact, not both
    assert [f["fact"][:19] for f in body["facts"]] == ["Canary rollout note"]
    assert body["budget_packing"] == {
        "policy": "query_first",
        "applied": True,
        "reason": "packed",
        "facts": {"candidates": 2, "kept": 1, "dropped": 1, "used": 20},
        "results": {"candidates": 1, "kept": 1, "dropped": 0, "used": result_cost},
    }
    assert (body["budget_used"], body["dropped_count"], body["total"]) == (result_cost + 20, 1, 1)
    _arms_add_up(body)


def test_query_first_stops_at_the_first_result_that_does_not_fit(bdeps):
    page(bdeps, "notes/canary", "Canary rollout", "The canary rollout starts in region west.")
    save(bdeps, "Canary rollout is paused", entity="projects/canary")
    body = ask(bdeps, query="canary rollout", entity="projects/canary", budget_tokens=1, budget_policy="query_first")
    assert (body["facts"], body["results"]) == ([], [])
    assert body["budget_packing"]["reason"] == "first_items_exceed_budget"
    assert body["budget_packing"]["policy"] == "query_first" and body["budget_packing"]["applied"] is True
    assert (body["budget_used"], body["dropped_count"]) == (0, 2)
    _arms_add_up(body)


def test_an_ineligible_query_first_reports_facts_first_not_applied(bdeps):
    save(bdeps, "Canary rollout is paused")
    no_query = ask(bdeps, budget_tokens=100, budget_policy="query_first")
    assert {k: no_query["budget_packing"][k] for k in ("policy", "applied", "reason")} == {
        "policy": "facts_first",
        "applied": False,
        "reason": "no_query",
    }
    _arms_add_up(no_query)
    no_budget = ask(bdeps, query="canary", budget_policy="query_first")
    assert {k: no_budget["budget_packing"][k] for k in ("policy", "applied", "reason")} == {
        "policy": "facts_first",
        "applied": False,
        "reason": "no_positive_finite_budget",
    }
    assert "budget_used" not in no_budget
    _arms_add_up(no_budget)
    plain = ask(bdeps, budget_policy="facts_first")
    assert plain["budget_packing"]["reason"] == "no_positive_finite_budget"
    assert plain["budget_packing"]["applied"] is False
    assert plain["budget_packing"]["facts"]["kept"] == 1


def test_no_candidates_and_an_absent_policy(bdeps):
    empty = ask(bdeps, query="nothing here at all", budget_tokens=50, budget_policy="query_first")
    assert empty["budget_packing"]["reason"] == "no_candidates"
    assert (
        empty["budget_packing"]["facts"]
        == empty["budget_packing"]["results"]
        == {
            "candidates": 0,
            "kept": 0,
            "dropped": 0,
            "used": 0,
        }
    )
    save(bdeps, "Canary rollout is paused")
    for absent in (None, ""):
        body = ask(bdeps, budget_tokens=50, budget_policy=absent)
        assert "budget_packing" not in body and texts(body) == ["Canary rollout is paused"]


@pytest.mark.parametrize(
    ("value", "fixed"), [("QUERY-FIRST", "query_first"), ("pages_first", None), (3, None), (True, None)]
)
def test_a_bad_budget_policy_is_invalid_params_with_a_fix(value, fixed):
    with pytest.raises(VerbError) as err:
        recall.RecallParams.model_validate({"query": "q", "budget_policy": value}, context={"tool": "recall"})
    assert err.value.code == "invalid_params"
    assert err.value.detail["errors"][0]["field"] == "budget_policy"
    assert err.value.fix is not None and err.value.fix.mcp is not None
    assert err.value.fix.mcp["arguments"].get("budget_policy") == fixed


def test_sqlite_reads_with_since_stay_one_index_range():
    """The SQL each read runs with `after`, as executed (trace callback), is planned as a range on
    the read's own index, with no sort step."""
    from fleetmem.adapters.local import open_local

    now = datetime(2026, 6, 1, tzinfo=UTC)
    with open_local(":memory:") as stores:
        ran: list[str] = []
        stores.db.read(lambda c: c.set_trace_callback(ran.append))
        listing = stores.fact_listing
        for read, index in (
            (lambda: listing.by_entity("t1", "x", now=now, after=now), "facts_entity (tenant=? AND entity_slug=? AND"),
            (lambda: listing.by_session("t1", "s", now=now, after=now), "facts_session (tenant=? AND session_id=? AND"),
            (lambda: listing.recent("t1", now=now, after=now), "facts_created (tenant=? AND"),
        ):
            ran.clear()
            read()
            (sql,) = [s for s in ran if s.startswith("SELECT")]
            plan = " ".join(
                str(r[-1]) for r in stores.db.read(lambda c, q=sql: c.execute("EXPLAIN QUERY PLAN " + q).fetchall())
            )
            assert f"USING INDEX {index} created_at>?)" in plan, plan
            assert "TEMP B-TREE" not in plan, plan
