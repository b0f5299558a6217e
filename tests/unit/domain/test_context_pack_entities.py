"""context_pack is about the asked entities, on SQLite and the AWS set (DynamoDB Local + the
OpenSearch node): its hot facts are those entities' facts (no entity: none), an entity that has
facts but no page gets the card `entity` gives it, and such an entity is offered as a near-miss.

On the AWS set the stream indexer (not the request path) indexes facts; the near-miss test indexes
the facts it wrote the way the indexer does (`indexing.doc_for_fact`) and refreshes the index.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.unit.domain.delta_backends import BACKENDS, open_deps

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.memory.cards import flat_card
from fleetmem.memory.indexing import doc_for_fact
from fleetmem.memory.verbs import context_pack, entity, put_page, remember
from fleetmem.models import Caller
from fleetmem.ports import CallContext
from fleetmem.timefmt import to_ms

CTX = CallContext("t")


@pytest.fixture
def clock() -> FixedClock:
    """Fixed, but at the real time: DynamoDB Local expires cursors by their TTL on the wall clock."""
    return FixedClock(to_ms(datetime.now(UTC)))


@pytest.fixture(params=BACKENDS)
def bdeps(request: pytest.FixtureRequest, clock: Any) -> Any:
    with open_deps(request.param, request, clock) as d:
        d.backend_name = request.param
        yield d


@pytest.fixture
def caller() -> Caller:
    return Caller(
        tenant="t-" + uuid.uuid4().hex[:12], client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True
    )


def note(deps: Any, caller: Caller, fact: str, entity_name: str | None = None, **kw: Any) -> dict:
    deps.clock.advance(seconds=1)
    return remember.run(
        deps, caller, remember.RememberParams(fact=fact, provenance="test", entity=entity_name, **kw), CTX
    ).body


def pack(deps: Any, caller: Caller, **kw: Any) -> dict:
    return context_pack.run(deps, caller, context_pack.ContextPackParams(**kw), CTX).body


def page(deps: Any, caller: Caller, slug: str, title: str) -> None:
    put_page.run(deps, caller, put_page.PutPageParams(slug=slug, title=title, content=f"{title} works here."), CTX)


def test_hot_facts_are_the_asked_entities_and_none_without_entities(bdeps: Any, caller: Caller) -> None:
    page(bdeps, caller, "people/ann-example", "Ann Example")
    page(bdeps, caller, "people/ben-example", "Ben Example")
    note(bdeps, caller, "Ann prefers written updates", "people/ann-example")
    note(bdeps, caller, "Ben is on call next week", "people/ben-example")
    note(bdeps, caller, "The office plants need watering on Fridays")
    bdeps.clock.advance(hours=2)

    ann = pack(bdeps, caller, entities="people/ann-example")
    assert [f["fact"] for f in ann["facts"]] == ["Ann prefers written updates"]
    assert "office plants" not in ann["text"] and "Ben is on call" not in ann["text"]
    both = pack(bdeps, caller, entities="Ann Example, people/ben-example")
    assert [f["fact"] for f in both["facts"]] == ["Ben is on call next week", "Ann prefers written updates"]
    nobody = pack(bdeps, caller, entities="")
    assert nobody["facts"] == [] and nobody["cards"] == []
    assert "office plants" not in nobody["text"]


def test_a_fact_only_entity_gets_the_card_entity_gives(bdeps: Any, caller: Caller) -> None:
    note(bdeps, caller, "Zora Quill signed the supplier contract", "people/zora-quill")
    note(bdeps, caller, "Zora Quill will send the countersigned copy", "people/zora-quill", kind="commitment")
    found = entity.run(bdeps, caller, entity.EntityParams(name="people/zora-quill"), CTX).body
    assert found["found"] and found["card"]["page"] is False

    body = pack(bdeps, caller, entities="people/zora-quill")
    # the entity verb's reference fields (D35) are the entity verb's own: packs leave them out
    verb_only = {"referenced_by_count", "referenced_by", "recent_facts", "coverage"}
    assert body["cards"] == [flat_card({k: v for k, v in found["card"].items() if k not in verb_only})]
    assert body["cards"][0]["title"] == "zora quill" and body["cards"][0]["type"] == "person"
    assert "(people/zora-quill, person)" in body["text"]
    assert [f["fact"] for f in body["facts"]] == [
        "Zora Quill will send the countersigned copy",
        "Zora Quill signed the supplier contract",
    ]


def test_a_fact_only_entity_is_offered_as_a_near_miss(bdeps: Any, caller: Caller) -> None:
    stored = [note(bdeps, caller, "Zora Quill signed the supplier contract", "people/zora-quill")]
    page(bdeps, caller, "companies/acme-example", "Acme Example")
    if bdeps.backend_name != "sqlite":  # the stream indexer's work on AWS
        bdeps.search.upsert([doc_for_fact(bdeps.facts.get(caller.tenant, s["id"])) for s in stored])
        bdeps.search.client.indices.refresh(index=bdeps.search.index)

    miss = entity.run(bdeps, caller, entity.EntityParams(name="Zora"), CTX).body
    assert miss["found"] is False
    assert {"slug": "people/zora-quill", "title": "zora quill", "type": "person", "create_safety": "probable"} in miss[
        "suggestions"
    ]
    # a forgotten fact-only entity (no active fact left) is not offered
    bdeps.facts.expire(caller.tenant, stored[0]["id"], at=bdeps.clock.now(), reason="test", actor="test")
    again = entity.run(bdeps, caller, entity.EntityParams(name="Zora"), CTX).body
    assert all(s["slug"] != "people/zora-quill" for s in again["suggestions"])
