"""`list_pages(with_counts=true)`: each listed page with its active facts and the time its facts
last changed, from one read for the whole page, on both adapter sets: SQLite, and DynamoDB Local +
the OpenSearch node (tests/unit/domain/delta_backends.py). Nothing is mocked; the embedder is the
deterministic HashEmbedder.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.memory.put_page_params import PutPageParams
from fleetmem.memory.verbs import forget, list_pages, put_page, remember
from fleetmem.models import Caller
from fleetmem.ports import CallContext
from fleetmem.timefmt import iso, to_ms

CTX = CallContext("counts")
ADA, ACME, EMPTY, SECRET = "people/ada-cnt", "companies/acme-cnt", "people/empty-cnt", "projects/secret-cnt"


def who(d: Any, *, tenant: str | None = None, remote: bool = True) -> Caller:
    """A remote agent, or (remote=False) the owner's trusted local CLI, which also sees private facts."""
    return Caller(tenant=tenant or d.test_tenant, client_id="c", scopes=frozenset({"read", "write"}), remote=remote)


def page(d: Any, caller: Caller, slug: str) -> None:
    put_page.run(d, caller, PutPageParams.model_validate({"slug": slug, "content": f"About {slug}.\n"}), CTX)
    d.clock.advance(seconds=1)


def save(d: Any, caller: Caller, **args: Any) -> dict[str, Any]:
    body = remember.run(d, caller, remember.RememberParams.model_validate({"provenance": "p", **args}), CTX).body
    d.clock.advance(seconds=1)
    return body


def listed(d: Any, caller: Caller, **args: Any) -> dict[str, dict[str, Any]]:
    body = list_pages.run(d, caller, list_pages.ListPagesParams.model_validate(args), CTX).body
    return {p["slug"]: p for p in body["pages"]}


def counts(d: Any, caller: Caller, **args: Any) -> dict[str, tuple[int, str | None]]:
    return {s: (p["facts"], p["facts_changed_at"]) for s, p in listed(d, caller, with_counts=True, **args).items()}


def test_counts_active_facts_and_their_latest_change_per_page(bdeps):
    d, agent = bdeps, who(bdeps)
    for slug in (ACME, ADA, EMPTY):
        page(d, agent, slug)
    save(d, agent, fact="Ada prefers tea", entity=ADA)
    old = save(d, agent, fact="Ada's desk is 2B", entity=ADA)
    save(d, agent, fact="Ada's desk is 4D", entity=ADA, replaces=old["id"])
    save(d, agent, fact="Acme renews in March", entity=ACME)
    wrong = save(d, agent, fact="Acme is in Oslo", entity=ACME)
    forgot_at = iso(d.clock.now())
    forget.run(d, agent, forget.ForgetParams.model_validate({"id": wrong["id"], "reason": "wrong"}), CTX)
    d.clock.advance(seconds=1)
    lapsed_at = iso(d.clock.now() + timedelta(hours=1))  # the newest fact, which lapses an hour later
    save(d, agent, fact="Ada is on call this week", entity=ADA, ttl="1h")
    before_lapse = counts(d, agent)[ADA]
    d.clock.advance(hours=2)

    got = counts(d, agent)
    # Ada: tea and 4D active (2B superseded, the TTL fact lapsed), last change the lapse
    assert before_lapse[0] == 3 and before_lapse[1] is not None and before_lapse[1] < lapsed_at
    assert got[ADA] == (2, lapsed_at)
    # Acme: one active; the forget is its latest change
    assert got[ACME] == (1, forgot_at)
    assert got[EMPTY] == (0, None)
    # without the switch, the rows are the plain page rows
    assert all(set(p) == {"slug", "title", "type", "updated_at"} for p in listed(d, agent).values())


def test_counts_follow_the_type_filter_and_the_cursor(bdeps):
    d, agent = bdeps, who(bdeps)
    for slug in (ACME, ADA, EMPTY):
        page(d, agent, slug)
    put_page.run(
        d, agent, PutPageParams.model_validate({"slug": "people/bo-cnt", "content": "Bo.\n", "type": "person"}), CTX
    )
    save(d, agent, fact="Bo likes rain", entity="people/bo-cnt")
    save(d, agent, fact="Acme renews in March", entity=ACME)
    first = list_pages.run(d, agent, list_pages.ListPagesParams.model_validate({"limit": 2, "with_counts": True}), CTX)
    assert [(p["slug"], p["facts"]) for p in first.body["pages"]] == [(ACME, 1), (ADA, 0)]
    rest = counts(d, agent, cursor=first.body["next_cursor"])
    assert {s: n for s, (n, _) in rest.items()} == {"people/bo-cnt": 1, EMPTY: 0}
    assert {s: n for s, (n, _) in counts(d, agent, type="person").items()} == {"people/bo-cnt": 1}


def test_private_facts_are_counted_for_the_owner_only(bdeps):
    d, agent, owner = bdeps, who(bdeps), who(bdeps, remote=False)
    page(d, agent, ADA)
    page(d, agent, SECRET)
    world_at = iso(d.clock.now())
    save(d, agent, fact="Ada prefers tea", entity=ADA)
    private_at = iso(d.clock.now())
    save(d, owner, fact="Ada's salary is private", entity=ADA, visibility="private")
    save(d, owner, fact="The secret project is late", entity=SECRET, visibility="private")

    seen = counts(d, agent)
    assert seen[ADA] == (1, world_at)
    # a page whose only fact is private: no fact and no change for a remote caller
    assert seen[SECRET] == (0, None)
    mine = counts(d, owner)
    assert mine[ADA] == (2, private_at)
    assert mine[SECRET][0] == 1


def test_a_foreign_tenants_facts_are_never_counted(bdeps):
    d = bdeps
    mine, theirs = who(d), who(d, tenant="t-" + uuid.uuid4().hex[:12])
    page(d, mine, ADA)
    page(d, theirs, ADA)
    for n in range(3):
        save(d, theirs, fact=f"Their Ada fact {n}", entity=ADA)
    assert counts(d, mine)[ADA] == (0, None)
    assert counts(d, theirs)[ADA][0] == 3


def test_a_schema_12_data_directory_gets_the_covering_entity_index_on_open(tmp_path: Any) -> None:
    """Schema 12 -> 13: `facts_entity` is re-made with the state columns the counts read, so an
    entity's facts are counted from the index alone (SQLite only; DynamoDB has no schema)."""
    import sqlite3

    from fleetmem.adapters.local import open_local
    from fleetmem.adapters.local.ids import SortableIds
    from fleetmem.ports import Deps

    def opened() -> Any:
        stores = open_local(tmp_path)
        deps = Deps.over(stores, clock=FixedClock(to_ms(datetime.now(UTC))), ids=SortableIds(), llm=None)
        return stores, dataclasses.replace(deps, embedder=HashEmbedder(dim=8))

    stores, d = opened()
    agent = who(d, tenant="t-mig")
    page(d, agent, ADA)
    save(d, agent, fact="Ada prefers tea", entity=ADA)
    stores.close()
    db = sqlite3.connect(tmp_path / "fleetmem.db")
    with db:  # back to schema 12: the entity index without the state columns
        db.execute("DROP INDEX facts_entity")
        db.execute("CREATE INDEX facts_entity ON facts (tenant, entity_slug, created_at, seq)")
        db.execute("PRAGMA user_version = 12")
    db.close()
    stores, d = opened()
    try:
        assert counts(d, agent)[ADA][0] == 1
    finally:
        stores.close()
    db = sqlite3.connect(tmp_path / "fleetmem.db")
    try:
        columns = [r[2] for r in db.execute("PRAGMA index_info(facts_entity)")]
        plan = db.execute(
            "EXPLAIN QUERY PLAN SELECT entity_slug, count(*), max(expired_at), max(valid_until) FROM facts "
            "WHERE tenant = ? AND entity_slug IN (?, ?) AND visibility = 'world' AND superseded_by IS NULL "
            "GROUP BY entity_slug",
            ("t-mig", ADA, ACME),
        ).fetchall()
    finally:
        db.close()
    assert columns[:4] == ["tenant", "entity_slug", "created_at", "seq"]
    assert {"visibility", "expired_at", "superseded_by", "valid_until"} <= set(columns)
    assert "COVERING INDEX facts_entity" in plan[0][3]
