"""Worker functions the SQLite multi-process tests run in child processes (importable, pytest-free)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleetmem.memory.vectors import pack
from fleetmem.models import Cursor, Fact, SearchDoc, SearchQuery

T0 = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)


def hammer(data_dir: str, worker: int, rounds: int) -> list[int]:
    """Write and read the shared store the way a CLI process does next to a running server."""
    from fleetmem.adapters.local import open_local

    stores = open_local(data_dir)
    seqs: list[int] = []
    cursor = None
    try:
        for i in range(rounds):
            seq = stores.facts.next_seq("t1")
            seqs.append(seq)
            when = T0 + timedelta(milliseconds=seq)
            stores.facts.put(
                Fact(
                    tenant="t1",
                    fact_id=f"f_{worker}_{i}",
                    seq=seq,
                    text=f"w{worker} item{i}",
                    provenance="mp",
                    client_id=f"w{worker}",
                    created_at=when,
                    entity_slug="shared/entity",
                )
            )
            vec = [0.0] * 8
            vec[worker % 8] = 1.0
            stores.search.upsert(
                [
                    SearchDoc(
                        tenant="t1",
                        doc_id=f"fact:f_{worker}_{i}",
                        kind="fact",
                        slug="",
                        title="",
                        text=f"worker{worker} round{i}",
                        updated_at=when,
                        fact_id=f"f_{worker}_{i}",
                        vector=pack(vec),
                        vector_model="mp-8",
                    )
                ]
            )
            hits = stores.search.search(
                SearchQuery(
                    tenant="t1",
                    text=f"worker{worker}",
                    kinds=("fact",),
                    vector=pack(vec),
                    vector_model="mp-8",
                )
            )
            assert any(h.doc_id == f"fact:f_{worker}_{i}" for h in hits.keyword)
            assert hits.vector_error is None
            base = cursor or Cursor(tenant="t1", client_id=f"w{worker}", session_id="s", since=when, touched_at=when)
            cursor = stores.cursors.put(
                base.model_copy(update={"since": when, "touched_at": when}),
                expected_version=None if cursor is None else cursor.version,
            )
            assert stores.fact_decisions.count_active("t1", "shared/entity", now=when + timedelta(days=1)) >= i + 1
    finally:
        stores.close()
    return seqs


def add_doc(data_dir: str, doc_id: str) -> None:
    from fleetmem.adapters.local import open_local

    stores = open_local(data_dir)
    try:
        stores.search.upsert(
            [
                SearchDoc(
                    tenant="t1",
                    doc_id=doc_id,
                    kind="chunk",
                    slug="late/page",
                    title="Late",
                    text="late arrival",
                    updated_at=T0,
                    vector=pack([0, 0, 0, 1, 0, 0, 0, 0]),
                    vector_model="mp-8",
                )
            ]
        )
    finally:
        stores.close()
