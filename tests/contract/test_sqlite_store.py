"""Behaviour specific to the local SQLite store: several processes on one file, lock contention,
cache invalidation across processes, persistence, the maintenance API for reindexing."""

from __future__ import annotations

import multiprocessing
import sqlite3
from datetime import timedelta

import pytest
from tests.contract import sqlite_workers
from tests.contract.builders import at, doc, fact, page, unit

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.sqlite import DB_FILENAME
from fleetmem.errors import Unavailable
from fleetmem.memory.vectors import pack
from fleetmem.models import SearchQuery


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


def _spawn():
    return multiprocessing.get_context("spawn")


def test_several_processes_write_and_read_one_file_concurrently(data_dir):
    open_local(data_dir).close()
    workers, rounds = 4, 25
    with _spawn().Pool(workers) as pool:
        results = pool.starmap(sqlite_workers.hammer, [(str(data_dir), w, rounds) for w in range(workers)])
    seqs = sorted(s for r in results for s in r)
    assert seqs == list(range(1, workers * rounds + 1))
    with open_local(data_dir) as stores:
        now = at(60 * 24)
        assert stores.fact_decisions.count_active("t1", "shared/entity", now=now) == workers * rounds
        got = stores.fact_listing.by_entity("t1", "shared/entity", now=now, limit=workers * rounds)
        assert [f.seq for f in got] == list(range(workers * rounds, 0, -1))
        for w in range(workers):
            c = stores.cursors.get("t1", f"w{w}", "s", now=now)
            assert c is not None and c.version == rounds


def test_a_write_by_another_process_invalidates_the_vector_cache(data_dir):
    with open_local(data_dir) as stores:
        stores.search.upsert([doc("t1", "chunk:a/b#0", "first", vector=unit(1), vector_model="mp-8")])
        query = SearchQuery(tenant="t1", text="", vector=unit(0, 0, 0, 1), vector_model="mp-8")
        assert [h.doc_id for h in stores.search.search(query).vector] == ["chunk:a/b#0"]
        child = _spawn().Process(target=sqlite_workers.add_doc, args=(str(data_dir), "chunk:late/page#0"))
        child.start()
        child.join(60)
        assert child.exitcode == 0
        assert next(h.doc_id for h in stores.search.search(query).vector) == "chunk:late/page#0"


def test_a_held_write_lock_becomes_unavailable_after_bounded_retries(data_dir):
    with open_local(data_dir, busy_timeout_ms=20, retries=2) as stores:
        blocker = sqlite3.connect(data_dir / DB_FILENAME, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(Unavailable) as err:
                stores.facts.next_seq("t1")
            assert err.value.retry_after_seconds == 1
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert stores.facts.next_seq("t1") == 1


def test_writer_threads_of_one_process_queue_for_the_writer_instead_of_failing_busy(data_dir):
    """50 threads write at once with a 20 ms busy timeout and no retry: were they contending for
    SQLite's file lock, some would time out as `Unavailable`; on the one writer they all commit."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    writers, rounds = 50, 10
    with open_local(data_dir, busy_timeout_ms=20, retries=1) as stores:
        start = threading.Barrier(writers)

        def write(w: int) -> list[int]:
            start.wait()
            seqs = []
            for _ in range(rounds):
                seqs.append(stores.facts.next_seq("t1"))
                stores.facts.put(fact("t1", seqs[-1], entity_slug="shared/entity", created_at=at(1)))
                stores.fact_decisions.count_active("t1", "shared/entity", now=at(60))  # reads interleave
            return seqs

        with ThreadPoolExecutor(max_workers=writers) as pool:
            seqs = sorted(s for got in pool.map(write, range(writers)) for s in got)
        assert seqs == list(range(1, writers * rounds + 1))
        assert stores.fact_decisions.count_active("t1", "shared/entity", now=at(60)) == writers * rounds


def test_a_short_lock_is_waited_out_invisibly(data_dir):
    with open_local(data_dir) as stores:
        blocker = sqlite3.connect(data_dir / DB_FILENAME, isolation_level=None, check_same_thread=False)
        blocker.execute("BEGIN IMMEDIATE")
        import threading

        release = threading.Timer(0.2, lambda: blocker.execute("COMMIT"))
        release.start()
        try:
            assert stores.facts.next_seq("t1") == 1
        finally:
            release.join()
            blocker.close()


def test_data_survives_reopening(data_dir):
    with open_local(data_dir) as stores:
        stores.facts.put(fact("t1", 1, created_at=at(0).replace(microsecond=456000)))
        stores.pages.put(page("t1", "people/alice", aliases=("Ally",)))
        stores.search.upsert([doc("t1", "chunk:people/alice#0", "alice notes")])
    with open_local(data_dir) as stores:
        assert stores.facts.get("t1", "f_0001").created_at == at(0).replace(microsecond=456000)
        assert stores.pages.get("t1", "people/alice").aliases == ("Ally",)
        hits = stores.search.search(SearchQuery(tenant="t1", text="alice"))
        assert [h.doc_id for h in hits.keyword] == ["chunk:people/alice#0"]


def test_the_suffix_lookup_seeks_the_leaf_index():
    with open_local(":memory:") as stores:
        plan = stores.db.read(
            lambda c: c.execute(
                "EXPLAIN QUERY PLAN SELECT slug FROM pages p WHERE p.tenant = ? AND p.leaf = ? ORDER BY p.slug",
                ("t1", "alice"),
            ).fetchall()
        )
        assert any("pages_leaf" in str(row[-1]) for row in plan)


def test_backlinks_list_the_newest_sources_first_after_rewrites_from_the_link_indexes():
    """Newest source page first (then slug), following rewrites of the source pages; the rows stay
    in the link index and the count is a `link_groups` row (no page or link row is read for it)."""
    from fleetmem.models import Link

    with open_local(":memory:") as stores:
        pages = stores.pages
        for i in range(6):
            pages.put(page("t1", f"p/{i}", links=(Link(type="knows", target="hub"),), updated_at=at(i)))
        pages.put(page("t1", "p/1", links=(Link(type="knows", target="hub"),), updated_at=at(20)))
        pages.put(page("t1", "p/4", links=(Link(type="knows", target="hub"),), updated_at=at(3)))
        pages.put(page("t1", "p/9", links=(Link(type="knows", target="hub"),), updated_at=at(3)))
        links, count = stores.page_listing.backlinks("t1", "hub", world_only=False, limit=4)
        assert [b.source for b in links] == ["p/1", "p/5", "p/3", "p/4"]  # ties on time: by slug
        assert count == 7
        pages.put(page("t1", "p/1", links=(Link(type="knows", target="hub"),), updated_at=at(21), visibility="private"))
        assert [b.source for b in stores.page_listing.backlinks("t1", "hub", world_only=True, limit=2)[0]] == [
            "p/5",
            "p/3",
        ]
        for world_only in (True, False):
            vis = " AND source_visibility = 'world'" if world_only else ""
            for sql in (
                f"SELECT source FROM links INDEXED BY links_recent WHERE tenant = 't1' AND target = 'hub' "
                f"AND source <> target{vis} ORDER BY source_updated_at DESC, source, ord LIMIT 4",
                f"SELECT source_group, sum(pages), sum(typed) FROM link_groups WHERE tenant = 't1' "
                f"AND target = 'hub'{vis} GROUP BY source_group",
            ):
                plan = " ".join(
                    str(r[-1]) for r in stores.db.read(lambda c, q=sql: c.execute("EXPLAIN QUERY PLAN " + q).fetchall())
                )
                assert "pages" not in plan and "TEMP B-TREE" not in plan, plan
                assert "links_recent" in plan or "link_groups USING PRIMARY KEY" in plan, plan


def test_maintenance_finds_and_fills_missing_vectors():
    with open_local(":memory:") as stores:
        stores.search.upsert(
            [
                doc("t1", "chunk:a/x#0", "alpha"),
                doc("t2", "chunk:a/y#0", "beta", vector=unit(1), vector_model="old-model"),
                doc("t1", "chunk:a/z#0", "gamma", vector=unit(0, 1), vector_model="new-model"),
            ]
        )
        stores.facts.put(fact("t1", 1))
        stores.facts.put(fact("t1", 2, vector=unit(1), vector_model="new-model"))
        assert stores.maintenance.unembedded("new-model") == {"docs": 2, "facts": 1}
        todo = stores.maintenance.docs_without_vector("new-model", 10)
        assert [(d.tenant, d.doc_id, d.vector) for d in todo] == [
            ("t1", "chunk:a/x#0", None),
            ("t2", "chunk:a/y#0", None),
        ]
        assert [f.fact_id for f in stores.maintenance.facts_without_vector("new-model", 10)] == ["f_0001"]
        query = SearchQuery(tenant="t2", text="", vector=unit(0, 0, 1), vector_model="new-model")
        assert stores.search.search(query).vector == ()
        assert stores.maintenance.set_doc_vectors("new-model", [(d.tenant, d.doc_id, unit(0, 0, 1)) for d in todo]) == 2
        assert stores.maintenance.set_fact_vectors("new-model", [("t1", "f_0001", unit(0, 0, 1))]) == 1
        assert stores.maintenance.unembedded("new-model") == {"docs": 0, "facts": 0}
        assert [h.doc_id for h in stores.search.search(query).vector] == ["chunk:a/y#0"]
        assert stores.facts.get("t1", "f_0001").vector == unit(0, 0, 1)


def test_a_decision_pool_read_before_the_lock_is_read_again_when_its_facts_changed():
    """SQLite decides under the file's write lock: a pool read before it serves only while the
    entity's active facts and their embedding model are as read (two columns checked under the
    lock); a new fact, a retraction or a re-embedding (`fleetmem reindex`) since makes it read the
    pool again, so the decision meets the facts as they are."""
    ent, now = "projects/orion", at(100)
    with open_local(":memory:") as stores:
        decisions = stores.fact_decisions
        stores.facts.put(fact("t1", 1, entity_slug=ent, vector=unit(1), vector_model="old-model"))
        seen = []

        def look(current):
            seen.append(current)
            return None  # a duplicate: nothing written

        def pool():
            return decisions.decision_pool("t1", ent, now=now, limit=50)

        before = pool()
        decisions.put_decided("t1", ent, look, now=now, limit=50, pool=before)
        assert seen[-1] is before
        stores.maintenance.set_fact_vectors("new-model", [("t1", "f_0001", unit(0, 1))])
        decisions.put_decided("t1", ent, look, now=now, limit=50, pool=before)
        assert seen[-1] is not before
        assert [(f.vector, f.vector_model) for f in seen[-1].facts] == [(unit(0, 1), "new-model")]
        before = pool()
        stores.facts.put(fact("t1", 2, entity_slug=ent))
        decisions.put_decided("t1", ent, look, now=now, limit=50, pool=before)
        assert [f.fact_id for f in seen[-1].facts] == ["f_0002", "f_0001"]
        before = pool()
        assert stores.facts.expire("t1", "f_0002", at=at(50), reason="forgotten", actor="agent-a")
        decisions.put_decided("t1", ent, look, now=now, limit=50, pool=before)
        assert [f.fact_id for f in seen[-1].facts] == ["f_0001"]
        decisions.put_decided("t1", ent, look, now=at(101), limit=50, pool=pool())  # another moment
        assert seen[-1].token[2] == at(101)


def test_many_tenants_keep_separate_vector_matrices():
    with open_local(":memory:") as stores:
        for t in range(5):
            stores.search.upsert(
                [
                    doc(
                        f"t{t}",
                        f"chunk:p/{i}#0",
                        f"text {i}",
                        vector=pack([float(t), 1.0, i]),
                        vector_model="m",
                    )
                    for i in range(3)
                ]
            )
        for t in range(5):
            hits = stores.search.search(
                SearchQuery(tenant=f"t{t}", text="", vector=pack([float(t), 1.0, 2]), vector_model="m")
            )
            assert len(hits.vector) == 3 and hits.vector[0].doc_id == "chunk:p/2#0"


def test_expired_idempotency_records_are_swept(data_dir):
    from fleetmem.models import IdempotencyRecord

    with open_local(data_dir) as stores:
        store = stores.idempotency
        for i in range(store.SWEEP_EVERY):
            store.claim(
                IdempotencyRecord(
                    tenant="t1",
                    client_id="c",
                    verb="remember",
                    key=f"k{i}",
                    request_hash="h",
                    created_at=at(0),
                    expires_at=at(0) + timedelta(hours=1),
                ),
                now=at(0) if i < store.SWEEP_EVERY - 1 else at(120),
            )
        (left,) = stores.db.read(lambda c: c.execute("SELECT count(*) FROM idempotency").fetchone())
        assert left == 1


def test_the_vector_cache_catches_up_exactly_with_every_kind_of_change():
    """After each change the cached (incrementally refreshed) matrix answers exactly like a cold load."""
    import random

    rng = random.Random(5)
    with open_local(":memory:") as stores:
        index = stores.search
        live: set[str] = set()
        for step in range(450):  # enough appends to outgrow the spare buffer room
            op = rng.choice(
                ["upsert", "upsert", "upsert", "delete", "delete_page", "replace_page", "revector", "other"]
            )
            n = rng.randrange(12)
            doc_id = f"chunk:p/{n % 4}#{n}"
            vec = unit(*(rng.uniform(-1, 1) for _ in range(8)))
            if op == "upsert":
                index.upsert(
                    [
                        doc(
                            "t1",
                            doc_id,
                            f"d{n}",
                            vector=vec,
                            vector_model="m",
                            visibility=rng.choice(["world", "private"]),
                        )
                    ]
                )
                live.add(doc_id)
            elif op == "delete":
                index.delete("t1", [doc_id])
            elif op == "delete_page":
                index.delete_page("t1", f"p/{n % 4}")
            elif op == "replace_page":
                fresh = [doc("t1", f"chunk:p/{n % 4}#{j}", f"r{j}", vector=vec, vector_model="m") for j in (n, n + 12)]
                index.replace_page("t1", f"p/{n % 4}", fresh)
            elif op == "revector":
                stores.maintenance.set_doc_vectors("m", [("t1", doc_id, vec)])
            else:
                index.upsert([doc("t1", doc_id, f"d{n}", vector=vec, vector_model="other")])
            if step % 3 == 0:
                continue  # let several changes pile up between searches
            query = SearchQuery(
                tenant="t1",
                text="",
                vector=unit(*(rng.uniform(-1, 1) for _ in range(8))),
                vector_model="m",
                world_only=rng.random() < 0.5,
                k=20,
            )
            warm = index.search(query)
            index.drop_cache()
            cold = index.search(query)
            assert [(h.doc_id, round(h.score, 5)) for h in warm.vector] == [
                (h.doc_id, round(h.score, 5)) for h in cold.vector
            ]
        assert live


def test_keyword_search_folds_case_and_accents_both_ways():
    with open_local(":memory:") as stores:
        stores.search.upsert(
            [
                doc("t1", "chunk:a/cafe#0", "Le Café de Zoë", title="Café"),
                doc("t1", "chunk:a/naive#0", "a naive resume"),
            ]
        )
        for text, expected in [
            ("cafe", "chunk:a/cafe#0"),
            ("ZOE", "chunk:a/cafe#0"),
            ("naïve résumé", "chunk:a/naive#0"),
        ]:
            assert [h.doc_id for h in stores.search.search(SearchQuery(tenant="t1", text=text)).keyword] == [expected]


def test_visibility_changes_move_a_doc_between_keyword_partitions():
    with open_local(":memory:") as stores:
        stores.search.upsert([doc("t1", "chunk:a/x#0", "zebra stripes")])
        stores.search.upsert([doc("t1", "chunk:a/x#0", "zebra stripes", visibility="private")])
        world = SearchQuery(tenant="t1", text="zebra")
        assert stores.search.search(world).keyword == ()
        everyone = SearchQuery(tenant="t1", text="zebra", world_only=False)
        assert [h.doc_id for h in stores.search.search(everyone).keyword] == ["chunk:a/x#0"]


def test_a_data_directory_written_by_a_newer_schema_is_refused(tmp_path):
    import sqlite3

    from fleetmem.adapters.local import open_local
    from fleetmem.adapters.local.sqlite import SCHEMA_VERSION
    from fleetmem.errors import Unavailable

    db = sqlite3.connect(tmp_path / "fleetmem.db")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(Unavailable) as info:
        open_local(tmp_path)
    assert info.value.reason == "schema_newer"


def test_a_search_never_finds_a_page_without_chunks_while_it_is_replaced(data_dir):
    """put_page rewrites a page's chunks with `replace_page` while agents search: a reader on its
    own connection sees the old chunks or the new ones, never none (one transaction)."""
    import threading

    with open_local(data_dir) as stores:
        index = stores.search

        def chunks(round_: int) -> list:
            # two rounds' chunk sets share no doc id: every replace removes and adds chunks
            return [doc("t1", f"chunk:p/zebra#{round_ % 2 * 10 + j}", f"zebra {round_} {j}") for j in range(3)]

        index.replace_page("t1", "p/zebra", chunks(0))
        done = threading.Event()
        misses: list[int] = []
        searches = [0]

        def reader() -> None:
            while not done.is_set():
                hits = index.search(SearchQuery(tenant="t1", text="zebra", k=10)).keyword
                searches[0] += 1
                if not [h for h in hits if h.slug == "p/zebra"]:
                    misses.append(searches[0])

        thread = threading.Thread(target=reader)
        thread.start()
        try:
            for round_ in range(1, 400):
                index.replace_page("t1", "p/zebra", chunks(round_))
        finally:
            done.set()
            thread.join()
        assert searches[0] > 0 and misses == []
        final = index.search(SearchQuery(tenant="t1", text="zebra", k=10)).keyword
        assert sorted(h.doc_id for h in final) == [f"chunk:p/zebra#{10 + j}" for j in range(3)]


@pytest.mark.parametrize("path", ["file", ":memory:"])
def test_close_waits_for_a_write_another_thread_is_running_then_refuses_new_ones(tmp_path, path):
    """Closing a connection another thread is stepping on is undefined in SQLite's C API (it
    crashed the process once: a background token-use write racing a shutdown). `close` waits."""
    import threading

    from fleetmem.adapters.local.sqlite.db import Database

    db = Database(str(tmp_path / "x.db") if path == "file" else ":memory:")
    db.run("CREATE TABLE t (v INTEGER)")
    inside, release = threading.Event(), threading.Event()
    outcome: list[object] = []

    def slow_write(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        inside.set()
        release.wait(10)
        conn.execute("INSERT INTO t VALUES (2)")
        return "written"

    writer = threading.Thread(target=lambda: outcome.append(db.write(slow_write)))
    writer.start()
    assert inside.wait(10)
    closer = threading.Thread(target=db.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive(), "close returned while a write was running"
    release.set()
    writer.join(10)
    closer.join(10)
    assert not closer.is_alive()
    assert outcome == ["written"]
    with pytest.raises(Unavailable) as info:
        db.one("SELECT count(*) FROM t")
    assert info.value.reason == "closed"
    if path == "file":
        check = sqlite3.connect(tmp_path / "x.db")
        assert check.execute("SELECT count(*) FROM t").fetchone()[0] == 2
        check.close()
