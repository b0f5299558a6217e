"""The local search index: FTS5 keyword arm, exact-cosine vector arm over a cached matrix
(`vector_matrix`), and the FTS query building both it and the page near-miss lookup use; the rows it
writes are `search_rows`. A hybrid search starts its cosine scan on a helper thread and runs its
keyword arm meanwhile (both release the interpreter lock); the hits are the same either way."""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from fleetmem.adapters.local.sqlite.db import Database, _chunks, _marks, tenant_key
from fleetmem.adapters.local.sqlite.fts import fold_words, partition_key
from fleetmem.adapters.local.sqlite.search_rows import (
    TermCounts,
    _bump_gen,
    _prune_tombstones,
    _put_docs,
)
from fleetmem.adapters.local.sqlite.vector_matrix import (  # noqa: F401 (tests read SPLIT_ROWS, _SCAN_HELPER here)
    _PREFETCH,
    _SCAN_HELPER,
    SPLIT_ROWS,
    _cosines,
    _Matrix,
)
from fleetmem.errors import PortError, Unavailable
from fleetmem.models import (
    SearchDoc,
    SearchHit,
    SearchHits,
    SearchQuery,
    page_docs_problem,
)

# ---------------------------------------------------------------------------------------------
# FTS query building

#: Function words dropped from keyword queries (they match nearly everything and cost time);
#: kept when a query consists of nothing else.
_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have i in is it its of on or that the this to was "
    "were what when where which who why will with".split()
)
_MAX_TERMS = 32


def query_terms(text: str) -> list[str]:
    words = list(dict.fromkeys(fold_words(text)))
    kept = [w for w in words if w not in _STOPWORDS] or words
    return kept[:_MAX_TERMS]


def _partitions(tenant: str, kinds: Sequence[str], world_only: bool) -> list[str]:
    visibilities = ("world",) if world_only else ("world", "private")
    return [partition_key(tenant, k, v) for k in kinds for v in visibilities]


def match_tokens(text: str, tenant: str, kinds: Sequence[str], world_only: bool) -> list[str]:
    """The partition tokens a query's MATCH names (whose doc counts `docs_match` may bound by)."""
    prefixes = _partitions(tenant, kinds, world_only)
    return [p + t for t in query_terms(text) for p in prefixes]


#: The keyword arm's work bound: when a query's words together occur in more docs than this (in
#: the partitions it may see), the most common words are left out of the MATCH, most common first,
#: until the rest fit (the rarest word with any match is always kept). BM25 gives such words little
#: weight, and FTS5 otherwise scores every row holding them ("person" in 20K pages). Below the bound
#: the MATCH is every word, as before.
KEYWORD_MAX_ROWS = 1000
#: In a hybrid search over at least KEYWORD_MAX_ROWS docs, a word in more than this share of the
#: docs the caller may see is left out of the keyword arm altogether (see `bound_terms`).
COMMON_SHARE = 0.25


def bound_terms(
    terms: Sequence[str], docs_with: Callable[[str], int], max_rows: int | None = None, visible: int | None = None
) -> list[str]:
    """`terms` without the most common ones while their doc counts add up to more than `max_rows`
    (default KEYWORD_MAX_ROWS). With `visible` (the docs the query may see, given only when a vector
    arm runs beside the keyword arm) and at least `max_rows` of them, a term in more than
    COMMON_SHARE of them is dropped first: for what the caller sees it is a stopword (BM25's inverse
    document frequency at most log 3), it cannot tell the docs apart, and meaning is the vector
    arm's job. That may leave no term (an empty keyword arm)."""
    max_rows = KEYWORD_MAX_ROWS if max_rows is None else max_rows
    counts = {t: docs_with(t) for t in terms}
    if visible is not None and visible >= max_rows:
        terms = [t for t in terms if counts[t] <= COMMON_SHARE * visible]
    if sum(counts[t] for t in terms) <= max_rows:
        return list(terms)
    kept, total = set(), 0
    for t in sorted(terms, key=lambda t: counts[t]):
        if counts[t] == 0 or total == 0 or total + counts[t] <= max_rows:
            kept.add(t)
            total += counts[t]
    return [t for t in terms if t in kept]


def docs_match(
    text: str,
    tenant: str,
    kinds: Sequence[str],
    world_only: bool,
    counts: dict[str, int] | None = None,
    visible: int | None = None,
) -> str | None:
    """The MATCH expression for free user text over the partitions a query may see, or None when
    the text holds no searchable word. Terms are double-quoted alphanumeric tokens, so no user
    input is ever read as FTS syntax (operators, column filters, NEAR, prefixes). With `counts`
    (docs per partition token, from `TermCounts`) the terms are bounded by `bound_terms` (`visible`:
    see there); None also when that bound leaves no term."""
    terms = query_terms(text)
    if not terms:
        return None
    prefixes = _partitions(tenant, kinds, world_only)
    if counts is not None:
        terms = bound_terms(terms, lambda t: sum(counts.get(p + t, 0) for p in prefixes), visible=visible)
        if not terms:
            return None
    return " OR ".join(f'"{p}{t}"' for t in terms for p in prefixes)


#: Words of at least this many characters also match as prefixes in near-miss lookups ("pri" ->
#: "priya"); shorter ones match whole words only (a 1-2 letter prefix matches nearly everything).
PREFIX_MIN = 3


def fts_match(text: str, tenant: str) -> str | None:
    """The MATCH expression for `page_names_fts`: any word of `text` as a word or (3+ characters)
    a word prefix, within the tenant's rows. Terms are double-quoted alphanumeric tokens (a
    prefix star is added outside the quotes), never FTS syntax."""
    terms = query_terms(text)
    if not terms:
        return None
    ors = " OR ".join(f'"{t}"*' if len(t) >= PREFIX_MIN else f'"{t}"' for t in terms)
    return f'tenant_key : "{tenant_key(tenant)}" AND ({ors})'


# ---------------------------------------------------------------------------------------------
# search index


def _unit(vector: bytes) -> np.ndarray:
    """A packed query vector as a unit-length float32 array (ValueError: malformed or zero)."""
    if len(vector) % 4 or not vector:
        raise ValueError("the query vector is malformed")
    q = np.frombuffer(vector, dtype="<f4").astype(np.float32)
    norm = float(np.linalg.norm(q))
    if not np.isfinite(norm) or norm == 0.0:
        raise ValueError("the query vector has zero length")
    q /= norm
    return q


class SqliteSearchIndex:
    write_through = True

    def __init__(self, db: Database, *, cache_bytes: int = 768 * 1024 * 1024) -> None:
        self.db = db
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[tuple[str, str, int], _Matrix] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        #: The last few queries' cosine scores over a matrix prefix: recall asks the same vector of
        #: the pages and of the facts, and both arms read the one matrix (rows [0, n) never change).
        self._scores: OrderedDict[bytes, tuple[np.ndarray, int, np.ndarray]] = OrderedDict()

    # -- writes

    def upsert(self, docs: Sequence[SearchDoc]) -> None:
        if not docs:
            return

        def run(conn: sqlite3.Connection) -> None:
            gens = {t: _bump_gen(conn, t) for t in {d.tenant for d in docs}}
            _put_docs(conn, docs, gens)

        self.db.write(run)

    def delete(self, tenant: str, doc_ids: Sequence[str]) -> None:
        ids = list(dict.fromkeys(doc_ids))
        if not ids:
            return

        def run(conn: sqlite3.Connection) -> None:
            gen = _bump_gen(conn, tenant)
            for part in _chunks(ids):
                conn.execute(f"DELETE FROM docs WHERE tenant = ? AND doc_id IN ({_marks(len(part))})", (tenant, *part))
            _prune_tombstones(conn, tenant, gen)

        self.db.write(run)

    def delete_page(self, tenant: str, slug: str) -> None:
        self.replace_page(tenant, slug, ())

    def replace_page(self, tenant: str, slug: str, docs: Sequence[SearchDoc]) -> None:
        problem = page_docs_problem(tenant, slug, docs)
        if problem:
            raise ValueError(problem)

        def run(conn: sqlite3.Connection) -> None:  # one transaction: readers see old or new
            gen = _bump_gen(conn, tenant)
            conn.execute("DELETE FROM docs WHERE tenant = ? AND slug = ? AND kind = 'chunk'", (tenant, slug))
            _put_docs(conn, docs, {tenant: gen})
            _prune_tombstones(conn, tenant, gen)

        self.db.write(run)

    # -- search

    def search(self, query: SearchQuery) -> SearchHits:
        kinds = tuple(sorted(set(query.kinds)))
        k = max(0, int(query.k))
        # only when there is a keyword arm to overlap with: otherwise the hop to a thread buys nothing
        overlap = k and kinds and match_tokens(query.text, query.tenant, kinds, query.world_only)
        scan = self._start_scan(query) if overlap else None
        try:
            keyword = self._keyword(query, kinds, k) if k and kinds else []
        finally:
            if scan is not None and not scan.cancel():
                scan.exception()  # wait; a failed scan is redone (and reported) by the vector arm
        if query.vector is None:
            return SearchHits(keyword=tuple(keyword))
        if not query.vector_model:
            return SearchHits(keyword=tuple(keyword), vector_error="the query vector names no model")
        try:
            vector = self._vector(query, kinds, k) if k and kinds else []
        except ValueError as exc:
            return SearchHits(keyword=tuple(keyword), vector_error=str(exc))
        except PortError:
            return SearchHits(keyword=tuple(keyword), vector_error="the local vector index failed")
        return SearchHits(keyword=tuple(keyword), vector=tuple(vector))

    def search_many(self, queries: Sequence[SearchQuery]) -> list[SearchHits]:
        """`search` of each query in turn: no round trip to save here (a vector asked again, as
        the facts and pages arms of one recall do, reuses its cosines)."""
        return [self.search(q) for q in queries]

    def _start_scan(self, query: SearchQuery) -> Future[None] | None:
        """The vector arm's cosine scan started on the prefetch thread, to run while the keyword arm
        runs here; None when there is no scan to do (no vector, or its scores are kept already). The
        scores land in the kept ones (`_all_scores`), where the vector arm finds them; a scan that
        fails there is done again (and its error reported) by the vector arm."""
        vector, model = query.vector, query.vector_model
        if vector is None or not model:
            return None
        with self._cache_lock:
            if vector in self._scores:
                return None

        def scan() -> None:
            q = _unit(vector)
            m = self._matrix(query.tenant, model, q.shape[0])
            if m.n:
                self._all_scores(vector, m, q)

        return _PREFETCH.submit(scan)

    def _keyword(self, query: SearchQuery, kinds: tuple[str, ...], k: int) -> list[SearchHit]:
        tokens = match_tokens(query.text, query.tenant, kinds, query.world_only)
        if not tokens:
            return []
        hybrid = query.vector is not None  # a vector arm runs beside this one
        term_counts = TermCounts.of(self.db)
        try:
            counts, visible = self.db.read(
                lambda c: (
                    term_counts.get(c, tokens),
                    term_counts.visible(c, query.tenant, kinds, query.world_only) if hybrid else None,
                )
            )
        except PortError:
            counts, visible = None, None  # no counts: the full MATCH, as without the bound
        match = docs_match(query.text, query.tenant, kinds, query.world_only, counts, visible)
        if match is None:
            return []
        sql = (
            "SELECT d.doc_id, d.kind, d.slug, d.title, d.text, d.fact_id, r.score, d.tenant, d.visibility "
            "FROM (SELECT rowid AS id, rank AS score FROM docs_fts "
            "WHERE docs_fts MATCH ? ORDER BY rank LIMIT ?) r "
            "CROSS JOIN docs d ON d.id = r.id ORDER BY r.score, d.id"
        )
        try:
            rows = self.db.all(sql, (match, k))
        except Unavailable as exc:
            if exc.reason == "busy":
                raise
            return []  # the FTS engine rejecting a query must not fail the call
        return [
            SearchHit(doc_id=r[0], kind=r[1], slug=r[2], title=r[3], text=r[4], fact_id=r[5], score=-float(r[6]))
            for r in rows
            # the partition tokens already filtered; re-checking the real columns costs nothing
            if r[7] == query.tenant and r[1] in kinds and (not query.world_only or r[8] == "world")
        ]

    def _gen(self, tenant: str) -> tuple[int, int]:
        row = self.db.one("SELECT gen, floor FROM search_gen WHERE tenant = ?", (tenant,))
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    def _matrix(self, tenant: str, model: str, dim: int) -> _Matrix:
        key = (tenant, model, dim)
        gen, floor = self._gen(tenant)
        with self._cache_lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
        if cached is not None and cached.gen == gen:
            return cached
        with self._refresh_lock:
            with self._cache_lock:
                cached = self._cache.get(key)  # another thread may have refreshed meanwhile
            gen, floor = self._gen(tenant)
            if cached is not None and cached.gen == gen:
                return cached
            matrix = None
            # a generation below the cached one: the tenant was deleted and started again; reload
            if cached is not None and floor <= cached.gen <= gen:
                base = cached
                matrix = self.db.read(lambda c: self._catch_up(c, base, tenant, model, dim))
            if matrix is None:
                matrix = self.db.read(lambda c: self._load(c, tenant, model, dim))
            with self._cache_lock:
                self._cache[key] = matrix
                self._cache.move_to_end(key)
                total = sum(m.nbytes for m in self._cache.values())
                while total > self.cache_bytes and len(self._cache) > 1:
                    _, old = self._cache.popitem(last=False)
                    total -= old.nbytes
        return matrix

    @staticmethod
    def _rows_to_arrays(rows: Sequence[Sequence[Any]], dim: int) -> tuple[np.ndarray, ...]:
        """(ids, is_fact, is_world, unit vectors) from (id, kind, visibility, vector) rows."""
        n = len(rows)
        vectors = np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").reshape(n, dim).astype(np.float32)
        if n:
            norms = np.linalg.norm(vectors, axis=1)
            norms[norms == 0] = 1.0
            vectors /= norms[:, None]
        return (
            np.fromiter((r[0] for r in rows), dtype=np.int64, count=n),
            np.fromiter((r[1] == "fact" for r in rows), dtype=bool, count=n),
            np.fromiter((r[2] == "world" for r in rows), dtype=bool, count=n),
            vectors,
        )

    @staticmethod
    def _with_capacity(gen: int, arrays: tuple[np.ndarray, ...], dim: int, spare: int) -> _Matrix:
        ids, is_fact, is_world, vectors = arrays
        n = len(ids)
        cap = n + spare
        m = _Matrix(
            gen=gen,
            n=n,
            ids=np.zeros(cap, dtype=np.int64),
            is_fact=np.zeros(cap, dtype=bool),
            is_world=np.zeros(cap, dtype=bool),
            alive=np.zeros(cap, dtype=bool),
            vectors=np.zeros((cap, dim), dtype=np.float32),
        )
        m.ids[:n], m.is_fact[:n], m.is_world[:n], m.vectors[:n] = ids, is_fact, is_world, vectors
        m.alive[:n] = True
        return m

    def _load(self, conn: sqlite3.Connection, tenant: str, model: str, dim: int) -> _Matrix:
        """Read the tenant's vectors of one model into a fresh matrix, streaming in batches so the
        peak memory stays near the matrix itself."""
        where = "WHERE tenant = ? AND vector_model = ? AND length(vector) = ?"
        args = (tenant, model, dim * 4)
        conn.execute("BEGIN")  # the generation and the rows must come from one snapshot
        try:
            row = conn.execute("SELECT gen FROM search_gen WHERE tenant = ?", (tenant,)).fetchone()
            (count,) = conn.execute(f"SELECT count(*) FROM docs {where}", args).fetchone()
            gen = 0 if row is None else int(row[0])
            empty = tuple(np.zeros((0, dim), np.float32) if a == 3 else np.zeros(0) for a in range(4))
            m = self._with_capacity(gen, empty, dim, spare=count + max(256, count // 8))
            m.n = 0
            cur = conn.execute(f"SELECT id, kind, visibility, vector FROM docs {where}", args)
            while batch := cur.fetchmany(4096):
                ids, is_fact, is_world, vectors = self._rows_to_arrays(batch, dim)
                a, b = m.n, m.n + len(batch)
                if b > len(m.ids):  # cannot happen: the count and the rows share one snapshot
                    break
                m.ids[a:b], m.is_fact[a:b], m.is_world[a:b], m.vectors[a:b] = ids, is_fact, is_world, vectors
                m.alive[a:b] = True
                m.n = b
        finally:
            conn.execute("COMMIT")
        return m

    def _catch_up(self, conn: sqlite3.Connection, m: _Matrix, tenant: str, model: str, dim: int) -> _Matrix | None:
        """Apply the rows written and deleted since `m.gen`; None when a full reload is better."""
        conn.execute("BEGIN")
        try:
            row = conn.execute("SELECT gen, floor FROM search_gen WHERE tenant = ?", (tenant,)).fetchone()
            if row is None or m.gen < int(row[1]):
                return None
            changed = conn.execute(
                "SELECT id, kind, visibility, vector, vector_model FROM docs WHERE tenant = ? AND rev > ?",
                (tenant, m.gen),
            ).fetchall()
            gone = [
                r[0] for r in conn.execute("SELECT id FROM docs_gone WHERE tenant = ? AND rev > ?", (tenant, m.gen))
            ]
        finally:
            conn.execute("COMMIT")
        fresh = [r for r in changed if r[4] == model and r[3] is not None and len(r[3]) == dim * 4]
        if len(changed) + len(gone) > max(2000, m.n // 4) or m.dead + len(changed) + len(gone) > max(1000, m.n // 4):
            return None  # many changes or many dead rows: rebuild compactly
        n = m.n
        drop = np.fromiter([r[0] for r in changed] + gone, dtype=np.int64)
        if len(drop):
            m.alive[:n][np.isin(m.ids[:n], drop)] = False
        if n + len(fresh) > len(m.ids):  # out of spare room: move to bigger buffers
            keep = tuple(a[:n] for a in (m.ids, m.is_fact, m.is_world, m.vectors))
            grown = self._with_capacity(m.gen, keep, dim, spare=max(256, n // 4 + len(fresh)))
            grown.alive[:n] = m.alive[:n]
            m = grown
        ids, is_fact, is_world, vectors = self._rows_to_arrays(fresh, dim)
        end = n + len(fresh)
        m.ids[n:end], m.is_fact[n:end], m.is_world[n:end], m.vectors[n:end] = ids, is_fact, is_world, vectors
        m.alive[n:end] = True
        return _Matrix(int(row[0]), end, m.ids, m.is_fact, m.is_world, m.alive, m.vectors)

    def _all_scores(self, key: bytes, m: _Matrix, q: np.ndarray) -> np.ndarray:
        """Cosine of `q` with rows [0, m.n) of the matrix, reused while the same vector asks again."""
        with self._cache_lock:
            hit = self._scores.get(key)
        if hit is not None and hit[0] is m.vectors and hit[1] == m.n:
            return hit[2]
        scores = _cosines(m.vectors, m.n, q)
        with self._cache_lock:
            self._scores[key] = (m.vectors, m.n, scores)
            self._scores.move_to_end(key)
            while len(self._scores) > 8:
                self._scores.popitem(last=False)
        return scores

    def _vector(self, query: SearchQuery, kinds: tuple[str, ...], k: int) -> list[SearchHit]:
        assert query.vector is not None and query.vector_model is not None
        q = _unit(query.vector)
        m = self._matrix(query.tenant, query.vector_model, q.shape[0])
        n = m.n
        if not n:
            return []
        mask = m.alive[:n].copy()
        if "fact" not in kinds:
            mask &= ~m.is_fact[:n]
        if "chunk" not in kinds:
            mask &= m.is_fact[:n]
        if query.world_only:
            mask &= m.is_world[:n]
        candidates = np.flatnonzero(mask)
        if not len(candidates):
            return []
        cand_scores = self._all_scores(query.vector, m, q)[candidates]
        if len(candidates) > k:
            top = np.argpartition(-cand_scores, k - 1)[:k]
        else:
            top = np.arange(len(candidates))
        top = top[np.argsort(-cand_scores[top], kind="stable")]
        picked = [(int(m.ids[candidates[i]]), float(cand_scores[i])) for i in top]
        ids = [p[0] for p in picked]

        def fetch(conn: sqlite3.Connection) -> dict[int, tuple[Any, ...]]:
            return {
                r[0]: r
                for r in conn.execute(
                    # rowid seeks; the tenant is checked on the rows (an index on tenant would scan)
                    "SELECT id, doc_id, kind, slug, title, text, fact_id, visibility, tenant FROM docs "
                    f"WHERE id IN ({_marks(len(ids))})",
                    ids,
                )
                if r[8] == query.tenant
            }

        rows = self.db.read(fetch)
        hits = []
        for doc_id, score in picked:
            r = rows.get(doc_id)
            if r is None or r[2] not in kinds or (query.world_only and r[7] != "world"):
                continue  # changed since the matrix was read
            hits.append(SearchHit(doc_id=r[1], kind=r[2], slug=r[3], title=r[4], text=r[5], fact_id=r[6], score=score))
        return hits

    def drop_cache(self) -> None:
        with self._cache_lock:
            self._cache.clear()
            self._scores.clear()
