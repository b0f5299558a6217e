"""The reference's write-target parameters (D27) through the one `dispatch`, on the local SQLite
stores and on the AWS stores (DynamoDB Local and the run's OpenSearch node, on 127.0.0.1); nothing
is mocked (the deterministic HashEmbedder stands in for MiniLM):
- remember and forget take `source_id`: the brain's own source (`"default"` or its id) writes as
  usual; any other source is `scope_denied`, nothing written, the fix leaving `source_id` out; a
  batch's top-level `source_id` is every item's;
- remember takes `expected_revision` (a UUID; anything else `invalid_params`) and `force`, which
  cannot be sent together;
- forget takes `semantic_review`: false reads back as `similar_active.semantic_review: opted_out`.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch

NOW = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)


@pytest.fixture
def agent() -> Caller:
    return Caller(
        tenant="t-" + uuid.uuid4().hex[:10], client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True
    )


def call(deps: Deps, caller: Caller, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    result = dispatch(tool, arguments, caller, deps, transport="mcp")
    return bool(result.is_error), dict(result.body)


def stored(deps: Deps, caller: Caller) -> list[str]:
    is_error, body = call(deps, caller, "recall", {"limit": 100})
    assert not is_error, body
    return [f["fact"] for f in body["facts"]]


def test_the_brains_own_source_writes_and_another_is_scope_denied(brain: Deps, agent: Caller) -> None:
    for source in ("default", agent.tenant):
        is_error, body = call(
            brain, agent, "remember", {"fact": f"Kai owns {source}", "provenance": "p", "source_id": source}
        )
        assert not is_error and body["status"] == "inserted", body
    is_error, body = call(
        brain, agent, "remember", {"fact": "Kai owns billing", "provenance": "p", "source_id": "work"}
    )
    assert is_error and body["code"] == "scope_denied", body
    assert body["detail"]["reason"] == "source_not_granted"
    assert body["fix"]["mcp"] == {"tool": "remember", "arguments": {"fact": "Kai owns billing", "provenance": "p"}}
    assert "Kai owns billing" not in stored(brain, agent)
    # the fix runs
    is_error, body = call(brain, agent, "remember", body["fix"]["mcp"]["arguments"])
    assert not is_error, body


def test_a_batch_takes_its_source_as_every_items_default(brain: Deps, agent: Caller) -> None:
    args = {"items": ["Lee writes the changelog", "Lee runs the release"], "provenance": "p", "source_id": "other"}
    is_error, body = call(brain, agent, "remember", args)
    assert is_error and body["code"] == "scope_denied" and body["message"].startswith("items[0]: "), body
    assert stored(brain, agent) == []
    is_error, body = call(brain, agent, "remember", {**args, "source_id": "default"})
    assert not is_error and body["saved"] == 2, body


def test_expected_revision_is_a_uuid_and_excludes_force(brain: Deps, agent: Caller) -> None:
    base = {"fact": "Mia leads design", "provenance": "p"}
    is_error, body = call(brain, agent, "remember", {**base, "expected_revision": "rev-7"})
    assert is_error and body["code"] == "invalid_params" and "expected_revision" in body["message"], body
    revision = str(uuid.uuid4())
    is_error, body = call(brain, agent, "remember", {**base, "expected_revision": revision, "force": True})
    assert is_error and body["code"] == "invalid_params" and "force" in body["message"], body
    assert stored(brain, agent) == []
    is_error, body = call(brain, agent, "remember", {**base, "expected_revision": revision})
    assert not is_error and body["status"] == "inserted", body
    is_error, body = call(brain, agent, "remember", {"fact": "Mia leads research", "provenance": "p", "force": True})
    assert not is_error and body["status"] == "inserted", body


def test_forget_takes_source_and_semantic_review(brain: Deps, agent: Caller) -> None:
    ids = []
    for text in ("Noa prefers tea", "Noa prefers green tea"):
        is_error, body = call(brain, agent, "remember", {"fact": text, "provenance": "p", "entity": "people/noa"})
        assert not is_error, body
        ids.append(body["id"])
    is_error, body = call(brain, agent, "forget", {"id": ids[0], "source_id": "elsewhere"})
    assert is_error and body["code"] == "scope_denied", body
    is_error, body = call(brain, agent, "forget", {"id": ids[0], "source_id": "default", "semantic_review": False})
    assert not is_error and body["expired"] is True, body
    assert body["similar_active"]["semantic_review"] == "opted_out"
    is_error, body = call(brain, agent, "forget", {"id": ids[1]})
    assert not is_error and body["similar_active"]["semantic_review"] == "off", body
