"""list_facts and memory_stats through `dispatch`, on SQLite and on DynamoDB Local, over one seeded
memory: every filter (entity, kind, state incl. superseded/forgotten/expired, session, provenance,
time range), cursor pagination without duplicates or misses, remote callers never seeing private
facts or pages (rows and counts), another tenant's facts never appearing, malformed cursor/dates
refused as invalid_params, and memory_stats' counts against the seed.

The clock is near the real time (DynamoDB Local runs the cursors table's TTL on the wall clock);
facts are written at noon of whole days before it, so their UTC day is known.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tests.unit.domain.delta_backends import BACKENDS

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.models import Caller, ClientRecord, Cursor, Fact, Page
from fleetmem.ports import Deps
from fleetmem.timefmt import iso, to_ms
from fleetmem.transport.dispatch import dispatch

NOW = to_ms(datetime.now(UTC))
MIDNIGHT = NOW.replace(hour=0, minute=0, second=0, microsecond=0)


def day(k: int, minute: int = 0) -> datetime:
    """Noon (plus `minute`) of the UTC day `k` days before today."""
    return MIDNIGHT - timedelta(days=k) + timedelta(hours=12, minutes=minute)


class Seed:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.tenant = "t-" + uuid.uuid4().hex[:10]
        self.other = "u-" + uuid.uuid4().hex[:10]
        self.ids: dict[str, str] = {}

    def fact(self, name: str, *, tenant: str | None = None, supersede: Fact | None = None, **kw: Any) -> Fact:
        tenant = tenant or self.tenant
        fields: dict[str, Any] = {"text": f"fact {name}", "provenance": "chat", "client_id": "agent-a", **kw}
        fact = Fact(
            tenant=tenant, fact_id=f"f_{name}_{uuid.uuid4().hex[:6]}", seq=self.deps.facts.next_seq(tenant), **fields
        )
        self.deps.facts.put(fact, supersede=supersede)
        self.ids[name] = fact.fact_id
        return fact

    def build(self) -> Seed:
        f = self.fact
        f("f1", entity_slug="people/alice", session_id="s1", provenance="chat:Slack", created_at=day(3))
        f(
            "f2",
            entity_slug="people/alice",
            kind="preference",
            visibility="private",
            session_id="s1",
            provenance="email",
            created_at=day(2, 5),
        )
        f3 = f("f3", entity_slug="people/bob", created_at=day(2, 10))
        f("f4", entity_slug="people/bob", created_at=day(1), supersede=f3, supersedes=f3.fact_id)
        f("f5", kind="event", provenance="import", created_at=day(1, 30))
        self.deps.facts.expire(self.tenant, self.ids["f5"], at=day(1, 40), reason="wrong", actor="agent-a")
        f("f6", entity_slug="people/alice", kind="commitment", created_at=day(5), valid_until=NOW - timedelta(hours=1))
        f("f7", entity_slug="people/carol", kind="belief", session_id="s2", provenance="Chat", created_at=day(40))
        f("u1", tenant=self.other, entity_slug="people/alice", session_id="s1", created_at=day(1, 50))
        pages = (("notes/a", "world", day(2)), ("notes/b", "private", day(1)), ("notes/c", "world", day(40)))
        for slug, vis, at in pages:
            self.deps.pages.put(
                Page(tenant=self.tenant, slug=slug, title=slug, visibility=vis, body="x", created_at=at, updated_at=at)
            )
        self.deps.pages.put(Page(tenant=self.other, slug="notes/u", title="u", created_at=day(1), updated_at=day(1)))
        for tenant, client in ((self.tenant, "agent-a"), (self.other, "agent-u")):
            self.deps.clients.create(
                ClientRecord(
                    token_hash=uuid.uuid4().hex,
                    token_id="tk_" + uuid.uuid4().hex[:8],
                    tenant=tenant,
                    client_id=client,
                    scopes=frozenset({"read"}),
                    created_at=NOW,
                )
            )
        for tenant, client, session, touched in (
            (self.tenant, "agent-a", "live-1", NOW),
            (self.tenant, "agent-a", "live-2", NOW - timedelta(days=2)),
            (self.tenant, "agent-a", "idle", NOW - timedelta(days=8)),
            (self.other, "agent-u", "live-u", NOW),
        ):
            self.deps.cursors.put(
                Cursor(tenant=tenant, client_id=client, session_id=session, since=touched, touched_at=touched),
                expected_version=None,
            )
        return self


@pytest.fixture(scope="module", params=BACKENDS)
def seeded(request: pytest.FixtureRequest) -> Iterator[Seed]:
    clock = FixedClock(NOW)
    if request.param == "sqlite":
        stores = open_local(":memory:")
        try:
            yield Seed(Deps.over(stores, clock=clock, ids=SortableIds(), embedder=HashEmbedder(), llm=None)).build()
        finally:
            stores.close()
        return
    from tests.aws import engines

    from fleetmem.adapters.local.ids import SortableIds as Ids

    endpoint = engines.dynamodb_local_endpoint(request.config)
    with engines.scratch_stores(endpoint) as stores:
        yield Seed(Deps.over(stores, clock=clock, ids=Ids(), embedder=HashEmbedder(), llm=None)).build()


def local(seed: Seed) -> Caller:
    return Caller(tenant=seed.tenant, client_id="agent-a", scopes=frozenset({"read"}), remote=False)


def remote(seed: Seed) -> Caller:
    return Caller(tenant=seed.tenant, client_id="agent-a", scopes=frozenset({"read"}), remote=True)


def call(seed: Seed, caller: Caller, tool: str, **args: Any) -> dict[str, Any]:
    r = dispatch(tool, args, caller, seed.deps)
    assert not r.is_error, r.body
    return r.body


def names(seed: Seed, body: dict[str, Any]) -> list[str]:
    by_id = {v: k for k, v in seed.ids.items()}
    return [by_id.get(row["fact_id"], row["fact_id"]) for row in body["facts"]]


def listed(seed: Seed, caller: Caller, **args: Any) -> list[str]:
    return names(seed, call(seed, caller, "list_facts", **args))


# -- list_facts ------------------------------------------------------------------------------------


def test_the_default_lists_active_facts_newest_first_and_remote_callers_see_world_facts_only(seeded):
    assert listed(seeded, local(seeded)) == ["f4", "f2", "f1", "f7"]
    assert listed(seeded, remote(seeded)) == ["f4", "f1", "f7"]


@pytest.mark.parametrize(
    ("args", "trusted", "world"),
    [
        ({"entity": "people/alice", "state": "any"}, ["f2", "f1", "f6"], ["f1", "f6"]),
        ({"kind": "preference"}, ["f2"], []),
        ({"state": "superseded"}, ["f3"], ["f3"]),
        ({"state": "forgotten"}, ["f5"], ["f5"]),
        ({"state": "expired"}, ["f6"], ["f6"]),
        ({"session_id": "s1"}, ["f2", "f1"], ["f1"]),
        ({"provenance": "CHAT", "state": "any"}, ["f4", "f3", "f1", "f6", "f7"], ["f4", "f3", "f1", "f6", "f7"]),
        (
            {
                "created_after": iso(MIDNIGHT - timedelta(days=3)),
                "created_before": iso(MIDNIGHT - timedelta(days=1)),
                "state": "any",
            },
            ["f3", "f2", "f1"],
            ["f3", "f1"],
        ),
        ({"entity": "people/bob", "created_after": iso(day(1)), "state": "any"}, [], []),
        ({"session_id": "s1", "created_before": iso(day(3)), "state": "any"}, [], []),
    ],
)
def test_filters_combine_and_hide_private_facts_from_remote_callers(seeded, args, trusted, world):
    assert listed(seeded, local(seeded), **args) == trusted
    assert listed(seeded, remote(seeded), **args) == world


def test_rows_carry_the_state_lineage_and_expiry_of_each_fact(seeded):
    rows = {r["fact_id"]: r for r in call(seeded, local(seeded), "list_facts", state="any", limit=200)["facts"]}
    f3, f4, f5, f6 = (rows[seeded.ids[n]] for n in ("f3", "f4", "f5", "f6"))
    assert (f3["status"], f3["superseded_by"], f4["supersedes"]) == ("superseded", seeded.ids["f4"], seeded.ids["f3"])
    assert (f5["status"], f5["expired_reason"], f5["expired_at"]) == ("forgotten", "wrong", iso(day(1, 40)))
    assert (f6["status"], f6["expired_at"]) == ("expired", f6["valid_until"])
    assert set(f4) == {
        "fact_id",
        "id",
        "fact",
        "kind",
        "entity_slug",
        "provenance",
        "visibility",
        "session_id",
        "client_id",
        "created_at",
        "valid_until",
        "status",
        "expired_at",
        "expired_reason",
        "supersedes",
        "superseded_by",
    }
    assert (f4["status"], f4["client_id"], f4["expired_at"], f4["superseded_by"]) == ("active", "agent-a", None, None)


@pytest.mark.parametrize("args", [{"state": "any"}, {"entity": "people/alice", "state": "any"}, {"session_id": "s1"}])
def test_the_cursor_pages_through_every_fact_once(seeded, args):
    whole = listed(seeded, local(seeded), limit=200, **args)
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        body = call(
            seeded,
            local(seeded),
            "list_facts",
            limit=1 if len(whole) < 4 else 2,
            **args,
            **({"cursor": cursor} if cursor else {}),
        )
        seen += names(seeded, body)
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == whole and len(set(seen)) == len(seen)


def test_fact_id_returns_that_fact_in_any_state_and_nothing_for_a_foreign_missing_or_hidden_id(seeded):
    assert listed(seeded, remote(seeded), fact_id=seeded.ids["f5"]) == ["f5"]
    assert listed(seeded, local(seeded), fact_id=seeded.ids["f2"]) == ["f2"]
    assert listed(seeded, remote(seeded), fact_id=seeded.ids["f2"]) == []
    assert listed(seeded, local(seeded), fact_id=seeded.ids["u1"]) == []
    assert listed(seeded, local(seeded), fact_id="f_missing") == []


def test_another_tenants_facts_never_appear(seeded):
    for args in ({"state": "any", "limit": 200}, {"entity": "people/alice", "state": "any"}, {"session_id": "s1"}):
        assert "u1" not in listed(seeded, local(seeded), **args)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"cursor": "not-a-cursor!"}, "cursor"),
        ({"created_after": "yesterday"}, "created_after"),
        ({"created_before": "2026-13-40"}, "created_before"),
        ({"state": "gone"}, "state"),
        ({"limit": 500}, "limit"),
    ],
)
def test_a_malformed_cursor_date_state_or_limit_is_invalid_params(seeded, args, field):
    r = dispatch("list_facts", {"kind": "fact", **args}, local(seeded), seeded.deps)
    assert r.is_error and r.body["code"] == "invalid_params", r.body
    assert field in r.body["message"]
    if field == "cursor":  # the fix starts over without the cursor, other arguments kept
        assert r.body["fix"]["mcp"] == {"tool": "list_facts", "arguments": {"kind": "fact"}}


# -- memory_stats ----------------------------------------------------------------------------------


def test_memory_stats_counts_the_seeded_memory(seeded):
    body = call(seeded, local(seeded), "memory_stats")
    assert body["facts"] == {"active": 4, "superseded": 1, "forgotten": 1, "expired": 1}
    assert (body["pages"], body["entities"], body["delta_sessions"]) == (3, 3, 2)
    assert body["busiest_entities"] == [
        {"entity_slug": "people/alice", "facts": 2},
        {"entity_slug": "people/bob", "facts": 1},
        {"entity_slug": "people/carol", "facts": 1},
    ]
    days = body["writes_per_day"]
    assert len(days) == 30 and days[-1]["date"] == MIDNIGHT.date().isoformat()
    assert [d["date"] for d in days] == sorted(d["date"] for d in days)
    written = {d["date"]: (d["facts"], d["pages"]) for d in days if d["facts"] or d["pages"]}
    assert written == {
        day(5).date().isoformat(): (1, 0),
        day(3).date().isoformat(): (1, 0),
        day(2).date().isoformat(): (2, 1),
        day(1).date().isoformat(): (2, 1),
    }
    assert body["protocol_version"] == 1


def test_memory_stats_counts_world_facts_and_pages_only_for_remote_callers(seeded):
    body = call(seeded, remote(seeded), "memory_stats")
    assert body["facts"] == {"active": 3, "superseded": 1, "forgotten": 1, "expired": 1}
    assert (body["pages"], body["entities"]) == (2, 3)
    assert body["busiest_entities"][0] == {"entity_slug": "people/alice", "facts": 1}
    written = {d["date"]: (d["facts"], d["pages"]) for d in body["writes_per_day"] if d["facts"] or d["pages"]}
    assert written[day(2).date().isoformat()] == (1, 1) and written[day(1).date().isoformat()] == (2, 0)


def test_memory_stats_of_an_empty_tenant_is_all_zero(seeded):
    stranger = Caller(tenant="e-" + uuid.uuid4().hex[:10], client_id="x", scopes=frozenset({"read"}))
    body = call(seeded, stranger, "memory_stats")
    assert body["facts"] == {"active": 0, "superseded": 0, "forgotten": 0, "expired": 0}
    assert (body["pages"], body["entities"], body["delta_sessions"], body["busiest_entities"]) == (0, 0, 0, [])
    assert all(d["facts"] == d["pages"] == 0 for d in body["writes_per_day"])


# -- memory_stats: search health ---------------------------------------------------------------------


def _stats_search(deps: Deps, **over: Any) -> dict[str, Any]:
    from dataclasses import replace

    caller = Caller(tenant="t-" + uuid.uuid4().hex[:8], client_id="x", scopes=frozenset({"read"}))
    r = dispatch("memory_stats", {}, caller, replace(deps, **over))
    assert not r.is_error, r.body
    return r.body["search"]


def test_search_is_healthy_with_an_embedder_and_degraded_without_one():
    from fleetmem.ports import Diagnostics

    stores = open_local(":memory:")
    try:
        deps = Deps.over(stores, clock=FixedClock(NOW), ids=SortableIds(), embedder=HashEmbedder(), llm=None)
        assert _stats_search(deps) == {"degraded": False, "reason": None}
        why = "Embeddings are turned off (FLEETMEM_EMBEDDER=none), so search is keyword-only."
        off = _stats_search(deps, embedder=None, diagnostics=Diagnostics(embedder_problem=why))
        assert off == {"degraded": True, "reason": why}
    finally:
        stores.close()


def test_search_is_degraded_while_the_opensearch_breaker_is_open_or_no_endpoint_is_set():
    from fleetmem.adapters.aws import NoSearchIndex
    from fleetmem.adapters.aws.opensearch import OpenSearchIndex
    from fleetmem.errors import Unavailable

    stores = open_local(":memory:")
    try:
        deps = Deps.over(stores, clock=FixedClock(NOW), ids=SortableIds(), embedder=HashEmbedder(), llm=None)
        index = OpenSearchIndex("http://127.0.0.1:9", model_id="m", dim=8, service="none")
        assert _stats_search(deps, search=index) == {"degraded": False, "reason": None}
        for _ in range(index.breaker.threshold):
            index.breaker.record(Unavailable("timed out", reason="timeout"))
        state = _stats_search(deps, search=index)
        assert state["degraded"] is True and "circuit open" in state["reason"]
        missing = _stats_search(deps, search=NoSearchIndex())
        assert missing["degraded"] is True and "FLEETMEM_OPENSEARCH_ENDPOINT" in missing["reason"]
    finally:
        stores.close()
