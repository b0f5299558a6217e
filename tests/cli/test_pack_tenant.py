"""`fleetmem tenant delete` on the local store: every table, checked table by table through a walk of
the schema, the keyword and vector index through the search port, the other tenants untouched."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.adapters.local.sqlite import open_local
from fleetmem.adapters.local.sqlite.db import DB_FILENAME, tenant_key
from fleetmem.adapters.local.sqlite.tenants import NOT_PER_TENANT, TENANT_TABLES
from fleetmem.memory.vectors import pack
from fleetmem.models import SearchQuery
from tests.cli.conftest import Fleetmem
from tests.cli.test_pack import seed, state


def tenant_rows(data_dir: Path, tenant: str) -> dict[str, int]:
    """Rows naming `tenant` (or its FTS key) in every table of the schema that has such a column."""
    con = sqlite3.connect(data_dir / DB_FILENAME)
    try:
        found: dict[str, int] = {}
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            columns = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
            for column, value in (("tenant", tenant), ("tenant_key", tenant_key(tenant))):
                if column in columns:
                    found[table] = con.execute(f"SELECT count(*) FROM {table} WHERE {column} = ?", (value,)).fetchone()[
                        0
                    ]
        return found
    finally:
        con.close()


def search(data_dir: Path, tenant: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Doc ids the keyword and the vector arm return for the tenant (private docs included)."""
    embedder = HashEmbedder()
    text = "alice tea acme anvils research"
    with open_local(data_dir) as stores:
        hits = stores.search.search(
            SearchQuery(
                tenant=tenant,
                text=text,
                vector=pack(embedder.embed([text])[0]),
                vector_model=embedder.model_id,
                kinds=("chunk", "fact"),
                world_only=False,
            )
        )
    return tuple(h.doc_id for h in hits.keyword), tuple(h.doc_id for h in hits.vector or ())


def test_every_table_with_tenant_rows_is_listed() -> None:
    with open_local(":memory:") as stores:
        tables = stores.db.read(
            lambda c: [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        )
        listed = {t for t, _, _ in TENANT_TABLES}
        for table in tables:
            columns = stores.db.read(lambda c, t=table: {r[1] for r in c.execute(f"PRAGMA table_info({t})")})
            if columns & {"tenant", "tenant_key"}:
                assert table in listed, f"{table} holds tenant rows but tenant delete does not list it"
            else:
                assert table in NOT_PER_TENANT or table.startswith(("docs_fts_", "page_names_fts_")), table


def test_tenant_delete_leaves_nothing_of_the_tenant_and_keeps_the_others(fm: Fleetmem) -> None:
    seed(fm, "acme")
    seed(fm, "default")
    assert fm("token", "create", "--client", "bot", "--scopes", "read,write", "--tenant", "acme").code == 0
    assert fm("delta", "--session-id", "wake", "--tenant", "acme").code == 0
    assert fm("remember", "Keyed fact", "--provenance", "t", "--idempotency-key", "k1", "--tenant", "acme").code == 0
    before = tenant_rows(fm.data_dir, "acme")
    assert all(before[t] for t in ("facts", "pages", "audit", "cursors", "clients", "idempotency", "docs")), before
    others = state(fm.data_dir, "default")
    found = search(fm.data_dir, "acme")
    assert found[0] and found[1], found  # both arms find the tenant's docs before the deletion

    dry = fm("tenant", "delete", "acme", "--dry-run", "--json")
    assert dry.code == 0 and dry.json()["rows"]["facts"] == before["facts"]
    assert fm("tenant", "delete", "acme").code == 3  # no --yes: asks, deletes nothing
    assert tenant_rows(fm.data_dir, "acme") == before

    run = fm("tenant", "delete", "acme", "--yes", "--json")
    assert run.code == 0, run.stderr
    assert run.json()["left"] == 0
    assert set(tenant_rows(fm.data_dir, "acme").values()) == {0}
    assert search(fm.data_dir, "acme") == ((), ())
    assert state(fm.data_dir, "default") == others
    again = fm("tenant", "delete", "acme", "--yes")
    assert again.code == 0 and "nothing to delete" in again.stderr


def test_a_running_server_searches_a_tenant_deleted_and_started_again_afresh(fm: Fleetmem) -> None:
    """A long-lived process (the server) keeps a vector matrix per tenant; after the tenant is
    deleted by another process and written again, its search generation starts over below the
    cached one, and the cache must reload instead of catching up from it."""
    seed(fm, "acme")
    embedder = HashEmbedder()
    text = "a brand new page about zeppelins"
    query = SearchQuery(
        tenant="acme",
        text=text,
        vector=pack(embedder.embed([text])[0]),
        vector_model=embedder.model_id,
        kinds=("chunk", "fact"),
        world_only=False,
        k=5,
    )
    with open_local(fm.data_dir) as server:
        assert server.search.search(query).vector  # the matrix is cached now
        assert fm("tenant", "delete", "acme", "--yes").code == 0
        assert fm("put-page", "notes/zeppelins", "--content", text, "--tenant", "acme").code == 0
        hits = server.search.search(query).vector or ()
    with open_local(fm.data_dir) as fresh:  # loads the matrix from the store as it is now
        expected = fresh.search.search(query).vector or ()
    assert [h.doc_id for h in expected][:1] == ["chunk:notes/zeppelins#0"]
    assert [(h.doc_id, round(h.score, 5)) for h in hits] == [(h.doc_id, round(h.score, 5)) for h in expected]
