"""Admin tools trace_fact (audit trail + supersession lineage) and purge_fact (D12 hard delete)."""

from __future__ import annotations

import math

import pytest

from fleetmem.errors import VerbError
from fleetmem.memory.registry import REGISTRY
from fleetmem.memory.verbs import forget, purge_fact, remember, trace_fact
from fleetmem.models import SearchQuery
from fleetmem.ports import CallContext

CTX = CallContext("test-correlation")


class TableEmbedder:
    """Deterministic test embedder mapping chosen texts to chosen unit vectors so a supersession
    happens on purpose; the real MiniLM model is tested in tests/unit/embedder."""

    model_id = "table-test"
    dim = 3

    def __init__(self, table):
        self.table = table

    def embed(self, texts):
        return [self.table.get(t, [0.0, 0.0, 1.0]) for t in texts]


def save(deps, caller, **args):
    return remember.run(deps, caller, remember.RememberParams.model_validate(args), CTX).body


def trace(deps, caller, fact_id):
    return trace_fact.run(deps, caller, trace_fact.TraceFactParams(id=fact_id), CTX).body


def purge(deps, caller, fact_id, reason=None):
    return purge_fact.run(deps, caller, purge_fact.PurgeFactParams(id=fact_id, reason=reason), CTX).body


def test_trace_shows_the_lineage_and_every_event_in_order(deps, remote_caller, admin_caller, clock):
    deps.embedder = TableEmbedder(
        {"Alice at Acme": [1.0, 0.0, 0.0], "Alice left Acme": [0.97, math.sqrt(1 - 0.97**2), 0.0]}
    )
    old = save(deps, remote_caller, fact="Alice at Acme", provenance="hr", entity="people/alice")
    clock.advance(days=1)
    new = save(deps, remote_caller, fact="Alice left Acme", provenance="chat", entity="people/alice")
    clock.advance(days=1)
    forget.run(deps, remote_caller, forget.ForgetParams(id=new["id"], reason="rumour"), CTX)

    for start in (old["id"], new["id"]):
        body = trace(deps, admin_caller, start)
        assert [f["fact_id"] for f in body["lineage"]] == [old["id"], new["id"]]
        assert [(e["fact_id"], e["action"], e["actor"]) for e in body["events"]] == [
            (old["id"], "write", "agent-a"),
            (new["id"], "write", "agent-a"),
            (old["id"], "supersede", "agent-a"),
            (new["id"], "expire", "agent-a"),
        ]
        assert body["id"] == start and body["protocol_version"] == 1
    events = trace(deps, admin_caller, new["id"])["events"]
    assert events[-1]["reason"] == "rumour" and events[0]["provenance"] == "hr"
    assert events[-1]["at"] == "2026-06-13T09:30:00.000Z"


def test_trace_of_an_unknown_or_foreign_fact_is_not_found(deps, remote_caller, other_tenant_caller):
    saved = save(deps, remote_caller, fact="x", provenance="p")
    for caller, fid in ((remote_caller, "f_nope"), (other_tenant_caller, saved["id"]), (remote_caller, "")):
        with pytest.raises(VerbError) as err:
            trace(deps, caller, fid)
        assert err.value.code == "not_found"


def test_purge_removes_the_fact_and_its_index_entry_and_keeps_an_audit_row(deps, remote_caller, admin_caller):
    saved = save(deps, remote_caller, fact="Delete my phone number 555", provenance="p")
    body = purge(deps, admin_caller, saved["id"], reason="deletion request")
    assert body == {
        "id": saved["id"],
        "purged": True,
        "reason": "deletion request",
        "dry_run": False,
        "protocol_version": 1,
    }
    assert deps.facts.get("t1", saved["id"]) is None
    assert deps.search.search(SearchQuery(tenant="t1", text="phone", kinds=("fact",))).keyword == ()
    events = deps.audit.for_subject("t1", saved["id"])
    assert [(e.action, e.actor, e.reason) for e in events][-1] == ("purge", "admin-a", "deletion request")
    assert all("555" not in str(e.detail) for e in events)


def test_purge_of_an_unknown_or_foreign_fact_is_not_found(deps, remote_caller, other_tenant_caller):
    saved = save(deps, remote_caller, fact="x", provenance="p")
    for caller, fid in ((remote_caller, "f_nope"), (other_tenant_caller, saved["id"])):
        with pytest.raises(VerbError) as err:
            purge(deps, caller, fid)
        assert err.value.code == "not_found"
    assert deps.facts.get("t1", saved["id"]) is not None


def test_admin_tools_live_on_the_full_surface_with_admin_scope():
    t, p = REGISTRY["trace_fact"], REGISTRY["purge_fact"]
    assert (t.scope, t.surface, t.writes, t.annotations.get("readOnlyHint")) == ("admin", "full", False, True)
    assert (p.scope, p.surface, p.writes, p.annotations.get("destructiveHint")) == (
        "admin",
        "full",
        True,
        True,
    )


def test_a_private_fact_looks_missing_to_a_remote_admin_in_trace_and_purge(deps, admin_caller, local_caller):
    """trace_fact and purge_fact answer a remote caller exactly as every read does: a private fact is
    `not_found` (not traced, not purged), while the trusted local caller still reaches it."""
    kept = save(deps, local_caller, fact="Dana's home address is 4 Elm Row", provenance="hr", visibility="private")
    for call in (lambda: trace(deps, admin_caller, kept["id"]), lambda: purge(deps, admin_caller, kept["id"])):
        with pytest.raises(VerbError) as err:
            call()
        assert err.value.code == "not_found"
    assert deps.facts.get("t1", kept["id"]) is not None  # nothing was purged
    assert trace(deps, local_caller, kept["id"])["id"] == kept["id"]
