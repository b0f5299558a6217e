"""A data directory written by schema 1 (before D14 change sequences) keeps working: opening it
migrates to schema 2, numbers the existing pages and facts in their old delta order, and a session
cursor from before the upgrade resumes from its (since, slug) without loss or re-delivery.

The schema-1 file is made from a current one by removing exactly what schemas 2 and 3 added (the
change_seq columns, their indexes, the counter table and the cursor positions; the source columns
and indexes of the links table) and setting user_version back — the layout the earlier releases
created. A schema-2 data directory is migrated to schema 3: every link row gets its source page's
updated_at and visibility, and backlinks read from the new indexes stay correct.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.contract.builders import at, page

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.adapters.local.sqlite import DB_FILENAME, SCHEMA_VERSION
from fleetmem.memory.verbs import delta, put_page
from fleetmem.models import Caller, Fact, Link
from fleetmem.ports import CallContext, Deps

CTX = CallContext("t")
CALLER = Caller(tenant="t1", client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)


def _deps(data: Path, clock) -> tuple[Deps, object]:
    stores = open_local(data)
    return Deps.over(stores, clock=clock, ids=SortableIds(), llm=None, embedder=None), stores


def _downgrade_to_schema_2(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.executescript(
            """
            DROP TRIGGER links_groups_ai;
            DROP TRIGGER links_groups_ad;
            DROP TRIGGER links_groups_au;
            DROP TABLE link_groups;
            DROP INDEX links_group;
            ALTER TABLE links DROP COLUMN source_group;
            ALTER TABLE links DROP COLUMN first_to_target;
            DROP INDEX links_recent;
            ALTER TABLE links DROP COLUMN source_updated_at;
            ALTER TABLE links DROP COLUMN source_visibility;
            CREATE INDEX links_target ON links (tenant, target, source);
            PRAGMA user_version = 2;
            """
        )
    finally:
        conn.close()


def _downgrade_to_schema_1(path: Path) -> None:
    _downgrade_to_schema_2(path)
    conn = sqlite3.connect(path)
    try:
        conn.executescript(
            """
            DROP INDEX pages_change;
            DROP INDEX facts_change;
            ALTER TABLE pages DROP COLUMN change_seq;
            ALTER TABLE facts DROP COLUMN change_seq;
            ALTER TABLE cursors DROP COLUMN page_seq;
            ALTER TABLE cursors DROP COLUMN fact_seq;
            DROP TABLE change_seq;
            PRAGMA user_version = 1;
            """
        )
    finally:
        conn.close()


def _fact(deps: Deps, text: str) -> None:
    deps.facts.put(
        Fact(
            tenant="t1",
            fact_id=deps.ids.new_id("f_"),
            seq=deps.facts.next_seq("t1"),
            text=text,
            provenance="test",
            client_id="agent-a",
            created_at=deps.clock.now(),
        )
    )


def test_a_schema_1_data_dir_is_migrated_and_an_old_session_cursor_resumes(tmp_path, clock):
    data = tmp_path / "data"
    deps, stores = _deps(data, clock)
    delta.run(deps, CALLER, delta.DeltaParams(session_id="hb"), CTX)
    for slug in ("p/one", "p/two", "p/three"):
        clock.advance(seconds=1)
        put_page.run(deps, CALLER, put_page.PutPageParams(slug=slug, content="Body."), CTX)
        _fact(deps, f"fact about {slug}")
    # a budget whose text holds the frame and one page line, not two
    first = delta.run(deps, CALLER, delta.DeltaParams(session_id="hb", budget_tokens=82), CTX).body
    assert [p["slug"] for p in first["pages"]] == ["p/one"]  # the rest waits behind the cursor
    stores.close()
    _downgrade_to_schema_1(data / DB_FILENAME)
    conn = sqlite3.connect(data / DB_FILENAME)
    assert conn.execute("PRAGMA user_version").fetchone() == (1,)
    conn.close()

    deps, stores = _deps(data, clock)  # opening migrates
    try:
        conn = sqlite3.connect(data / DB_FILENAME)
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert conn.execute("SELECT slug, change_seq FROM pages ORDER BY change_seq").fetchall() == [
            ("p/one", 1),
            ("p/two", 2),
            ("p/three", 3),
        ]
        conn.close()
        rest = delta.run(deps, CALLER, delta.DeltaParams(session_id="hb"), CTX).body
        assert [p["slug"] for p in rest["pages"]] == ["p/two", "p/three"]  # none lost, none again
        assert {f["fact"] for f in rest["facts"]} >= {"fact about p/two", "fact about p/three"}
        clock.advance(seconds=1)
        put_page.run(deps, CALLER, put_page.PutPageParams(slug="p/four", content="Body."), CTX)
        _fact(deps, "a fact after the upgrade")
        after = delta.run(deps, CALLER, delta.DeltaParams(session_id="hb"), CTX).body
        assert [p["slug"] for p in after["pages"]] == ["p/four"]
        assert [f["fact"] for f in after["facts"]] == ["a fact after the upgrade"]
        assert deps.page_feed.changed_after("t1", seq=3, world_only=True, limit=5)[0][0] == 4  # counter continues
    finally:
        stores.close()


def test_a_schema_2_data_dir_is_migrated_and_backlinks_stay_ordered_and_counted(tmp_path, clock):
    data = tmp_path / "data"
    deps, stores = _deps(data, clock)
    for i, (slug, vis) in enumerate((("p/a", "world"), ("p/b", "private"), ("p/c", "world"))):
        stores.pages.put(page("t1", slug, links=(Link(type="knows", target="hub"),), visibility=vis, updated_at=at(i)))
    before_all = deps.page_listing.backlinks("t1", "hub", world_only=False, limit=10)
    before_world = deps.page_listing.backlinks("t1", "hub", world_only=True, limit=10)
    stores.close()
    _downgrade_to_schema_2(data / DB_FILENAME)
    conn = sqlite3.connect(data / DB_FILENAME)
    assert conn.execute("PRAGMA user_version").fetchone() == (2,)
    assert "source_updated_at" not in {r[1] for r in conn.execute("PRAGMA table_info(links)")}
    conn.close()

    deps, stores = _deps(data, clock)  # opening migrates
    try:
        conn = sqlite3.connect(data / DB_FILENAME)
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        rows = conn.execute(
            "SELECT l.source, l.source_updated_at = p.updated_at, l.source_visibility = p.visibility "
            "FROM links l JOIN pages p ON p.tenant = l.tenant AND p.slug = l.source ORDER BY l.source"
        ).fetchall()
        assert rows == [("p/a", 1, 1), ("p/b", 1, 1), ("p/c", 1, 1)]
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'links_target'").fetchall() == []
        conn.close()
        links, count = deps.page_listing.backlinks("t1", "hub", world_only=False, limit=10)
        assert [b.source for b in links] == ["p/c", "p/b", "p/a"]  # newest source first
        assert (links, count) == before_all and count == 3
        assert deps.page_listing.backlinks("t1", "hub", world_only=True, limit=10) == before_world
        assert [b.source for b in before_world[0]] == ["p/c", "p/a"] and before_world[1] == 2
    finally:
        stores.close()
