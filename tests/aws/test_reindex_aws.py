"""The search index rebuild (`fleetmem.adapters.aws.reindex`) and the change-number backfill on
DynamoDB Local and the real OpenSearch node (tests/aws/engines.py). Nothing is mocked: a stopped
run is simulated by a client whose `_bulk` stops answering (a connection error, as a killed process
or a lost network leaves it) after a number of batches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetmem.adapters.aws.dynamo import to_ddb
from fleetmem.adapters.aws.facts import fact_to_item
from fleetmem.adapters.aws.opensearch import OpenSearchIndex
from fleetmem.adapters.aws.opensearch_bodies import index_body, index_name
from fleetmem.adapters.aws.pages import derived_rows, page_to_item
from fleetmem.adapters.aws.reindex import Rebuild, StateFile, discover_tenants, fact_docs
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.errors import Unavailable
from fleetmem.memory.indexing import docs_for_page
from fleetmem.models import Fact, Page, SearchQuery
from tests.aws import engines

T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
EMBEDDER = HashEmbedder(dim=16)


def fact(tenant: str, n: int, **kw: Any) -> Fact:
    return Fact(
        tenant=tenant,
        fact_id=f"f_{n:03d}",
        seq=n,
        text=f"fact {n} about the harbour {tenant}",
        provenance="t",
        client_id="w",
        created_at=T0 + timedelta(seconds=n),
        entity_slug="places/harbour",
        **kw,
    )


def page(tenant: str, n: int) -> Page:
    return Page(
        tenant=tenant,
        slug=f"places/p{n}",
        title=f"Place {n}",
        body=f"# Place {n}\n\nA quay numbered {n}.",
        created_at=T0,
        updated_at=T0 + timedelta(seconds=n),
    )


def expected_docs(stores: Any, tenant: str) -> set[str]:
    """The doc ids the stream indexer would hold for the tenant's stored items."""
    facts, _ = stores.facts.scan(tenant, after=None, limit=1000)
    pages, _ = stores.pages.scan(tenant, after=None, limit=1000)
    return {d.doc_id for d in fact_docs(facts)[0]} | {d.doc_id for p in pages for d in docs_for_page(p)}


def indexed(search: OpenSearchIndex, name: str, tenant: str) -> set[str]:
    search.client.indices.refresh(index=name)
    body = {"size": 1000, "_source": ["doc_id"], "query": {"term": {"tenant": tenant}}}
    return {h["_source"]["doc_id"] for h in search.client.search(index=name, body=body)["hits"]["hits"]}


class DyingClient:
    """The real client, whose `bulk` stops answering after `batches` calls."""

    def __init__(self, client: Any, batches: int) -> None:
        self.client, self.left, self.sent = client, batches, 0

    def bulk(self, **kw: Any) -> Any:
        from opensearchpy.exceptions import ConnectionError as OsConnectionError

        if self.left == 0:
            raise OsConnectionError("N/A", "stopped", None)
        self.left -= 1
        self.sent += sum(1 for line in kw["body"] if "index" in line)
        return self.client.bulk(**kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


@pytest.fixture
def stage(request: pytest.FixtureRequest, dynamodb_local_endpoint: str) -> Any:
    prefix = engines.fresh_prefix()
    stores = engines.open_stores(dynamodb_local_endpoint, prefix)
    url = engines.opensearch_endpoint(request.config)
    search = OpenSearchIndex(url, model_id=EMBEDDER.model_id, dim=EMBEDDER.dim, prefix=prefix, service="none")
    yield stores, search
    search.client.indices.delete(index=f"{prefix}-docs-*", ignore_unavailable=True)


def test_backfill_numbers_items_written_before_change_numbers_so_delta_lists_them(dynamodb_local_endpoint: str) -> None:
    stores = engines.open_stores(dynamodb_local_endpoint, engines.fresh_prefix())
    db, tenant = stores.aws.dynamodb, "old-brain"
    stores.facts.put(fact(tenant, 1))  # a write of today: numbered
    for n in (2, 3, 4):  # the old way: the item without `cs`
        db.put_item(TableName=stores.facts.table, Item=to_ddb(fact_to_item(fact(tenant, n))))
    for n in (1, 2):
        p = page(tenant, n)
        for row in [page_to_item(p), *derived_rows(p)]:
            db.put_item(TableName=stores.pages.table, Item=to_ddb(row))
    now = datetime.now(UTC)

    def listed() -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        facts = stores.fact_feed.changed_after(tenant, seq=0, now=now, world_only=False, limit=100)
        pages = stores.page_feed.changed_after(tenant, seq=0, world_only=False, limit=100)
        return [(n, f.fact_id) for n, f in facts], [(n, h.slug) for n, h in pages]

    facts, pages = listed()
    assert [f for _, f in facts] == ["f_001"] and pages == []
    assert stores.facts.backfill_changes(tenant) == 3 and stores.pages.backfill_changes(tenant) == 2
    facts, pages = listed()
    assert sorted(f for _, f in facts) == ["f_001", "f_002", "f_003", "f_004"]
    assert sorted(s for _, s in pages) == ["places/p1", "places/p2"]
    assert len({n for n, _ in facts}) == 4 and len({n for n, _ in pages}) == 2  # each its own number
    assert stores.facts.backfill_changes(tenant) == 0 and stores.pages.backfill_changes(tenant) == 0
    # a delta follower positioned before the backfill reads the numbered items after it
    floor = stores.fact_feed.change_floor(tenant, after=None)
    stores.facts.put(fact(tenant, 5))
    assert [
        f.fact_id for _, f in stores.fact_feed.changed_after(tenant, seq=floor, now=datetime.now(UTC), world_only=False)
    ] == ["f_005"]


@pytest.mark.live_opensearch
def test_a_stopped_rebuild_resumes_from_its_checkpoint(stage: Any, tmp_path: Path) -> None:
    stores, search = stage
    tenants = ("brain-a", "brain-b")
    for tenant in tenants:
        for n in range(1, 8):
            stores.facts.put(fact(tenant, n))
        for n in range(1, 4):
            stores.pages.put(page(tenant, n))
    stores.facts.expire(tenants[0], "f_001", at=datetime.now(UTC), reason="test", actor="w")
    search.ensure_index()  # the stage's index today: empty (its documents lost)
    (old,) = search.alias_targets()
    state = StateFile(tmp_path / "state.json")
    total = sum(len(expected_docs(stores, t)) for t in tenants)

    dying = DyingClient(search.client, batches=3)
    first = OpenSearchIndex(
        search.endpoint,
        model_id=search.model_id,
        dim=search.dim,
        service="none",
        client=dying,
        prefix=search.alias.split("-docs-")[0],
    )
    with pytest.raises(Unavailable):
        Rebuild(stores, first, EMBEDDER, state, rate=0, batch=3).run()
    stopped = state.load()
    assert stopped is not None and stopped.phase == "copy" and 0 < stopped.copied
    assert search.alias_targets() == [old]  # searches still go to the old index

    counting = DyingClient(search.client, batches=-1)
    second = OpenSearchIndex(
        search.endpoint,
        model_id=search.model_id,
        dim=search.dim,
        service="none",
        client=counting,
        prefix=search.alias.split("-docs-")[0],
    )
    done = Rebuild(stores, second, EMBEDDER, state, rate=0, batch=3).run()
    assert done.phase == "done" and done.target == stopped.target
    # the second run sent only what the first had not: nothing twice, nothing left out
    assert dying.sent + counting.sent == total and counting.sent < total
    for tenant in tenants:
        assert indexed(search, search.alias, tenant) == expected_docs(stores, tenant)
    assert search.alias_targets() == [done.target] and done.left == [old]
    assert search.client.indices.exists(index=old)  # kept (no drop_old)


@pytest.mark.live_opensearch
def test_an_index_created_before_aliases_is_adopted_and_a_rebuild_can_drop_it(stage: Any, tmp_path: Path) -> None:
    stores, search = stage
    tenant = "legacy"
    for n in range(1, 4):
        stores.facts.put(fact(tenant, n))
    # the index as the adapter created it before aliases, holding one document
    legacy = index_name(search.alias.split("-docs-")[0], EMBEDDER.model_id, EMBEDDER.dim)
    assert legacy == search.index != search.alias
    search.client.indices.create(index=legacy, body=index_body(EMBEDDER.dim, replicas=0))
    search.client.index(
        index=legacy,
        id="legacy|fact:f_001",
        body={
            "doc_key": "legacy|fact:f_001",
            "tenant": tenant,
            "doc_id": "fact:f_001",
            "kind": "fact",
            "text": "kept",
            "visibility": "world",
        },
        refresh=True,
    )
    reader = OpenSearchIndex(
        search.endpoint,
        model_id=search.model_id,
        dim=search.dim,
        service="none",
        prefix=search.alias.split("-docs-")[0],
    )
    query = SearchQuery(tenant=tenant, text="kept", kinds=("fact",), k=5)
    assert [h.doc_id for h in reader.search(query).keyword] == ["fact:f_001"]  # found before the alias exists
    search.ensure_index()  # adopted: the alias now points at it, its document still found
    assert search.alias_targets() == [legacy] and indexed(search, search.alias, tenant) == {"fact:f_001"}

    done = Rebuild(stores, search, EMBEDDER, StateFile(tmp_path / "s.json"), rate=0, drop_old=True).run()
    assert search.alias_targets() == [done.target] and done.left == [legacy]
    assert not search.client.indices.exists(index=legacy)  # --drop-old
    assert indexed(search, search.alias, tenant) == {"fact:f_001", "fact:f_002", "fact:f_003"}


@pytest.mark.live_opensearch
def test_a_new_index_has_the_configured_replicas_and_is_green_on_one_node(stage: Any) -> None:
    _, search = stage
    search.ensure_index()
    (concrete,) = search.alias_targets()
    settings = search.client.indices.get_settings(index=concrete)[concrete]["settings"]["index"]
    assert settings["number_of_replicas"] == "0"
    health = search.client.cluster.health(index=concrete, wait_for_status="green")
    assert health["status"] == "green"


def test_rows_of_a_tenant_outside_the_id_grammar_are_left_out_of_the_rebuild(dynamodb_local_endpoint: str) -> None:
    """An old-scheme row (tenant `a#b`, written before keys were escaped) belongs to no caller: the
    rebuild's tenant discovery leaves it out instead of stopping on the stores' InvalidTenant."""
    stores = engines.open_stores(dynamodb_local_endpoint, engines.fresh_prefix())
    db = stores.aws.dynamodb
    stores.facts.put(fact("good-brain", 1))
    hostile = fact_to_item(fact("good-brain", 2))
    hostile.update({"pk": "a#b#f_002", "tp": "a#b", "tenant": "a#b"})
    db.put_item(TableName=stores.facts.table, Item=to_ddb(hostile))
    tables = {"facts": stores.facts.table, "pages": stores.pages.table}
    assert discover_tenants(db, tables) == {"good-brain": 1}


def test_backfill_gives_pages_written_before_name_items_theirs_once(dynamodb_local_endpoint: str) -> None:
    """D24/D35: a page stored before name items and word-prefix rows existed (its rows without the
    `N#` markers and `X#` prefix rows, no name item) is found by entity's alias/title lookup and
    its near-miss lookup only after `backfill_names`; a second run writes nothing; a page put
    today is not counted."""
    stores = engines.open_stores(dynamodb_local_endpoint, engines.fresh_prefix())
    db, tenant = stores.aws.dynamodb, "old-names"
    old = [
        Page(
            tenant=tenant,
            slug=f"people/p{n}",
            title=f"Person Number {n}",
            aliases=(f"PN{n}",),
            body="Someone.",
            created_at=T0,
            updated_at=T0 + timedelta(seconds=n),
        )
        for n in (1, 2, 3)
    ]
    for p in old:
        for row in [page_to_item(p), *derived_rows(p)]:
            if not str(row["sk"]).startswith(("N#", "X#")):
                db.put_item(TableName=stores.pages.table, Item=to_ddb(row))
    stores.pages.put(page(tenant, 9))  # a write of today: marked by its put

    def resolved() -> set[str]:
        keys = ["person number 1", "pn2", "person number 3", "place 9"]
        got = stores.pages.lookup(tenant, aliases=keys, titles=keys, slugs=[], suffix="", world_only=False)
        return {m.page.slug for m in got}

    def near(text: str) -> set[str]:
        return {h.slug for h in stores.pages.keyword(tenant, text, world_only=False, limit=5)}

    assert resolved() == {"places/p9"} and near("Person") == set() and near("Pers") == set()
    lines: list[str] = []
    assert stores.pages.backfill_names(tenant, progress=lines.append) == 3
    assert resolved() == {"people/p1", "people/p2", "people/p3", "places/p9"}
    assert near("Person") == near("Pers") == {"people/p1", "people/p2", "people/p3"}
    assert lines and "4 page(s) checked, 3 given" in lines[-1]
    assert stores.pages.backfill_names(tenant) == 0
    # the marks are the put's own: a later rename takes the page out of its old name item
    stores.pages.put(old[0].model_copy(update={"title": "Renamed Person", "updated_at": T0 + timedelta(hours=1)}))
    assert "people/p1" not in resolved()
