"""`remember{items}` (D26) through the one `dispatch`, on the local SQLite stores and on the AWS
stores (DynamoDB Local for the tables, the run's OpenSearch node for the index), all on 127.0.0.1.
Nothing is mocked: the embedder is the deterministic HashEmbedder behind a wrapper that only counts
its calls; one test wraps the real fact-decision store so that one write fails once (a store
outage), to show a batch cut short completes on retry.

- every item is checked before any is written: one bad item (index 7 of 10) refuses the call,
  naming `items[7]`, and nothing is saved (the embedder not even called);
- 20 items are 20 facts, embedded in one embedder call;
- the same idempotency_key replays every item exactly (same ids, no new fact);
- an item that fails while others are saved answers `partial`, with the resend advice;
- a batch whose write failed part-way completes when sent again: saved items replay, the failed
  one is written;
- the child ids are the reference's derivation (vectors computed with its Node.js formula);
- the single remember answer and its refusals are unchanged, while the inputSchema advertises
  `items` and no longer requires `fact`/`provenance`;
- remember's result model (and its JSON schema) holds the single answer or the batch answer;
- a dry run checks every item and writes nothing;
- a top-level `entity` beside `items` is refused, its fix moving it onto every item without one;
- with the embedder down (a wrapper whose every call raises `Unavailable`, the outage a network
  embedder has) the batch costs one embedder call and says dedup ran on exact text only.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.contract.tools import result_schema, tool_schema
from fleetmem.errors import Unavailable
from fleetmem.memory.verbs import REGISTRY
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.protocol import request_uuid
from fleetmem.transport.batch import child_request_id
from fleetmem.transport.dispatch import dispatch

NOW = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)


class CountingEmbedder:
    """The real HashEmbedder; only counts the calls made to it."""

    def __init__(self) -> None:
        self.inner = HashEmbedder(dim=64)
        self.model_id, self.dim = self.inner.model_id, self.inner.dim
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def brain_embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def agent() -> Caller:
    """A remote agent of a fresh tenant (the module's stores are shared by its tests)."""
    return Caller(
        tenant="t-" + uuid.uuid4().hex[:10], client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True
    )


def remember(deps: Deps, caller: Caller, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    result = dispatch("remember", arguments, caller, deps, transport="mcp")
    return bool(result.is_error), dict(result.body)


def session_facts(deps: Deps, caller: Caller, session: str) -> list[dict[str, Any]]:
    result = dispatch("recall", {"session_id": session, "limit": 100}, caller, deps)
    assert not result.is_error, result.body
    return list(result.body["facts"])


def calls(deps: Deps) -> int:
    return deps.embedder.calls  # type: ignore[union-attr]


def test_one_bad_item_refuses_the_whole_batch_before_anything_is_written(brain: Deps, agent: Caller) -> None:
    items: list[Any] = [f"Batch fact number {i} about the launch" for i in range(10)]
    items[7] = {"fact": "A fact with an ISO ttl", "ttl": "P30D"}
    before = calls(brain)
    is_error, body = remember(brain, agent, {"items": items, "provenance": "standup", "session_id": "s-bad"})
    assert is_error and body["code"] == "invalid_params"
    assert body["message"].startswith("items[7]: ")
    assert body["detail"]["index"] == 7
    # the fix is the same batch with that item corrected, every other item kept
    fixed = body["fix"]["mcp"]["arguments"]["items"]
    assert (
        fixed[:7] == items[:7]
        and fixed[8:] == items[8:]
        and fixed[7] == {"fact": "A fact with an ISO ttl", "ttl": "30d"}
    )
    assert session_facts(brain, agent, "s-bad") == []
    assert calls(brain) == before  # refused before the embedder ran


def test_twenty_items_are_twenty_facts_from_one_embedder_call(brain: Deps, agent: Caller) -> None:
    items = [f"Release note {i}: module {i} shipped with version {i}.{i}" for i in range(20)]
    before = calls(brain)
    is_error, body = remember(brain, agent, {"items": items, "provenance": "changelog", "session_id": "s-20"})
    assert not is_error, body
    assert calls(brain) - before == 1
    assert (body["saved"], body["failed"], body["partial"]) == (20, 0, False)
    assert [i["index"] for i in body["items"]] == list(range(20))
    assert {i["status"] for i in body["items"]} == {"inserted"}
    saved = session_facts(brain, agent, "s-20")
    assert sorted(f["fact_id"] for f in saved) == sorted(i["id"] for i in body["items"])
    assert {f["provenance"] for f in saved} == {"changelog"}  # the top-level default reached every item


def test_the_same_key_replays_every_item_exactly(brain: Deps, agent: Caller) -> None:
    args = {
        "items": ["Dana owns the billing service", {"fact": "Dana moved to Lisbon", "entity": "people/dana"}],
        "provenance": "1:1 notes",
        "session_id": "s-replay",
        "idempotency_key": "batch-replay-1",
    }
    is_error, first = remember(brain, agent, args)
    assert not is_error, first
    is_error, again = remember(brain, agent, args)
    assert not is_error, again
    assert again == first  # every item replayed: same ids, same child request ids
    assert (first["request_id"], first["client_request_id"]) == request_uuid("batch-replay-1")
    assert [i["request_id"] for i in first["items"]] == [child_request_id("batch-replay-1", i) for i in (0, 1)]
    assert len(session_facts(brain, agent, "s-replay")) == 2


def test_a_failed_item_makes_the_answer_partial(brain: Deps, agent: Caller) -> None:
    args = {
        "items": ["Erin leads the design review", {"fact": "Erin's budget is 40k", "supersedes": "f_nosuchfact"}],
        "provenance": "planning doc",
        "session_id": "s-partial",
    }
    is_error, body = remember(brain, agent, args)
    assert not is_error, body
    assert (body["saved"], body["failed"], body["partial"]) == (1, 1, True)
    failed = body["items"][1]
    assert failed["status"] == "failed" and failed["error"]["code"] == "not_found"
    assert "send only the failed items" in body["next"]
    assert [f["fact_id"] for f in session_facts(brain, agent, "s-partial")] == [body["items"][0]["id"]]


class FailingOnce:
    """The real fact-decision store; the first write of one text meets a store outage."""

    def __init__(self, inner: Any, text: str) -> None:
        self.inner, self.text, self.failed = inner, text, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put_decided(self, tenant: str, entity_slug: str | None, decide: Any, **kw: Any) -> Any:
        if decide.draft.text == self.text and not self.failed:
            self.failed = True
            raise Unavailable("the table is throttled", retry_after_seconds=1, reason="throttled")
        return self.inner.put_decided(tenant, entity_slug, decide, **kw)


def test_a_batch_cut_short_completes_when_sent_again(brain: Deps, agent: Caller) -> None:
    texts = ["Gus runs the Monday sync", "Gus prefers written updates", "Gus is on call this week"]
    args = {"items": texts, "provenance": "team wiki", "session_id": "s-retry", "idempotency_key": "batch-retry-1"}
    flaky = dataclasses.replace(brain, fact_decisions=FailingOnce(brain.fact_decisions, texts[1]))
    is_error, first = remember(flaky, agent, args)
    assert not is_error, first
    assert [i["status"] for i in first["items"]] == ["inserted", "failed", "inserted"]
    assert first["items"][1]["error"]["code"] == "unavailable"
    is_error, again = remember(flaky, agent, args)
    assert not is_error, again
    assert (again["saved"], again["failed"], again["partial"]) == (3, 0, False)
    assert again["items"][0]["id"] == first["items"][0]["id"] and again["items"][2]["id"] == first["items"][2]["id"]
    assert len(session_facts(brain, agent, "s-retry")) == 3


def test_child_ids_follow_the_reference_derivation() -> None:
    # computed with the reference's `childRequestId` (Node.js crypto) for these inputs
    assert child_request_id("k1", 0) == "83dbdafb-8866-57bf-9370-02d942cf5bfe"
    assert child_request_id("k1", 1) == "4869133b-fa69-5915-8366-36c6016e2548"
    assert child_request_id("batch-é", 19) == "8b967af5-a8ab-550b-aed9-f3bae8a32f6c"


def test_the_single_answer_and_its_refusals_are_unchanged(brain: Deps, agent: Caller) -> None:
    schema = tool_schema(REGISTRY["remember"])
    assert schema["required"] == []
    assert schema["properties"]["items"]["minItems"] == 1 and schema["properties"]["items"]["maxItems"] == 20
    is_error, body = remember(brain, agent, {"fact": "Hana reviews every launch", "provenance": "wiki"})
    assert not is_error and set(body) == {
        "id",
        "status",
        "status_text",
        "entity_slug",
        "valid_until",
        "protocol_version",
        "search_state",
        "warnings",  # D24: an unattributed save says so
        "hint",
        # D22: the write's receipt, and its fields at the top level
        "write_request",
        "request_id",
        "state",
        "retry_after_ms",
        "persistence",
        "created_at",
        "updated_at",
    }
    is_error, body = remember(brain, agent, {"provenance": "wiki"})
    assert is_error and body["message"] == "fact is empty."
    is_error, body = remember(brain, agent, {"fact": "No provenance here"})
    assert is_error and body["message"] == "provenance is missing."


def test_the_result_model_and_its_schema_hold_both_answers(brain: Deps, agent: Caller) -> None:
    spec = REGISTRY["remember"]
    schema = result_schema(spec)
    assert schema["type"] == "object"
    assert [v["$ref"].rsplit("/", 1)[-1] for v in schema["anyOf"]] == ["RememberResult", "RememberBatchResult"]
    is_error, body = remember(brain, agent, {"items": ["Ivo maintains the CI runners"], "provenance": "wiki"})
    assert not is_error
    spec.validate_result(body)
    with pytest.raises(ValidationError):
        spec.validate_result({**body, "status": "inserted"})  # neither answer: a stray field


def test_a_dry_run_checks_every_item_and_writes_nothing(brain: Deps, agent: Caller) -> None:
    args = {"items": ["Jo runs payroll", {"fact": "Jo is on leave", "ttl": "2w"}], "provenance": "hr"}
    is_error, body = remember(brain, agent, {**args, "session_id": "s-dry", "dry_run": True})
    assert not is_error and body["ran"] is False and len(body["arguments"]["items"]) == 2
    assert session_facts(brain, agent, "s-dry") == []
    is_error, body = remember(brain, agent, {**args, "items": ["Jo runs payroll", {"fact": "x", "ttl": "1 fortnight"}]})
    assert is_error and body["message"].startswith("items[1]: ")


def test_a_top_level_entity_is_moved_onto_every_item_by_the_fix(brain: Deps, agent: Caller) -> None:
    args = {"items": ["Kai owns search", {"fact": "Kai likes Go", "entity": "people/kai-b"}], "entity": "people/kai"}
    is_error, body = remember(brain, agent, {**args, "provenance": "wiki", "session_id": "s-ent"})
    assert is_error and body["code"] == "invalid_params" and body["detail"]["field"] == "entity"
    fixed = body["fix"]["mcp"]["arguments"]
    assert "entity" not in fixed
    assert fixed["items"] == [
        {"fact": "Kai owns search", "entity": "people/kai"},
        {"fact": "Kai likes Go", "entity": "people/kai-b"},
    ]
    assert session_facts(brain, agent, "s-ent") == []
    is_error, body = remember(brain, agent, fixed)
    assert not is_error and [i["entity_slug"] for i in body["items"]] == ["people/kai", "people/kai-b"]


class DownEmbedder(CountingEmbedder):
    """The real HashEmbedder's identity, its service down: every call raises `Unavailable`."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        raise Unavailable("the embedding service is down")


def test_an_embedder_outage_costs_one_call_and_says_dedup_was_degraded(brain: Deps, agent: Caller) -> None:
    down = dataclasses.replace(brain, embedder=DownEmbedder())
    items = [f"Lee reviewed pull request {n}" for n in range(1, 6)]
    is_error, body = remember(down, agent, {"items": items, "provenance": "github"})
    assert not is_error, body
    assert body["saved"] == 5 and down.embedder.calls == 1  # type: ignore[union-attr]
    assert any("exact text only" in h for h in body["hints"])


def test_fact_beside_items_is_refused_and_the_fix_moves_it_in_or_drops_a_blank_one(brain: Deps, agent: Caller) -> None:
    is_error, body = remember(brain, agent, {"items": ["Mo owns billing"], "fact": "Mo is in Oslo", "provenance": "p"})
    assert is_error and body["fix"]["mcp"]["arguments"] == {
        "items": ["Mo is in Oslo", "Mo owns billing"],
        "provenance": "p",
    }
    is_error, body = remember(brain, agent, {"items": ["Mo owns billing"], "fact": " ", "provenance": "p"})
    assert is_error and body["fix"]["mcp"]["arguments"] == {"items": ["Mo owns billing"], "provenance": "p"}


def test_an_item_replaces_the_fact_it_names_and_a_call_only_argument_is_refused(brain: Deps, agent: Caller) -> None:
    is_error, old = remember(
        brain, agent, {"fact": "Nia's desk is on floor 2", "provenance": "p", "entity": "people/nia"}
    )
    assert not is_error, old
    item = {"fact": "Nia's desk is on floor 5", "entity": "people/nia", "replaces": old["id"]}
    is_error, body = remember(brain, agent, {"items": [item], "provenance": "p", "restore_withdrawn": True})
    assert is_error and body["detail"]["field"] == "restore_withdrawn"
    assert body["fix"]["mcp"]["arguments"] == {"items": [item], "provenance": "p"}
    is_error, body = remember(brain, agent, body["fix"]["mcp"]["arguments"])
    assert not is_error, body
    assert body["items"][0]["status"] == "superseded" and body["items"][0]["superseded_fact_id"] == old["id"]
