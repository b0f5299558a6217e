"""forget (PROTOCOL_NOTES §9): string ids only, one not_found for every kind of miss, idempotent
expiry with an audit row, and expired facts leave the search index."""

from __future__ import annotations

import pytest

from fleetmem.errors import VerbError
from fleetmem.memory.registry import REGISTRY
from fleetmem.memory.verbs import forget, recall, remember
from fleetmem.models import SearchQuery
from fleetmem.ports import CallContext

CTX = CallContext("test-correlation")


def save(deps, caller, **args):
    return remember.run(deps, caller, remember.RememberParams.model_validate(args), CTX).body


def drop(deps, caller, **args):
    return forget.run(deps, caller, forget.ForgetParams.model_validate(args), CTX).body


def drop_error(deps, caller, **args) -> VerbError:
    with pytest.raises(VerbError) as err:
        drop(deps, caller, **args)
    return err.value


def test_forget_expires_the_fact_and_recall_stops_returning_it(deps, remote_caller):
    saved = save(deps, remote_caller, fact="Alice left the team", provenance="p", entity="people/alice")
    body = drop(deps, remote_caller, id=saved["id"], reason="user corrected it")
    body.pop("similar_active")  # D23, tests/contract/test_ref060_replaces.py
    assert body == {"id": saved["id"], "expired": True, "reason": "user corrected it", "protocol_version": 1}
    facts = recall.run(deps, remote_caller, recall.RecallParams(entity="people/alice"), CTX).body["facts"]
    assert facts == []


def test_an_omitted_reason_echoes_as_null(deps, remote_caller):
    saved = save(deps, remote_caller, fact="x", provenance="p")
    body = drop(deps, remote_caller, id=saved["id"])
    assert "reason" in body and body["reason"] is None


def test_forgetting_twice_succeeds_with_expired_false(deps, remote_caller):
    saved = save(deps, remote_caller, fact="x", provenance="p")
    drop(deps, remote_caller, id=saved["id"])
    assert drop(deps, remote_caller, id=saved["id"])["expired"] is False


def test_a_ttl_expired_or_superseded_fact_is_already_expired(deps, remote_caller, clock):
    short = save(deps, remote_caller, fact="short", provenance="p", ttl="1m")
    clock.advance(minutes=2)
    assert drop(deps, remote_caller, id=short["id"])["expired"] is False


def test_expiry_keeps_an_audit_row_with_who_when_and_why(deps, remote_caller, clock):
    saved = save(deps, remote_caller, fact="x", provenance="src")
    clock.advance(hours=1)
    drop(deps, remote_caller, id=saved["id"], reason="wrong")
    events = deps.audit.for_subject("t1", saved["id"])
    assert [(e.action, e.actor, e.reason) for e in events] == [
        ("write", "agent-a", None),
        ("expire", "agent-a", "wrong"),
    ]
    assert events[-1].at == clock.now()
    stored = deps.facts.get("t1", saved["id"])
    assert stored.expired_at == clock.now() and stored.expired_reason == "wrong"


def test_a_forgotten_fact_is_no_longer_found_by_search(deps, remote_caller):
    saved = save(deps, remote_caller, fact="Quokka sightings logged", provenance="p")
    drop(deps, remote_caller, id=saved["id"])
    hits = deps.search.search(SearchQuery(tenant="t1", text="quokka", kinds=("fact",)))
    assert hits.keyword == ()
    assert recall.run(deps, remote_caller, recall.RecallParams(query="quokka"), CTX).body["facts"] == []


@pytest.mark.parametrize("number", [7, 7.0])
def test_a_numeric_id_is_invalid_params_and_the_fix_passes_it_as_a_string(deps, remote_caller, number):
    err = drop_error(deps, remote_caller, id=number, reason="dup")
    assert err.code == "invalid_params"
    assert err.fix.mcp == {"tool": "forget", "arguments": {"id": str(number), "reason": "dup"}}


def test_a_missing_id_is_invalid_params(deps, remote_caller):
    assert drop_error(deps, remote_caller).code == "invalid_params"


def test_every_kind_of_miss_gets_the_same_not_found(deps, remote_caller, local_caller, other_tenant_caller):
    mine = save(deps, remote_caller, fact="tenant one fact", provenance="p")
    private = save(deps, local_caller, fact="private fact", provenance="p", visibility="private")
    errors = [
        drop_error(deps, remote_caller, id="f_DOESNOTEXIST"),
        drop_error(deps, remote_caller, id="companies/acme"),  # a page slug is not a fact id
        drop_error(deps, remote_caller, id="'; DROP TABLE facts; --"),
        drop_error(deps, other_tenant_caller, id=mine["id"]),
        drop_error(deps, remote_caller, id=private["id"]),
    ]
    assert {e.code for e in errors} == {"not_found"}
    assert len({(e.message, e.why, e.klass, repr(e.fix)) for e in errors}) == 1
    assert all(e.suggestion for e in errors)
    # nothing was expired by the refused calls
    assert deps.facts.get("t1", mine["id"]).expired_at is None
    assert deps.facts.get("t1", private["id"]).expired_at is None


def test_a_remote_caller_can_write_a_private_fact_but_not_forget_it(deps, remote_caller, local_caller):
    saved = save(deps, remote_caller, fact="only local", provenance="p", visibility="private")
    assert drop_error(deps, remote_caller, id=saved["id"]).code == "not_found"
    assert drop(deps, local_caller, id=saved["id"])["expired"] is True


def test_forget_is_registered_as_a_destructive_idempotent_write():
    spec = REGISTRY["forget"]
    assert (spec.scope, spec.surface, spec.writes) == ("write", "verbs", True)
    assert spec.annotations.get("destructiveHint") is True and spec.annotations.get("idempotentHint") is True
    assert spec.input_schema()["properties"]["id"]["type"] == "string"
    assert spec.input_schema()["required"] == ["id"]
