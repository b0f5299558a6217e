"""Fact integrity through the one `dispatch`, on SQLite and on the AWS adapter set (moto server and
DynamoDB Local for the tables, the real OpenSearch node for the index), with the real MiniLM model:

- remember merges only facts that say the same thing (distinct invoices and templated stand-up
  notes stay two facts; a marked new value of the same attribute supersedes);
- recall(include_expired) tells active, forgotten, superseded and expired facts apart, with
  `superseded_by` / `expired_at` where they apply;
- context_pack's `text` costs at most `budget_tokens` (frame included) at tiny and huge budgets,
  its cards have the reference's flat shape, its fact items recall's, and hot facts about the
  requested entities come first.

Nothing is mocked: Bedrock is not involved (the local MiniLM embedder serves both backends).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.embedder import MiniLMEmbedder
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.memory.budget import cost
from fleetmem.memory.verbs import context_pack
from fleetmem.memory.verbs.recall import RecallResult
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch
from tests.aws import engines

pytestmark = pytest.mark.slow

CALLER = Caller(tenant="t1", client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)


@pytest.fixture(scope="module")
def minilm(request: pytest.FixtureRequest) -> MiniLMEmbedder:
    from fleetmem.config import Settings
    from fleetmem.embedder_build import build_embedder

    model_dir = Settings().model_dir
    build_embedder(model_dir, progress=lambda _line: None)
    return MiniLMEmbedder(model_dir)


@pytest.fixture(
    params=["sqlite", "moto", pytest.param("dynamodb-local", marks=pytest.mark.dynamodb_local)],
)
def deps(request: pytest.FixtureRequest, minilm: MiniLMEmbedder) -> Iterator[Deps]:
    clock = FixedClock(datetime(2026, 6, 11, 9, 30, tzinfo=UTC))
    if request.param == "sqlite":
        from fleetmem.adapters.local import open_local

        stores = open_local(":memory:")
        try:
            yield Deps.over(stores, clock=clock, ids=SortableIds(), embedder=minilm, llm=None)
        finally:
            stores.close()
        return
    endpoint = (
        engines.moto_endpoint(request.config)
        if request.param == "moto"
        else engines.dynamodb_local_endpoint(request.config)
    )
    with engines.aws_deps(request.config, endpoint, embedder=minilm, clock=clock, write_through=True) as deps:
        yield deps


def call(deps: Deps, tool: str, **args: Any) -> dict[str, Any]:
    result = dispatch(tool, args, CALLER, deps)
    assert not result.is_error, result.body
    return result.body


def remember(deps: Deps, fact: str, entity: str, **kw: Any) -> dict[str, Any]:
    return call(deps, "remember", fact=fact, provenance="integrity test", entity=entity, **kw)


# --- item 5: supersession merges only facts that say the same thing -------------------------------------


def test_distinct_invoices_and_templated_stand_ups_stay_separate_facts(deps):
    first = remember(deps, "Invoice 2026-118 to Orchid Health was paid", "companies/orchid-health")
    second = remember(deps, "Invoice 2026-119 to Orchid Health was paid", "companies/orchid-health")
    assert second["status"] == "inserted" and second["id"] != first["id"]

    days = [f"2026-06-{d:02d}" for d in range(1, 13)]
    statuses = [
        remember(deps, f"Stand-up {day}: Priya finished the ledger migration, no blockers", "projects/payments")[
            "status"
        ]
        for day in days
    ]
    assert statuses == ["inserted"] * 12
    assert len(call(deps, "recall", entity="projects/payments")["facts"]) == 12
    assert len(call(deps, "recall", entity="companies/orchid-health")["facts"]) == 2


def test_a_genuine_update_and_a_restatement_still_merge(deps):
    old = remember(deps, "Alice's phone is 555-0100", "people/alice")
    new = remember(deps, "Alice's phone is now 555-0199", "people/alice")
    assert new["status"] == "superseded"
    again = remember(deps, "alice's phone is now 555-0199.", "people/alice")
    assert again["status"] in ("superseded", "duplicate")
    facts = call(deps, "recall", entity="people/alice")["facts"]
    assert [f["fact"] for f in facts] == [
        "alice's phone is now 555-0199." if again["status"] == "superseded" else "Alice's phone is now 555-0199"
    ]
    assert old["id"] not in {f["fact_id"] for f in facts}


def test_a_probable_update_is_noticed_never_merged_and_its_fix_replaces_the_old_value(deps):
    """A new value without an update marker: saved beside the old one with a `probable_update`
    notice (carried like every notice) whose fix, run as given, supersedes the old fact and leaves
    the new text active once."""
    entity = "projects/apollo"
    old = remember(deps, "The Apollo launch deadline is 2027-01-15", entity)
    args = {"fact": "The Apollo launch deadline is 2027-02-01", "provenance": "integrity test", "entity": entity}
    result = dispatch("remember", args, CALLER, deps)
    assert not result.is_error and result.body["status"] == "inserted"
    new = result.body
    [notice] = [n for n in result.notices if n.code == "probable_update"]
    assert old["id"] in notice.why and "2027-01-15" in notice.why
    assert notice.fix is not None
    assert notice.fix.mcp == {"tool": "remember", "arguments": {**args, "supersedes": old["id"]}}
    live = call(deps, "recall", entity=entity)["facts"]
    assert {f["fact_id"] for f in live} == {old["id"], new["id"]}  # nothing was superseded

    fixed = call(deps, notice.fix.mcp["tool"], **notice.fix.mcp["arguments"])
    assert fixed["status"] == "superseded"
    live = call(deps, "recall", entity=entity)["facts"]
    assert [(f["fact_id"], f["fact"]) for f in live] == [(fixed["id"], "The Apollo launch deadline is 2027-02-01")]
    items = {f["fact_id"]: f for f in call(deps, "recall", entity=entity, include_expired=True)["facts"]}
    assert items[old["id"]]["superseded_by"] == fixed["id"]
    assert items[new["id"]]["status"] == "forgotten"  # the first save of the same text, retired

    # distinct near-twins get no notice
    for text in ("The Borealis launch deadline is 2027-03-01", "The Apollo beta deadline is 2027-03-01"):
        result = dispatch("remember", {"fact": text, "provenance": "integrity test", "entity": entity}, CALLER, deps)
        assert result.body["status"] == "inserted"
        assert [n.code for n in result.notices if n.code == "probable_update"] == []


# --- item 7: include_expired tells live facts from dead ones --------------------------------------------


def test_include_expired_reports_status_superseded_by_and_expired_at(deps):
    entity = "people/bob"
    old = remember(deps, "Bob's phone is 555-0100", entity)
    new = remember(deps, "Bob's phone is now 555-0199", entity)
    assert new["status"] == "superseded"
    gone = remember(deps, "Bob collects vintage radios", entity)
    call(deps, "forget", id=gone["id"], reason="wrong")
    brief = remember(deps, "Bob is at the offsite this week", entity, ttl="1h")
    deps.clock.advance(minutes=61)  # type: ignore[attr-defined]

    body = call(deps, "recall", entity=entity, include_expired=True)
    RecallResult.model_validate(body)
    items = {f["fact_id"]: f for f in body["facts"]}
    assert items[old["id"]]["status"] == "superseded"
    assert items[old["id"]]["superseded_by"] == new["id"]
    assert items[old["id"]]["expired_at"] == "2026-06-11T09:30:00.000Z"
    assert items[new["id"]]["status"] == "active"
    assert not {"superseded_by", "expired_at"} & set(items[new["id"]])
    assert items[gone["id"]]["status"] == "forgotten"
    assert items[gone["id"]]["expired_at"] == "2026-06-11T09:30:00.000Z"
    assert items[brief["id"]]["status"] == "expired"
    assert items[brief["id"]]["expired_at"] == brief["valid_until"] == "2026-06-11T10:30:00.000Z"
    live = call(deps, "recall", entity=entity)["facts"]
    assert [f["fact_id"] for f in live] == [new["id"]] and "status" not in live[0]


# --- items 8, 9: context_pack text budget, flat cards, recall-shaped facts -----------------------------


def _seed_pack(deps: Deps) -> None:
    call(
        deps,
        "put_page",
        slug="people/carol",
        content="---\ntitle: Carol Example\ntype: person\naliases: [Caro]\nsummary: Carol runs the "
        "platform team and the on-call rota.\n---\nCarol.\n",
    )
    for i in range(8):
        remember(deps, f"Lunch order {i} for the offsite was {i + 3} sandwiches", f"projects/offsite-{i}")
        deps.clock.advance(seconds=1)  # type: ignore[attr-defined]
    remember(deps, "Carol prefers written status updates", "people/carol", kind="preference")
    deps.clock.advance(seconds=1)  # type: ignore[attr-defined]
    for i in range(10):
        remember(deps, f"Parking permit {i} was renewed for {2030 + i}", f"projects/parking-{i}")
        deps.clock.advance(seconds=1)  # type: ignore[attr-defined]


def test_context_pack_text_costs_at_most_its_budget(deps):
    _seed_pack(deps)  # once: context_pack only reads, so every budget packs the same memory
    for budget in (1, 10, 50, 200, 1_000_000):
        body = call(deps, "context_pack", entities="Caro", budget_tokens=budget)
        context_pack.ContextPackResult.model_validate(body)
        assert cost(body["text"]) <= budget, budget
        assert body["budget_used"] <= budget, budget
        if budget >= 200:
            assert body["text"].splitlines()[1].startswith("Retrieved data"), budget
            assert "people/carol" in body["text"], budget
        if budget == 1_000_000:
            assert body["dropped_count"] == 0
            assert all(f["fact"] in body["text"] for f in body["facts"])


def test_context_pack_cards_are_flat_and_hot_facts_are_the_entities_own(deps):
    _seed_pack(deps)
    body = call(deps, "context_pack", entities="Caro")
    card = body["cards"][0]
    assert {k: card[k] for k in ("slug", "title", "type", "backlink_count")} == {
        "slug": "people/carol",
        "title": "Carol Example",
        "type": "person",
        "backlink_count": 0,
    }
    assert isinstance(card["summary"], str) and isinstance(card["open_threads"], list)
    assert isinstance(card["edges"], list)
    facts = body["facts"]  # Carol's only: the newer parking and lunch facts are about other entities
    assert [(f["fact"], f["kind"]) for f in facts] == [("Carol prefers written status updates", "preference")]
    assert all("text" not in f and {"fact", "kind", "fact_id"} <= set(f) for f in facts)
    assert call(deps, "context_pack", entities="")["facts"] == []
