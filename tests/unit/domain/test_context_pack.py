"""context_pack: entity list echo and cap, cards, since-filtered threads, hot facts, budget arithmetic,
world-only visibility (include_private honoured only for trusted-local callers) and the deadline.

Runs the tool's `run` over the real local stores (in-memory SQLite) with a FixedClock.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from fleetmem.errors import VerbError
from fleetmem.memory.budget import cost
from fleetmem.memory.render import DATA_NOTICE, render_context_pack
from fleetmem.memory.verbs import context_pack, put_page
from fleetmem.models import Fact
from fleetmem.ports import CallContext


def put(deps, caller, slug, content="Body.", **kw):
    ctx = CallContext("t")
    return put_page.run(deps, caller, put_page.PutPageParams(slug=slug, content=content, **kw), ctx).body


def pack(deps, caller, ctx=None, **kw):
    return context_pack.run(deps, caller, context_pack.ContextPackParams(**kw), ctx or CallContext("t")).body


def add_fact(deps, text, *, visibility="world", entity_slug=None, kind="fact", session_id=None, age=timedelta(0)):
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
        session_id=session_id,
        created_at=deps.clock.now() - age,
    )
    deps.facts.put(fact)
    return fact


def card_slugs(body):
    return [c["slug"] for c in body["cards"]]


def test_entities_are_trimmed_empties_dropped_capped_at_eight_and_echoed(deps, remote_caller):
    names = ", ".join(f"e{i}" for i in range(10))
    body = pack(deps, remote_caller, entities=f" ,{names},, ")
    assert body["entities"] == [f"e{i}" for i in range(8)]


def test_unknown_entities_give_an_empty_successful_pack(deps, remote_caller):
    body = pack(deps, remote_caller, entities="nobody, nothing")
    assert body["cards"] == [] and body["open_threads"] == [] and body["facts"] == []
    assert body["protocol_version"] == 1
    assert body["text"].splitlines()[1] == DATA_NOTICE


def test_cards_for_resolved_entities_only_in_request_order(deps, remote_caller):
    put(deps, remote_caller, "companies/acme-example", "Acme builds rockets.")
    put(deps, remote_caller, "people/alice-example", "---\naliases: [Alice]\n---\nAlice leads.")
    body = pack(deps, remote_caller, entities="alice, ghost, acme-example, Alice")
    assert card_slugs(body) == ["people/alice-example", "companies/acme-example"]
    card = body["cards"][0]
    assert set(card) == {
        "slug",
        "title",
        "type",
        "entity",
        "aka",
        "summary",
        "last_touched",
        "open_threads",
        "edges",
        "backlink_count",
        "active_fact_count",
        "page",
    }
    assert card["page"] is True
    assert "Alice leads." in body["text"] and "Acme builds rockets." in body["text"]
    assert body["text"].splitlines()[1] == DATA_NOTICE


def test_since_filters_open_threads_only(deps, remote_caller):
    put(
        deps,
        remote_caller,
        "people/carol",
        "Carol.",
        timeline=[{"date": "2026-06-01", "text": "Early"}, {"date": "2026-06-10", "text": "Late"}],
    )
    all_threads = pack(deps, remote_caller, entities="people/carol")["open_threads"]
    assert [t["text"] for t in all_threads] == ["Late", "Early"]
    body = pack(deps, remote_caller, entities="people/carol", since="2026-06-05")
    assert [(t["slug"], t["text"]) for t in body["open_threads"]] == [("people/carol", "Late")]
    assert card_slugs(body) == ["people/carol"]


def test_an_unparseable_since_is_invalid_params(deps, remote_caller):
    with pytest.raises(VerbError) as err:
        pack(deps, remote_caller, entities="x", since="last week")
    assert err.value.code == "invalid_params"
    assert err.value.fix.mcp is None and "ISO 8601" in err.value.fix.why  # no made-up time


@pytest.mark.parametrize("budget", [0, -3, 2.5])
def test_a_budget_that_is_not_a_positive_integer_is_invalid_params(deps, remote_caller, budget):
    with pytest.raises(VerbError) as err:
        pack(deps, remote_caller, entities="x", budget_tokens=budget)
    assert err.value.code == "invalid_params"


def test_hot_facts_are_the_entities_last_24_hours_newest_first_at_most_ten(deps, remote_caller):
    put(deps, remote_caller, "people/ann", "Ann.")
    add_fact(deps, "too old", entity_slug="people/ann", age=timedelta(hours=25))
    for i in range(12):
        add_fact(deps, f"recent {i}", entity_slug="people/ann", age=timedelta(minutes=60 - i))
    add_fact(deps, "recent but about nobody asked", age=timedelta(minutes=1))
    facts = pack(deps, remote_caller, entities="people/ann")["facts"]
    assert [f["fact"] for f in facts] == [f"recent {i}" for i in range(11, 1, -1)]
    assert {"fact_id", "id", "fact", "kind", "created_at"} <= set(facts[0]) and "text" not in facts[0]
    assert pack(deps, remote_caller, entities="")["facts"] == []  # no entity: no facts


def test_hot_facts_come_from_the_session_when_one_is_given(deps, remote_caller):
    put(deps, remote_caller, "people/ann", "Ann.")
    add_fact(deps, "other session", entity_slug="people/ann", session_id="s2")
    add_fact(deps, "old but in session", entity_slug="people/ann", session_id="s1", age=timedelta(days=3))
    add_fact(deps, "in session", entity_slug="people/ann", session_id="s1")
    add_fact(deps, "in session, about nobody asked", session_id="s1")
    facts = pack(deps, remote_caller, entities="people/ann", session_id="s1")["facts"]
    assert [f["fact"] for f in facts] == ["in session", "old but in session"]


def test_budget_packs_cards_first_then_facts_as_the_prefix_its_text_shows(deps, remote_caller):
    """The budget is spent on the text: the pack lists exactly the prefix its text shows, and
    budget_used is the text's cost."""
    put(deps, remote_caller, "people/ann", "---\ntitle: Ann\n---\nAnn writes code.")
    put(deps, remote_caller, "people/ben", "---\ntitle: Ben\n---\nBen writes tests.")
    add_fact(deps, "a hot fact", entity_slug="people/ben")
    asked = "people/ann,people/ben"
    full = pack(deps, remote_caller, entities=asked)
    entities, (ann, _ben), [fact] = full["entities"], full["cards"], full["facts"]

    exact = pack(deps, remote_caller, entities=asked, budget_tokens=cost(full["text"]))
    assert card_slugs(exact) == ["people/ann", "people/ben"] and exact["facts"] == [fact]
    assert (exact["text"], exact["budget_used"], exact["dropped_count"]) == (full["text"], cost(full["text"]), 0)

    one_card = render_context_pack(entities, [ann], [], left_out=2)
    tight = pack(deps, remote_caller, entities=asked, budget_tokens=cost(one_card))
    assert card_slugs(tight) == ["people/ann"] and tight["facts"] == [] and tight["text"] == one_card
    assert (tight["budget_tokens"], tight["budget_used"], tight["dropped_count"]) == (cost(one_card), cost(one_card), 2)
    assert "Ben" not in tight["text"] and "a hot fact" not in tight["text"]

    # the item costs alone (title + summary, the fact's text) would all fit: the text would not
    items = cost("Ann") + cost("Ann writes code.") + cost("Ben") + cost("Ben writes tests.") + cost("a hot fact")
    small = pack(deps, remote_caller, entities=asked, budget_tokens=max(items, cost(one_card)))
    assert len(small["cards"]) + len(small["facts"]) < 3 and small["budget_used"] == cost(small["text"])


def test_without_a_budget_there_are_no_budget_fields(deps, remote_caller):
    assert not {"budget_tokens", "budget_used", "dropped_count"} & set(pack(deps, remote_caller, entities=""))


def test_open_threads_are_the_packed_cards_threads_flattened(deps, remote_caller):
    put(deps, remote_caller, "people/ann", "Ann.", timeline=[{"date": "2026-06-10", "text": "Ann shipped"}])
    put(deps, remote_caller, "people/ben", "Ben.", timeline=[{"date": "2026-06-09", "text": "Ben shipped"}])
    both = pack(deps, remote_caller, entities="people/ann,people/ben")
    assert [(t["slug"], t["text"]) for t in both["open_threads"]] == [
        ("people/ann", "Ann shipped"),
        ("people/ben", "Ben shipped"),
    ]
    ann_only = render_context_pack(both["entities"], both["cards"][:1], [], left_out=1)
    one = pack(deps, remote_caller, entities="people/ann,people/ben", budget_tokens=cost(ann_only))
    assert [t["slug"] for t in one["open_threads"]] == ["people/ann"]


def test_remote_callers_stay_world_only_even_with_include_private(deps, remote_caller, local_caller):
    put(deps, local_caller, "people/secret", "---\nvisibility: private\n---\nSecret person.")
    put(deps, local_caller, "people/open", "Open.<!-- private --> Hidden note.<!-- /private -->")
    add_fact(deps, "private hot fact", visibility="private", entity_slug="people/open")
    add_fact(deps, "world hot fact", entity_slug="people/open")
    remote = pack(deps, remote_caller, entities="people/secret,people/open", include_private=True)
    assert card_slugs(remote) == ["people/open"]
    assert [f["fact"] for f in remote["facts"]] == ["world hot fact"]
    assert "Hidden note" not in remote["text"] and "private hot fact" not in remote["text"]

    local_default = pack(deps, local_caller, entities="people/secret,people/open")
    assert card_slugs(local_default) == ["people/open"]
    assert [f["fact"] for f in local_default["facts"]] == ["world hot fact"]

    local_wide = pack(deps, local_caller, entities="people/secret,people/open", include_private=True)
    assert card_slugs(local_wide) == ["people/secret", "people/open"]
    assert [f["fact"] for f in local_wide["facts"]] == ["world hot fact", "private hot fact"]


def test_a_passed_deadline_returns_a_partial_pack_with_a_degraded_reason(deps, remote_caller):
    put(deps, remote_caller, "people/ann", "Ann.")
    add_fact(deps, "a hot fact")
    expired = CallContext("t", deadline_at=time.monotonic() - 1)
    body = pack(deps, remote_caller, ctx=expired, entities="people/ann")
    assert body["degraded_reason"]
    assert body["cards"] == [] and body["facts"] == []
    assert "degraded_reason" not in pack(deps, remote_caller, entities="people/ann")


def test_context_pack_is_a_read_only_verb_whose_entities_is_a_string_or_an_array():
    spec = context_pack.SPEC
    assert (spec.surface, spec.scope, spec.writes) == ("verbs", "read", False)
    assert spec.annotations.get("readOnlyHint") is True
    assert spec.description.startswith("MEMORY VERB (v1):")
    schema = spec.input_schema()
    # D32: optional, a string or an array of strings
    assert schema["properties"]["entities"]["anyOf"] == [
        {"type": "string"},
        {"type": "array", "items": {"type": "string"}},
    ]
    assert "entities" not in schema.get("required", [])


# --- the text honours the budget; flat cards; fact items like recall's (issue 8, items 8, 9) ------------


def _busy_brain(deps, caller):
    put(
        deps,
        caller,
        "people/ann",
        "---\ntitle: Ann Example\ntype: person\naliases: [Annie]\nsummary: Ann leads the payments team and "
        "owns the ledger migration.\n---\nAnn.",
        timeline=[{"date": "2026-06-10", "text": "Ann shipped the refund flow to every region"}],
    )
    put(deps, caller, "people/ben", "---\ntitle: Ben\n---\nBen writes tests for the ledger service.")
    for i in range(6):
        add_fact(
            deps, f"Ben hot fact number {i} about the office plants", entity_slug="people/ben", age=timedelta(minutes=i)
        )
    add_fact(deps, "Unrelated hot fact about the parking lot", age=timedelta(minutes=2))
    add_fact(deps, "Ann prefers written updates", entity_slug="people/ann", age=timedelta(minutes=30))


@pytest.mark.parametrize("budget", [1, 10, 50, 120, 200, 400])
def test_the_text_costs_at_most_the_budget_frame_included(deps, remote_caller, budget):
    _busy_brain(deps, remote_caller)
    body = pack(deps, remote_caller, entities="people/ann, people/ben", budget_tokens=budget)
    assert cost(body["text"]) <= budget
    assert body["budget_used"] <= budget
    if body["text"]:
        assert body["text"].splitlines()[1] == DATA_NOTICE
        assert body["text"].endswith("</fleetmem-context>")
    shown_cards = [c for c in body["cards"] if f"({c['slug']}" in body["text"]]
    assert shown_cards == body["cards"][: len(shown_cards)]  # the text shows a prefix of the packed cards


def test_a_budget_too_small_for_the_frame_gives_an_empty_text(deps, remote_caller):
    _busy_brain(deps, remote_caller)
    assert pack(deps, remote_caller, entities="people/ann", budget_tokens=1)["text"] == ""
    assert pack(deps, remote_caller, entities="people/ann", budget_tokens=10)["text"] == ""


def test_a_huge_budget_shows_everything_packed(deps, remote_caller):
    _busy_brain(deps, remote_caller)
    body = pack(deps, remote_caller, entities="people/ann, people/ben", budget_tokens=1_000_000)
    unbudgeted = pack(deps, remote_caller, entities="people/ann, people/ben")
    assert body["text"] == unbudgeted["text"]
    assert body["dropped_count"] == 0 and len(body["facts"]) == 7 and len(body["cards"]) == 2
    assert all(f["fact"] in body["text"] for f in body["facts"])
    assert "over the budget" not in body["text"]


@pytest.mark.parametrize("short", [1, 30, 120])
def test_a_text_that_leaves_items_out_lists_only_what_it_shows_and_says_how_many(deps, remote_caller, short):
    _busy_brain(deps, remote_caller)
    full = pack(deps, remote_caller, entities="people/ann, people/ben")
    budget = cost(full["text"]) - short
    body = pack(deps, remote_caller, entities="people/ann, people/ben", budget_tokens=budget)
    assert cost(body["text"]) <= budget
    assert all(f"({c['slug']}" in body["text"] for c in body["cards"])
    assert all(f["fact"] in body["text"] for f in body["facts"])  # every listed fact is shown
    left_out = len(full["cards"]) + len(full["facts"]) - len(body["cards"]) - len(body["facts"])
    assert left_out >= 1 and body["dropped_count"] == left_out
    assert f"({left_out} more over the budget)" in body["text"]
    assert body["cards"] + body["facts"] == (full["cards"] + full["facts"])[: len(body["cards"]) + len(body["facts"])]


def test_hot_facts_are_only_the_requested_entities(deps, remote_caller):
    _busy_brain(deps, remote_caller)
    for i in range(10):
        add_fact(deps, f"Newer unrelated fact {i}", age=timedelta(seconds=i))
    facts = pack(deps, remote_caller, entities="Annie")["facts"]
    assert [(f["fact"], f["entity_slug"]) for f in facts] == [("Ann prefers written updates", "people/ann")]
    ben = pack(deps, remote_caller, entities="people/ben")["facts"]
    assert [f["fact"] for f in ben] == [f"Ben hot fact number {i} about the office plants" for i in range(6)]


def test_cards_are_the_references_flat_cards_and_facts_have_recalls_shape(deps, remote_caller):
    from fleetmem.memory.verbs.recall import fact_item

    _busy_brain(deps, remote_caller)
    body = pack(deps, remote_caller, entities="people/ann")
    card = body["cards"][0]
    assert (card["slug"], card["title"], card["type"]) == ("people/ann", "Ann Example", "person")
    assert card["entity"] == {"slug": "people/ann", "title": "Ann Example", "type": "person"}
    for key in ("summary", "open_threads", "edges", "backlink_count"):
        assert key in card
    ann_fact = next(f for f in body["facts"] if f["entity_slug"] == "people/ann")
    assert ann_fact == fact_item(deps.facts.get("t1", ann_fact["fact_id"]))
    context_pack.ContextPackResult.model_validate(body)
