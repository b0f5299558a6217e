"""The search tables the local index writes and reads: doc rows, the per-tenant search generation and
the tombstones the vector cache catches up from, and the keyword vocabulary's cached counts."""

from __future__ import annotations

import sqlite3
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any, ClassVar

from fleetmem.adapters.local.sqlite.db import _chunks, _increment, _marks, dt_of, ms, row_model
from fleetmem.models import (
    SearchDoc,
)

#: how many generations of tombstones are kept for incremental vector cache refreshes
TOMBSTONE_GENERATIONS = 5000


def _bump_gen(conn: sqlite3.Connection, tenant: str) -> int:
    """Start a new search generation for `tenant` (call first in the write transaction)."""
    return _increment(conn, "search_gen", "gen", {"tenant": tenant})


def _put_docs(conn: sqlite3.Connection, docs: Sequence[SearchDoc], gens: dict[str, int]) -> None:
    """Insert or update `docs` at their tenant's new generation (`gens`, from `_bump_gen`)."""
    conn.executemany(
        "INSERT INTO docs (tenant, doc_id, kind, slug, title, text, visibility, fact_id, "
        "updated_at, vector, vector_model, rev) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (tenant, doc_id) DO UPDATE SET kind = excluded.kind, "
        "slug = excluded.slug, title = excluded.title, text = excluded.text, "
        "visibility = excluded.visibility, fact_id = excluded.fact_id, "
        "updated_at = excluded.updated_at, "
        "vector = excluded.vector, vector_model = excluded.vector_model, rev = excluded.rev",
        [
            (
                d.tenant,
                d.doc_id,
                d.kind,
                d.slug,
                d.title,
                d.text,
                d.visibility,
                d.fact_id,
                ms(d.updated_at),
                d.vector if d.vector_model else None,
                d.vector_model if d.vector else None,
                gens[d.tenant],
            )
            for d in docs
        ],
    )


def _prune_tombstones(conn: sqlite3.Connection, tenant: str, gen: int) -> None:
    floor = gen - TOMBSTONE_GENERATIONS
    if floor > 0 and gen % 100 == 0:
        conn.execute("DELETE FROM docs_gone WHERE tenant = ? AND rev <= ?", (tenant, floor))
        conn.execute("UPDATE search_gen SET floor = ? WHERE tenant = ?", (floor, tenant))


_DOC_COLS = "tenant, doc_id, kind, slug, title, text, visibility, fact_id, updated_at, vector, vector_model"


_doc_row = row_model(SearchDoc, _DOC_COLS, updated_at=dt_of)


def _doc_of(r: Sequence[Any], *, with_vector: bool = True) -> SearchDoc:
    return _doc_row(r if with_vector else (*r[:9], None, None))


class TermCounts:
    """Docs per keyword token (FTS5 vocab), cached per database for `TTL` seconds: the counts only
    steer which common words the keyword arm leaves out, so a slightly stale count is harmless."""

    TTL = 30.0
    MAX_ENTRIES = 50_000
    _all: ClassVar[weakref.WeakKeyDictionary[object, TermCounts]] = weakref.WeakKeyDictionary()
    _all_lock = threading.Lock()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[int, float]] = {}
        self._visible: dict[tuple[str, tuple[str, ...], bool], tuple[int, float]] = {}

    @classmethod
    def of(cls, db: object) -> TermCounts:
        with cls._all_lock:
            counts = cls._all.get(db)
            if counts is None:
                counts = cls._all[db] = cls()
            return counts

    def get(self, conn: sqlite3.Connection, tokens: Sequence[str]) -> dict[str, int]:
        now = time.monotonic()
        with self._lock:
            out = {t: v[0] for t in tokens if (v := self._counts.get(t)) and now - v[1] < self.TTL}
        missing = [t for t in dict.fromkeys(tokens) if t not in out]
        if missing:
            conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fm_docs_vocab USING fts5vocab(main, docs_fts, row)")
            found: dict[str, int] = {}
            for part in _chunks(missing):
                sql = f"SELECT term, doc FROM temp.fm_docs_vocab WHERE term IN ({_marks(len(part))})"
                found.update(conn.execute(sql, tuple(part)).fetchall())
            with self._lock:
                if len(self._counts) > self.MAX_ENTRIES:
                    self._counts.clear()
                for t in missing:
                    out[t] = int(found.get(t, 0))
                    self._counts[t] = (out[t], now)
        return out

    def visible(self, conn: sqlite3.Connection, tenant: str, kinds: Sequence[str], world_only: bool) -> int:
        """How many docs of these kinds (world ones only, or all) the tenant holds (cached like the
        term counts)."""
        visibilities = ("world",) if world_only else ("world", "private")
        key = (tenant, tuple(sorted(kinds)), world_only)
        now = time.monotonic()
        with self._lock:
            hit = self._visible.get(key)
            if hit and now - hit[1] < self.TTL:
                return hit[0]
        sql = (
            f"SELECT count(*) FROM docs WHERE tenant = ? AND kind IN ({_marks(len(kinds))}) "
            f"AND visibility IN ({_marks(len(visibilities))})"
        )
        n = int(conn.execute(sql, (tenant, *kinds, *visibilities)).fetchone()[0])
        with self._lock:
            if len(self._visible) > self.MAX_ENTRIES:
                self._visible.clear()
            self._visible[key] = (n, now)
        return n
