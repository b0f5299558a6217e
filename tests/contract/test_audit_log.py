"""AuditLog contract (fleetmem.ports.AuditLog)."""

from __future__ import annotations

from tests.contract.builders import at

from fleetmem.models import AuditEvent


def ev(tenant: str, subject: str, action: str, minute: float, **kw) -> AuditEvent:
    return AuditEvent(tenant=tenant, subject=subject, action=action, actor="agent-a", at=at(minute), **kw)


def test_events_come_back_oldest_first_for_their_subject(audit, tenant):
    audit.append(ev(tenant, "f_1", "expire", 5, reason="obsolete"))
    audit.append(ev(tenant, "f_1", "write", 1, provenance="chat", detail={"kind": "fact", "n": [1]}))
    audit.append(ev(tenant, "f_2", "write", 2))
    got = audit.for_subject(tenant, "f_1")
    assert [e.action for e in got] == ["write", "expire"]
    assert got[0] == ev(tenant, "f_1", "write", 1, provenance="chat", detail={"kind": "fact", "n": [1]})
    assert got[1].reason == "obsolete"


def test_events_at_the_same_instant_keep_their_append_order(audit, tenant):
    for action in ["write", "supersede", "expire", "purge"]:
        audit.append(ev(tenant, "f_1", action, 0))
    assert [e.action for e in audit.for_subject(tenant, "f_1")] == ["write", "supersede", "expire", "purge"]


def test_a_foreign_tenants_events_are_invisible(audit, tenant, other_tenant):
    audit.append(ev(tenant, "f_1", "write", 0))
    assert audit.for_subject(other_tenant, "f_1") == []
    assert audit.for_subject(tenant, "f_unknown") == []
