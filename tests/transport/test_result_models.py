"""The contract, defined once: every one of the tools answers, through THE dispatch, bodies that
validate against its result model — on a seeded store, for the remote and the trusted-local lane,
across each tool's response variants (hits and misses, budgets, replays, first and later wakes).
The autouse fixture in conftest.py checks every success; this test makes sure every tool and
variant is exercised, and that a shape change fails."""

from __future__ import annotations

import json

import pytest

from fleetmem.errors import Unavailable
from fleetmem.memory.registry import REGISTRY
from fleetmem.models import Caller, Completion
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch
from tests.result_contract import check_body, mismatch

ALICE = """---
title: Alice Example
type: person
aliases: [Ali, A. Example]
summary: Runs platform engineering at Acme.
links:
  - {type: works_at, target: companies/acme-example, context: since 2024}
timeline:
  - {date: "2026-06-01", text: "Promised the Q3 roadmap"}
---
# Alice Example

Alice leads platform engineering. She works with [[companies/acme-example]].
"""

ACME = """---
title: Acme Example
type: company
---
Acme builds rockets.
"""


class ScriptedLLM:
    """A stand-in for the LLM port (Bedrock is the one dependency tests may mock)."""

    model_id = "scripted-llm"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def complete(self, system: str, prompt: str, *, max_tokens: int = 800) -> Completion:
        if self.fail:
            raise Unavailable("scripted outage")
        return Completion(
            text=json.dumps({"answer": "Alice prefers tea.", "gaps": ["her coffee view"]}),
            model="scripted-llm",
            input_tokens=100,
            output_tokens=20,
            usd_estimate=0.0003,
        )


def _caller(remote: bool) -> Caller:
    return Caller(
        tenant="t1",
        client_id="agent-a" if remote else "local",
        scopes=frozenset({"read", "write", "admin"}),
        remote=remote,
    )


def ok(tool: str, args: dict, caller: Caller, deps: Deps) -> dict:
    r = dispatch(tool, args, caller, deps, surface="full")
    assert not r.is_error, r.body
    check_body(tool, r.body)
    return r.body


@pytest.mark.parametrize("remote", [True, False], ids=["remote", "local"])
def test_every_tool_answers_bodies_that_match_its_result_model(deps: Deps, clock, remote: bool) -> None:
    who = _caller(remote)
    seen: set[str] = set()

    def call(tool: str, **args: object) -> dict:
        seen.add(tool)
        return ok(tool, dict(args), who, deps)

    # writes (and a D2 replay)
    assert call("put_page", slug="people/alice-example", content=ALICE)["status"] == "created"
    call("put_page", slug="companies/acme-example", content=ACME, idempotency_key="k-acme")
    assert (
        call("put_page", slug="companies/acme-example", content=ACME, idempotency_key="k-acme")["idempotent_replay"]
        is True
    )
    assert call("put_page", slug="companies/acme-example", content=ACME)["status"] == "unchanged"
    first = call(
        "remember",
        fact="Alice prefers tea",
        provenance="chat 2026-06-11",
        entity="people/alice-example",
        kind="preference",
        ttl="30d",
    )
    call("remember", fact="Alice prefers tea", provenance="chat 2026-06-11", entity="people/alice-example")
    call("remember", fact="Alice will send the roadmap", provenance="standup", entity="Ali", kind="commitment")
    call("remember", fact="Private note about Acme", provenance="p", visibility="private", session_id="s1")
    call("remember", fact="Replayed once", provenance="p", idempotency_key="k-1")
    assert call("remember", fact="Replayed once", provenance="p", idempotency_key="k-1")["idempotent_replay"]

    # reads, in their variants
    call("recall")
    call("recall", query="tea", budget_tokens=40, limit=5)
    call("recall", entity="Alice Example", include_expired=True, include_private=True)
    call("recall", session_id="s1", since="2020-01-01")
    call("entity", name="Ali")
    call("entity", name="nobody-at-all")
    call("context_pack", entities="people/alice-example, companies/acme-example", budget_tokens=60)
    call("context_pack", entities="unknown-one", session_id="s1", since="2020-01-01")
    call("delta", session_id="hb")  # first wake: establishes the cursor
    clock.advance(seconds=5)
    call("put_page", slug="projects/rocket", content="# Rocket\n\nA project.")
    call("remember", fact="Rocket launch moved", provenance="p", entity="projects/rocket")
    clock.advance(seconds=5)
    call("delta", session_id="hb", entities="projects/rocket", budget_tokens=500)
    drained = call("delta", since="1970-01-01", budget_tokens=3)
    call("delta", since=drained["next_cursor"]["since"], since_slug=drained["next_cursor"]["slug"])
    call("get_page", slug="people/alice-example")
    call("list_pages", limit=1)
    call("list_pages", type="person")
    call("list_pages", with_counts=True)
    call("trace_fact", id=first["id"])
    call("whoami")
    call("list_facts", state="any", limit=2)
    call("list_facts", fact_id=first["id"])
    packed = call("export_pack", entity="people/alice-example")
    call("import_pack", pack=packed["pack"], dry_run=True)
    call("list_activity", limit=2)
    call("list_activity", action="write", entity="people/alice-example")
    call("memory_stats")

    deps.llm = ScriptedLLM()
    call("synthesize", question="What does Alice prefer?")
    call("synthesize", question="zzz qqq unrelated")
    deps.llm = ScriptedLLM(fail=True)
    call("synthesize", question="What does Alice lead?")

    # and the destructive end
    assert call("forget", id=first["id"], reason="corrected")["expired"] is True
    assert call("forget", id=first["id"])["expired"] is False
    call("purge_fact", id=first["id"], reason="deletion request")
    call("delete_page", slug="projects/rocket")

    # the account tools
    call("whoami")
    call("list_followers")  # the "hb" session, with what it has not received
    minted = call("create_token", client="agent-b", scopes=["read"])
    call("list_tokens")
    call("revoke_token", token_id=minted["token_id"])

    # the write receipts (D22)
    call("get_write_request", request_id="k-1")
    listed = call("list_write_requests", limit=2, state="committed")
    call("list_write_requests", cursor=listed["next_cursor"])
    assert call("cancel_write_request", request_id="k-acme")["cancelled"] is False

    assert seen == set(REGISTRY) - {n for n in REGISTRY if n.startswith("zz_")}


def test_a_body_that_strays_from_its_model_is_reported(deps: Deps) -> None:
    body = ok("put_page", {"slug": "people/bob", "content": "# Bob"}, _caller(True), deps)
    assert mismatch("put_page", body) is None
    assert mismatch("put_page", {**body, "surprise": 1}) is not None  # an undeclared field
    assert mismatch("put_page", {**body, "status": "maybe"}) is not None  # a value outside the contract
    assert mismatch("put_page", {k: v for k, v in body.items() if k != "slug"}) is not None  # a lost field


def test_upcoming_optional_fields_are_part_of_the_contract() -> None:
    """Fields being added alongside (fact status in recall, `fact` in pack/delta items, flat cards,
    truncated delta items, extra cursor keys) validate; anything else does not."""
    fact = {
        "id": 1,
        "fact_id": "f_1",
        "kind": "fact",
        "entity_slug": None,
        "provenance": "p",
        "visibility": "world",
        "created_at": "2026-06-11T00:00:00.000Z",
        "valid_until": None,
        "session_id": None,
    }
    recall = {
        "protocol_version": 1,
        "total": 1,
        "results": [],
        "facts": [
            {
                **fact,
                "fact": "x",
                "status": "superseded",
                "superseded_by": "f_2",
                "expired_at": "2026-06-12T00:00:00.000Z",
            }
        ],
    }
    assert mismatch("recall", recall) is None
    assert mismatch("recall", {**recall, "facts": [{**recall["facts"][0], "status": "gone"}]}) is not None
    delta = {
        "protocol_version": 1,
        "since": "2026-06-11T00:00:00.000Z",
        "threads": [],
        "text": "t",
        "has_more": True,
        "pages": [
            {"slug": "a", "title": "A", "type": None, "updated_at": "2026-06-11T00:00:00.000Z", "truncated": True}
        ],
        "facts": [{**fact, "fact": "x", "truncated": True}],
        "next_cursor": {"since": "2026-06-11T00:00:00.000Z", "slug": "a", "page_seq": 3, "fact_seq": 7},
    }
    assert mismatch("delta", delta) is None
    assert mismatch("delta", {**delta, "facts": [{**fact}]}) is not None  # a fact item without its text
    card = {
        "entity": {"slug": "people/a", "title": "A", "type": None},
        "slug": "people/a",
        "title": "A",
        "type": None,
        "aka": [],
        "summary": "",
        "open_threads": [],
        "edges": [],
        "backlink_count": 0,
        "active_fact_count": 0,
        "last_touched": {"updated_at": None, "last_retrieved_at": None, "last_timeline_date": None},
    }
    pack = {
        "protocol_version": 1,
        "entities": ["a"],
        "cards": [card],
        "open_threads": [],
        "facts": [{**fact, "fact": "x"}],
        "text": "t",
    }
    assert mismatch("context_pack", pack) is None
    assert mismatch("context_pack", {**pack, "cards": [{k: v for k, v in card.items() if k != "slug"}]})
