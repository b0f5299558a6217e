"""`list_activity` (who wrote what) and `list_facts`' client filter on both adapter sets: SQLite,
and DynamoDB Local + the OpenSearch node (tests/unit/domain/delta_backends.py). Nothing is mocked;
the embedder is the deterministic HashEmbedder.
"""

from __future__ import annotations

import uuid
from typing import Any

from fleetmem.memory.verbs import forget, list_activity, list_facts, remember
from fleetmem.models import Caller
from fleetmem.ports import CallContext

CTX = CallContext("activity")


def who(d: Any, client: str, *, tenant: str | None = None, remote: bool = True) -> Caller:
    return Caller(tenant=tenant or d.test_tenant, client_id=client, scopes=frozenset({"read", "write"}), remote=remote)


def save(d: Any, caller: Caller, **args: Any) -> dict[str, Any]:
    body = remember.run(d, caller, remember.RememberParams.model_validate({"provenance": "p", **args}), CTX).body
    d.clock.advance(seconds=1)
    return body


def activity(d: Any, caller: Caller, **args: Any) -> dict[str, Any]:
    return list_activity.run(d, caller, list_activity.ListActivityParams.model_validate(args), CTX).body


def facts_of(d: Any, caller: Caller, **args: Any) -> list[str]:
    body = list_facts.run(d, caller, list_facts.ListFactsParams.model_validate(args), CTX).body
    return [f["fact"] for f in body["facts"]]


def test_activity_per_client_lists_writes_supersessions_and_forgets_newest_first(bdeps):
    a, b = who(bdeps, "planner"), who(bdeps, "support-bot")
    old = save(bdeps, a, fact="Zed's desk is 2B", entity="people/zed")
    acme = save(bdeps, b, fact="Acme renews in March", entity="companies/acme")
    save(bdeps, b, fact="Zed's desk is 4D", entity="people/zed", replaces=old["id"])
    forget.run(bdeps, a, forget.ForgetParams.model_validate({"id": acme["id"], "reason": "wrong"}), CTX)

    rows = [(e["actor"], e["action"], e["fact"], e["reason"]) for e in activity(bdeps, a)["events"]]
    assert rows[0] == ("planner", "expire", "Acme renews in March", "wrong")
    # the replacement's write and the supersession it caused share one instant
    assert set(rows[1:3]) == {
        ("support-bot", "write", "Zed's desk is 4D", None),
        ("support-bot", "supersede", "Zed's desk is 2B", None),
    }
    assert rows[3:] == [
        ("support-bot", "write", "Acme renews in March", None),
        ("planner", "write", "Zed's desk is 2B", None),
    ]

    by_b = activity(bdeps, a, client_id="support-bot")["events"]
    assert sorted((e["actor"], e["action"], e["fact"]) for e in by_b) == [
        ("support-bot", "supersede", "Zed's desk is 2B"),
        ("support-bot", "write", "Acme renews in March"),
        ("support-bot", "write", "Zed's desk is 4D"),
    ]
    zed = activity(bdeps, a, entity="people/zed", action="write")["events"]
    assert [(e["actor"], e["fact"]) for e in zed] == [
        ("support-bot", "Zed's desk is 4D"),
        ("planner", "Zed's desk is 2B"),
    ]


def test_another_tenants_events_never_appear_and_its_client_ids_look_empty(bdeps):
    mine, theirs = who(bdeps, "planner"), who(bdeps, "spy", tenant="u-" + uuid.uuid4().hex[:12])
    save(bdeps, mine, fact="Our launch is on Friday", entity="projects/apollo")
    save(bdeps, theirs, fact="Their secret plan", entity="projects/apollo")
    assert [e["fact"] for e in activity(bdeps, mine)["events"]] == ["Our launch is on Friday"]
    assert activity(bdeps, mine, client_id="spy")["events"] == []
    assert [e["actor"] for e in activity(bdeps, theirs)["events"]] == ["spy"]
    assert activity(bdeps, theirs, client_id="planner")["events"] == []


def test_a_remote_caller_never_sees_an_event_about_a_private_fact(bdeps):
    local, remote = who(bdeps, "owner", remote=False), who(bdeps, "agent")
    save(bdeps, local, fact="A private note on Zed", entity="people/zed", visibility="private")
    save(bdeps, remote, fact="Zed likes tea", entity="people/zed")
    assert [e["fact"] for e in activity(bdeps, remote)["events"]] == ["Zed likes tea"]
    assert [e["fact"] for e in activity(bdeps, local)["events"]] == ["Zed likes tea", "A private note on Zed"]


def test_activity_pages_with_its_cursor(bdeps):
    a = who(bdeps, "planner")
    for n in range(5):
        save(bdeps, a, fact=f"Milestone {n} is done", entity=f"projects/p{n}")
    first = activity(bdeps, a, limit=2)
    assert [e["fact"] for e in first["events"]] == ["Milestone 4 is done", "Milestone 3 is done"]
    second = activity(bdeps, a, limit=2, cursor=first["next_cursor"])
    assert [e["fact"] for e in second["events"]] == ["Milestone 2 is done", "Milestone 1 is done"]
    third = activity(bdeps, a, limit=2, cursor=second["next_cursor"])
    assert [e["fact"] for e in third["events"]] == ["Milestone 0 is done"]
    assert third["next_cursor"] is None


def test_list_facts_filters_by_the_writing_client(bdeps):
    a, b = who(bdeps, "planner"), who(bdeps, "support-bot")
    save(bdeps, a, fact="Acme renews in March", entity="companies/acme")
    save(bdeps, b, fact="Acme asked for an invoice", entity="companies/acme")
    save(bdeps, b, fact="Zed likes tea", entity="people/zed")
    assert facts_of(bdeps, a, client_id="support-bot") == ["Zed likes tea", "Acme asked for an invoice"]
    assert facts_of(bdeps, a, client_id="support-bot", entity="companies/acme") == ["Acme asked for an invoice"]
    assert facts_of(bdeps, a, client_id="planner") == ["Acme renews in March"]
    assert facts_of(bdeps, a, client_id="nobody") == []
