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


def _pick(audit, tenant, *, before=None, limit=50, **where):
    from fleetmem.ports import ActivityFilter

    return audit.activity(tenant, where=ActivityFilter(**where), before=before, limit=limit)


def test_activity_lists_the_tenants_events_newest_first_filtered(audit, tenant, other_tenant):
    audit.append(ev(tenant, "f_1", "write", 1))
    audit.append(AuditEvent(tenant=tenant, subject="f_2", action="write", actor="agent-b", at=at(2)))
    audit.append(ev(tenant, "f_1", "expire", 3, reason="obsolete"))
    audit.append(ev(other_tenant, "f_9", "write", 4))
    got = [(e.subject, e.action, e.actor) for _, e in _pick(audit, tenant)]
    assert got == [("f_1", "expire", "agent-a"), ("f_2", "write", "agent-b"), ("f_1", "write", "agent-a")]
    assert [e.subject for _, e in _pick(audit, tenant, actor="agent-b")] == ["f_2"]
    assert [e.action for _, e in _pick(audit, tenant, actions=("expire",))] == ["expire"]
    assert [e.subject for _, e in _pick(audit, tenant, since=at(1), until=at(3))] == ["f_2"]
    # another tenant's events, and its client id asked from this tenant, list nothing
    assert [e.subject for _, e in _pick(audit, other_tenant)] == ["f_9"]
    assert _pick(audit, other_tenant, actor="agent-b") == []


def test_activity_pages_by_position_without_losing_same_instant_events(audit, tenant):
    for n in range(5):
        audit.append(ev(tenant, f"f_{n}", "write", 0))
    audit.append(ev(tenant, "f_late", "write", 1))
    seen, before = [], None
    while True:
        page = _pick(audit, tenant, before=before, limit=2)
        seen += [e.subject for _, e in page]
        if len(page) < 2:
            break
        before = page[-1][0]
    assert seen[0] == "f_late"
    assert sorted(seen) == sorted(["f_late", *(f"f_{n}" for n in range(5))])
