"""Every storage port over ONE SQLite file (`<data_dir>/fleetmem.db`), plus the local search index.

Layout and rules:
- WAL mode, `busy_timeout`, `BEGIN IMMEDIATE` for every write transaction and a bounded retry on
  SQLITE_BUSY, so the server (threads) and CLI commands (other processes) can share the file.
  "database is locked" never reaches a caller: after the retries it becomes `Unavailable`.
- One connection per thread for files; ":memory:" uses one connection behind a lock (an in-memory
  database exists only inside its connection).
- Datetimes are stored as integer epoch milliseconds: exact round-trips at wire precision and
  correct ordering. They come back as aware UTC.
- Every key and every query includes the tenant; a foreign id is indistinguishable from a missing one.
- sqlite3 errors are translated into `fleetmem.errors` port errors in `_translate` only.
- Search: FTS5 (bm25, title weighted) for the keyword arm; float32 BLOB vectors tagged with their
  model for the vector arm, compared by exact cosine in numpy over a per-(tenant, model) matrix
  that is loaded lazily and cached until that tenant's search generation changes (the generation
  row is bumped in the same transaction as every index write, so writes by other processes
  invalidate the cache too).
"""

from __future__ import annotations

import builtins
import json
import os
import random
import re
import sqlite3
import threading
import time
import unicodedata
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from hashlib import blake2b
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

from fleetmem.errors import Conflict, NotFound, PortError, TooLarge, Unavailable
from fleetmem.memory.slugs import normalize_alias
from fleetmem.models import (
    AuditEvent,
    Backlink,
    ClientRecord,
    Cursor,
    Fact,
    IdempotencyRecord,
    Link,
    Page,
    PageHead,
    PageMatch,
    SearchDoc,
    SearchHit,
    SearchHits,
    SearchQuery,
    TimelineEntry,
)
from fleetmem.protocol import MENTION_LINK_TYPE, SESSION_IDLE_DAYS, SESSIONS_PER_CLIENT
from fleetmem.timefmt import to_ms

T = TypeVar("T")

DB_FILENAME = "fleetmem.db"
SCHEMA_VERSION = 2  # 2: D14 change sequences (pages/facts change_seq, cursors page_seq/fact_seq)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_IN_CHUNK = 400  # bound on host parameters per IN (...) list

# ---------------------------------------------------------------------------------------------
# helpers


def ms(dt: datetime) -> int:
    """Aware (or naive = UTC) datetime -> integer epoch milliseconds, exactly."""
    return (to_ms(dt) - _EPOCH) // _MS


def ms_opt(dt: datetime | None) -> int | None:
    return None if dt is None else ms(dt)


def dt_of(value: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=value)


def dt_opt(value: int | None) -> datetime | None:
    return None if value is None else dt_of(value)


def leaf_of(slug: str) -> str | None:
    """Last path segment of a nested slug; None for a top-level slug (it has no "/<leaf>" suffix)."""
    return slug.rsplit("/", 1)[1] if "/" in slug else None


def tenant_key(tenant: str) -> str:
    """The FTS token standing for a tenant: alphanumeric, so no tokenizer can split or merge it."""
    return "t" + blake2b(tenant.encode("utf-8"), digest_size=16).hexdigest()


def _chunks(items: Sequence[T], n: int = _IN_CHUNK) -> Iterator[Sequence[T]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _marks(n: int) -> str:
    return ",".join("?" * n)


_BUSY_MARKERS = ("database is locked", "database is busy", "database table is locked")


def _is_busy(exc: BaseException) -> bool:
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return True
    text = str(exc).lower()
    return any(m in text for m in _BUSY_MARKERS)


def _translate(exc: sqlite3.Error) -> PortError:
    """The one place sqlite3 errors become port errors. Messages never carry SQL or values."""
    if _is_busy(exc):
        return Unavailable("the local store is busy", retry_after_seconds=1, reason="busy")
    if isinstance(exc, sqlite3.IntegrityError):
        return Conflict("the item already exists or changed")
    if isinstance(exc, sqlite3.DataError) or "too big" in str(exc).lower():
        return TooLarge("the item is too large for the local store")
    text = str(exc).lower()
    if "disk is full" in text or "disk i/o" in text:
        return Unavailable("the local store cannot write (disk)", reason="disk")
    if "readonly" in text or "unable to open" in text:
        return Unavailable("the local store cannot be opened for writing", reason="readonly")
    return Unavailable("the local store failed", reason="sqlite")


# ---------------------------------------------------------------------------------------------
# schema

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE IF NOT EXISTS fact_seq (tenant TEXT PRIMARY KEY, seq INTEGER NOT NULL);

CREATE TABLE IF NOT EXISTS facts (
  tenant TEXT NOT NULL, fact_id TEXT NOT NULL, seq INTEGER NOT NULL, text TEXT NOT NULL,
  kind TEXT NOT NULL, entity_slug TEXT, provenance TEXT NOT NULL, visibility TEXT NOT NULL,
  session_id TEXT, client_id TEXT NOT NULL, created_at INTEGER NOT NULL, valid_until INTEGER,
  expired_at INTEGER, expired_reason TEXT, expired_by TEXT, superseded_by TEXT, supersedes TEXT,
  vector BLOB, vector_model TEXT, change_seq INTEGER NOT NULL DEFAULT 0,
  UNIQUE (tenant, fact_id)
);
CREATE INDEX IF NOT EXISTS facts_entity ON facts (tenant, entity_slug, created_at, seq);
CREATE INDEX IF NOT EXISTS facts_session ON facts (tenant, session_id, created_at, seq);
CREATE INDEX IF NOT EXISTS facts_created ON facts (tenant, created_at, seq);
CREATE INDEX IF NOT EXISTS facts_change ON facts (tenant, change_seq);

CREATE TABLE IF NOT EXISTS pages (
  tenant TEXT NOT NULL, slug TEXT NOT NULL, leaf TEXT, title TEXT NOT NULL, title_lc TEXT NOT NULL,
  type TEXT, aliases TEXT NOT NULL, summary TEXT, visibility TEXT NOT NULL, body TEXT NOT NULL,
  links TEXT NOT NULL, timeline TEXT NOT NULL, frontmatter TEXT NOT NULL,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, last_retrieved_at INTEGER, author TEXT,
  change_seq INTEGER NOT NULL DEFAULT 0,
  UNIQUE (tenant, slug)
);
CREATE INDEX IF NOT EXISTS pages_leaf ON pages (tenant, leaf, slug);
CREATE INDEX IF NOT EXISTS pages_title ON pages (tenant, title_lc, slug);
CREATE INDEX IF NOT EXISTS pages_updated ON pages (tenant, updated_at, slug);
CREATE INDEX IF NOT EXISTS pages_type ON pages (tenant, type, slug);
CREATE INDEX IF NOT EXISTS pages_change ON pages (tenant, change_seq);

-- D14: per-tenant commit-ordered change counters ('page', 'fact'), bumped inside each write
CREATE TABLE IF NOT EXISTS change_seq (
  tenant TEXT NOT NULL, kind TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (tenant, kind)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS aliases (
  tenant TEXT NOT NULL, alias TEXT NOT NULL, slug TEXT NOT NULL, PRIMARY KEY (tenant, alias, slug)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS aliases_slug ON aliases (tenant, slug);

CREATE TABLE IF NOT EXISTS links (
  tenant TEXT NOT NULL, source TEXT NOT NULL, ord INTEGER NOT NULL, target TEXT NOT NULL,
  type TEXT NOT NULL, context TEXT, PRIMARY KEY (tenant, source, ord)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS links_target ON links (tenant, target, source);

CREATE TABLE IF NOT EXISTS timeline (
  tenant TEXT NOT NULL, slug TEXT NOT NULL, ord INTEGER NOT NULL, date TEXT NOT NULL,
  text TEXT NOT NULL, PRIMARY KEY (tenant, slug, ord)
) WITHOUT ROWID;

CREATE VIRTUAL TABLE IF NOT EXISTS page_names_fts USING fts5 (
  tenant_key, names, tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TABLE IF NOT EXISTS cursors (
  tenant TEXT NOT NULL, client_id TEXT NOT NULL, session_id TEXT NOT NULL, since INTEGER NOT NULL,
  slug TEXT NOT NULL, touched_at INTEGER NOT NULL, incomplete_streak INTEGER NOT NULL,
  version INTEGER NOT NULL, page_seq INTEGER, fact_seq INTEGER,
  PRIMARY KEY (tenant, client_id, session_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS cursors_touched ON cursors (tenant, client_id, touched_at);

CREATE TABLE IF NOT EXISTS clients (
  token_hash TEXT PRIMARY KEY, token_id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL,
  client_id TEXT NOT NULL, scopes TEXT NOT NULL, created_at INTEGER NOT NULL, revoked_at INTEGER
);
CREATE INDEX IF NOT EXISTS clients_tenant ON clients (tenant, created_at);

CREATE TABLE IF NOT EXISTS idempotency (
  tenant TEXT NOT NULL, client_id TEXT NOT NULL, verb TEXT NOT NULL, key TEXT NOT NULL,
  request_hash TEXT NOT NULL, result TEXT, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
  PRIMARY KEY (tenant, client_id, verb, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idempotency_expires ON idempotency (expires_at);

CREATE TABLE IF NOT EXISTS audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL, subject TEXT NOT NULL,
  action TEXT NOT NULL, actor TEXT NOT NULL, at INTEGER NOT NULL, reason TEXT, provenance TEXT,
  detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_subject ON audit (tenant, subject, at, id);

CREATE TABLE IF NOT EXISTS docs (
  id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, doc_id TEXT NOT NULL,
  kind TEXT NOT NULL, slug TEXT NOT NULL, title TEXT NOT NULL, text TEXT NOT NULL,
  visibility TEXT NOT NULL, fact_id TEXT, updated_at INTEGER NOT NULL, vector BLOB, vector_model TEXT,
  rev INTEGER NOT NULL DEFAULT 0,
  UNIQUE (tenant, doc_id)
);
CREATE INDEX IF NOT EXISTS docs_rev ON docs (tenant, rev);
CREATE INDEX IF NOT EXISTS docs_slug ON docs (tenant, slug, kind);
CREATE INDEX IF NOT EXISTS docs_model ON docs (tenant, vector_model);

-- Contentless keyword index. Every word is indexed as a token prefixed with the key of its
-- (tenant, kind, visibility) partition (`fm_fts_terms`, registered on every connection), so a
-- query names only tokens of the partitions it may see: filtering costs nothing, another
-- tenant's documents are never even candidates, and document frequencies are per partition.
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5 (
  title, text, content = '', tokenize = 'unicode61 remove_diacritics 0'
);
CREATE TRIGGER IF NOT EXISTS docs_ai AFTER INSERT ON docs BEGIN
  INSERT INTO docs_fts (rowid, title, text) VALUES (
    new.id, fm_fts_terms(new.tenant, new.kind, new.visibility, new.title),
    fm_fts_terms(new.tenant, new.kind, new.visibility, new.text));
END;
CREATE TRIGGER IF NOT EXISTS docs_ad AFTER DELETE ON docs BEGIN
  INSERT INTO docs_fts (docs_fts, rowid, title, text) VALUES (
    'delete', old.id, fm_fts_terms(old.tenant, old.kind, old.visibility, old.title),
    fm_fts_terms(old.tenant, old.kind, old.visibility, old.text));
END;
CREATE TRIGGER IF NOT EXISTS docs_au AFTER UPDATE OF tenant, kind, visibility, title, text ON docs BEGIN
  INSERT INTO docs_fts (docs_fts, rowid, title, text) VALUES (
    'delete', old.id, fm_fts_terms(old.tenant, old.kind, old.visibility, old.title),
    fm_fts_terms(old.tenant, old.kind, old.visibility, old.text));
  INSERT INTO docs_fts (rowid, title, text) VALUES (
    new.id, fm_fts_terms(new.tenant, new.kind, new.visibility, new.title),
    fm_fts_terms(new.tenant, new.kind, new.visibility, new.text));
END;

-- Vector cache validity. Every write transaction on a tenant's docs first bumps `gen` and stamps
-- the rows it writes with `rev = gen`; deleted rows leave a tombstone at that gen. A cache built
-- at gen g catches up by reading rows and tombstones with rev > g. Tombstones at or below
-- `floor` were pruned: a cache older than `floor` reloads in full.
CREATE TABLE IF NOT EXISTS search_gen (
  tenant TEXT PRIMARY KEY, gen INTEGER NOT NULL, floor INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS docs_gone (tenant TEXT NOT NULL, id INTEGER NOT NULL, rev INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS docs_gone_rev ON docs_gone (tenant, rev);
CREATE TRIGGER IF NOT EXISTS docs_gone_ad AFTER DELETE ON docs BEGIN
  INSERT INTO docs_gone (tenant, id, rev)
  VALUES (old.tenant, old.id, (SELECT gen FROM search_gen WHERE tenant = old.tenant));
END;
"""


# ---------------------------------------------------------------------------------------------
# connection management


class Database:
    """Connections, transactions, retries and error translation for one SQLite file."""

    def __init__(self, path: str, *, busy_timeout_ms: int = 5000, retries: int = 6) -> None:
        self.path = path
        self.memory = path == ":memory:"
        self.busy_timeout_ms = busy_timeout_ms
        self.retries = retries
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._memory_lock = threading.RLock()
        self._closed = False
        self._shared: sqlite3.Connection | None = None
        if self.memory:
            self._shared = self._connect()
        self._init_schema()

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,  # explicit BEGIN IMMEDIATE / COMMIT
                check_same_thread=False,
                timeout=self.busy_timeout_ms / 1000,
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            if not self.memory:
                self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
                conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA temp_store = MEMORY")
            conn.create_function("fm_fts_terms", 4, fts_terms, deterministic=True)
        except sqlite3.Error as exc:
            raise _translate(exc) from None
        with self._all_lock:
            self._all.append(conn)
        return conn

    def _retry(self, fn: Callable[[], T]) -> T:
        for attempt in range(self.retries):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or attempt == self.retries - 1:
                    raise
                time.sleep(min(0.5, 0.01 * 2**attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        if self._closed:
            raise Unavailable("the local store is closed", reason="closed")
        if self._shared is not None:
            with self._memory_lock:
                yield self._shared
            return
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        yield conn

    def _init_schema(self) -> None:
        def create(conn: sqlite3.Connection) -> None:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version > SCHEMA_VERSION:
                # Never guess at a layout we do not know: a newer release wrote this file.
                raise Unavailable(
                    f"this data directory uses store schema {version}; this fleetmem reads schema "
                    f"{SCHEMA_VERSION} — upgrade fleetmem or point --data-dir elsewhere",
                    reason="schema_newer",
                )
            if version == SCHEMA_VERSION:
                return
            if version == 1:
                _migrate_1_to_2(conn)
            for stmt in _split_script(_SCHEMA):
                conn.execute(stmt)
            if version == 0:
                conn.execute("INSERT INTO docs_fts (docs_fts, rank) VALUES ('rank', 'bm25(3.0, 1.0)')")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

        self.write(create)

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run read-only statements (each sees the latest committed state)."""
        for attempt in range(self.retries):
            with self._conn() as conn:
                try:
                    return fn(conn)
                except sqlite3.Error as exc:
                    if _is_busy(exc) and attempt < self.retries - 1:
                        self._backoff(attempt)
                        continue
                    raise _translate(exc) from None
        raise Unavailable("the local store is busy", retry_after_seconds=1, reason="busy")

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` inside one `BEGIN IMMEDIATE` transaction; retried as a whole when busy. Port
        errors raised by `fn` (e.g. Conflict) roll the transaction back and propagate."""
        for attempt in range(self.retries):
            with self._conn() as conn:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as exc:
                    if _is_busy(exc) and attempt < self.retries - 1:
                        self._backoff(attempt)
                        continue
                    raise _translate(exc) from None
                try:
                    result = fn(conn)
                    conn.execute("COMMIT")
                    return result
                except BaseException as exc:
                    _rollback(conn)
                    if isinstance(exc, sqlite3.Error):
                        if _is_busy(exc) and attempt < self.retries - 1:
                            self._backoff(attempt)
                            continue
                        raise _translate(exc) from None
                    raise
        raise Unavailable("the local store is busy", retry_after_seconds=1, reason="busy")

    @staticmethod
    def _backoff(attempt: int) -> None:
        time.sleep(min(0.5, 0.01 * 2**attempt) * (0.5 + random.random()))

    def close(self) -> None:
        self._closed = True
        with self._all_lock:
            conns, self._all = self._all, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:
                pass


def _rollback(conn: sqlite3.Connection) -> None:
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2 (D14), inside the schema transaction: add the change-sequence columns and
    number the existing rows per tenant in their old delta order — pages by (updated_at, slug),
    facts by (created_at, seq) — so a session cursor from before the upgrade resumes from its
    (since, slug) without loss. The counters start after the last number given."""
    conn.execute("ALTER TABLE pages ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE facts ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE cursors ADD COLUMN page_seq INTEGER")
    conn.execute("ALTER TABLE cursors ADD COLUMN fact_seq INTEGER")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS change_seq (tenant TEXT NOT NULL, kind TEXT NOT NULL, "
        "seq INTEGER NOT NULL, PRIMARY KEY (tenant, kind)) WITHOUT ROWID"
    )
    for table, kind, order in (("pages", "page", "updated_at, slug"), ("facts", "fact", "created_at, seq")):
        counters: dict[str, int] = {}
        updates: list[tuple[int, int]] = []
        for tenant, rowid in conn.execute(f"SELECT tenant, rowid FROM {table} ORDER BY tenant, {order}"):
            counters[tenant] = counters.get(tenant, 0) + 1
            updates.append((counters[tenant], rowid))
        conn.executemany(f"UPDATE {table} SET change_seq = ? WHERE rowid = ?", updates)
        conn.executemany(
            "INSERT INTO change_seq (tenant, kind, seq) VALUES (?, ?, ?)",
            [(tenant, kind, n) for tenant, n in counters.items()],
        )


def _next_change(conn: sqlite3.Connection, tenant: str, kind: str) -> int:
    """D14: the tenant's next change number of `kind`, inside the caller's write transaction.
    Writes hold the database lock from BEGIN IMMEDIATE to COMMIT, so numbers commit in order."""
    row = conn.execute(
        "INSERT INTO change_seq (tenant, kind, seq) VALUES (?, ?, 1) "
        "ON CONFLICT (tenant, kind) DO UPDATE SET seq = seq + 1 RETURNING seq",
        (tenant, kind),
    ).fetchone()
    return int(row[0])


def _change_floor(
    conn: sqlite3.Connection, tenant: str, kind: str, min_sql: str | None, args: Sequence[Any]
) -> int:
    """min(counter, smallest matching change_seq - 1); the counter is read first, so a write that
    commits between the two reads has a number above it. No `min_sql`: the counter."""
    row = conn.execute("SELECT seq FROM change_seq WHERE tenant = ? AND kind = ?", (tenant, kind)).fetchone()
    top = int(row[0]) if row else 0
    if min_sql is None:
        return top
    (low,) = conn.execute(min_sql, (tenant, *args)).fetchone()
    return top if low is None else min(top, int(low) - 1)


def _split_script(script: str) -> list[str]:
    """Split the schema into statements, keeping trigger bodies (which contain ';') whole."""
    stmts: list[str] = []
    buf: list[str] = []
    in_trigger = False
    for line in script.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("--"):
            continue
        buf.append(line)
        if stripped.upper().startswith("CREATE TRIGGER"):
            in_trigger = True
        if (in_trigger and stripped.upper() == "END;") or (not in_trigger and stripped.endswith(";")):
            stmts.append("\n".join(buf))
            buf, in_trigger = [], False
    if buf:
        stmts.append("\n".join(buf))
    return stmts


#: how many generations of tombstones are kept for incremental vector cache refreshes
TOMBSTONE_GENERATIONS = 5000


def _bump_gen(conn: sqlite3.Connection, tenant: str) -> int:
    """Start a new search generation for `tenant` (call first in the write transaction)."""
    row = conn.execute(
        "INSERT INTO search_gen (tenant, gen) VALUES (?, 1) "
        "ON CONFLICT (tenant) DO UPDATE SET gen = gen + 1 RETURNING gen",
        (tenant,),
    ).fetchone()
    return int(row[0])


def _prune_tombstones(conn: sqlite3.Connection, tenant: str, gen: int) -> None:
    floor = gen - TOMBSTONE_GENERATIONS
    if floor > 0 and gen % 100 == 0:
        conn.execute("DELETE FROM docs_gone WHERE tenant = ? AND rev <= ?", (tenant, floor))
        conn.execute("UPDATE search_gen SET floor = ? WHERE tenant = ?", (floor, tenant))


# ---------------------------------------------------------------------------------------------
# facts

_FACT_COLS = (
    "tenant, fact_id, seq, text, kind, entity_slug, provenance, visibility, session_id, client_id, "
    "created_at, valid_until, expired_at, expired_reason, expired_by, superseded_by, supersedes, "
    "vector, vector_model"
)


def _fact_row(f: Fact) -> tuple[Any, ...]:
    return (
        f.tenant,
        f.fact_id,
        f.seq,
        f.text,
        f.kind,
        f.entity_slug,
        f.provenance,
        f.visibility,
        f.session_id,
        f.client_id,
        ms(f.created_at),
        ms_opt(f.valid_until),
        ms_opt(f.expired_at),
        f.expired_reason,
        f.expired_by,
        f.superseded_by,
        f.supersedes,
        f.vector,
        f.vector_model,
    )


def _fact_of(r: sqlite3.Row | tuple[Any, ...]) -> Fact:
    return Fact(
        tenant=r[0],
        fact_id=r[1],
        seq=r[2],
        text=r[3],
        kind=r[4],
        entity_slug=r[5],
        provenance=r[6],
        visibility=r[7],
        session_id=r[8],
        client_id=r[9],
        created_at=dt_of(r[10]),
        valid_until=dt_opt(r[11]),
        expired_at=dt_opt(r[12]),
        expired_reason=r[13],
        expired_by=r[14],
        superseded_by=r[15],
        supersedes=r[16],
        vector=r[17],
        vector_model=r[18],
    )


def _active_clause(now: datetime) -> tuple[str, list[Any]]:
    return (
        " AND expired_at IS NULL AND superseded_by IS NULL AND (valid_until IS NULL OR valid_until > ?)",
        [ms(now)],
    )


def _batch_get(
    db: Database, select: str, column: str, tenant: str, keys: Sequence[str], make: Callable[[Any], T], *, key: int
) -> dict[str, T]:
    """Rows of one tenant whose `column` is one of `keys` (in chunks under SQLite's variable limit),
    built with `make` and keyed by the row's field `key`."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return {}

    def run(conn: sqlite3.Connection) -> dict[str, T]:
        found: dict[str, T] = {}
        for part in _chunks(wanted):
            sql = f"{select} WHERE tenant = ? AND {column} IN ({_marks(len(part))})"
            for r in conn.execute(sql, (tenant, *part)):
                found[r[key]] = make(r)
        return found

    return db.read(run)


def _insert_audit(conn: sqlite3.Connection, event: AuditEvent) -> None:
    """One audit row; called inside the caller's write transaction so a write and its trail commit together."""
    conn.execute(
        "INSERT INTO audit (tenant, subject, action, actor, at, reason, provenance, detail) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            event.tenant,
            event.subject,
            event.action,
            event.actor,
            ms(event.at),
            event.reason,
            event.provenance,
            json.dumps(event.detail, default=str, ensure_ascii=False),
        ),
    )


class SqliteFactStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def next_seq(self, tenant: str) -> int:
        def run(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "INSERT INTO fact_seq (tenant, seq) VALUES (?, 1) "
                "ON CONFLICT (tenant) DO UPDATE SET seq = seq + 1 RETURNING seq",
                (tenant,),
            ).fetchone()
            return int(row[0])

        return self.db.write(run)

    def put(self, fact: Fact, *, supersede: Fact | None = None, audit: Sequence[AuditEvent] = ()) -> None:
        if supersede is not None and supersede.tenant != fact.tenant:
            raise Conflict("the superseded fact belongs to another tenant")

        def run(conn: sqlite3.Connection) -> None:
            if supersede is not None:
                row = conn.execute(
                    "SELECT text, valid_until, expired_at, superseded_by FROM facts "
                    "WHERE tenant = ? AND fact_id = ?",
                    (fact.tenant, supersede.fact_id),
                ).fetchone()
                created = ms(fact.created_at)
                if (
                    row is None
                    or row[2] is not None
                    or row[3] is not None
                    or (row[1] is not None and row[1] <= created)
                    or row[0] != supersede.text
                    or row[1] != ms_opt(supersede.valid_until)
                ):
                    raise Conflict("the superseded fact is no longer active or was changed")
                conn.execute(
                    "UPDATE facts SET expired_at = ?, expired_reason = ?, expired_by = ?, superseded_by = ? "
                    "WHERE tenant = ? AND fact_id = ?",
                    (created, "superseded", fact.client_id, fact.fact_id, fact.tenant, supersede.fact_id),
                )
            # a duplicate fact_id violates UNIQUE: `_translate` turns that into Conflict
            row = (*_fact_row(fact), _next_change(conn, fact.tenant, "fact"))
            conn.execute(f"INSERT INTO facts ({_FACT_COLS}, change_seq) VALUES ({_marks(20)})", row)
            for event in audit:
                _insert_audit(conn, event)

        self.db.write(run)

    def get(self, tenant: str, fact_id: str) -> Fact | None:
        row = self.db.read(
            lambda c: c.execute(
                f"SELECT {_FACT_COLS} FROM facts WHERE tenant = ? AND fact_id = ?", (tenant, fact_id)
            ).fetchone()
        )
        return None if row is None else _fact_of(row)

    def _query(
        self,
        tenant: str,
        where: str,
        params: list[Any],
        *,
        now: datetime,
        active_only: bool,
        world_only: bool,
        limit: int,
    ) -> list[Fact]:
        sql = f"SELECT {_FACT_COLS} FROM facts WHERE tenant = ?{where}"
        args: list[Any] = [tenant, *params]
        if active_only:
            clause, extra = _active_clause(now)
            sql += clause
            args += extra
        if world_only:
            sql += " AND visibility = 'world'"
        sql += " ORDER BY created_at DESC, seq DESC LIMIT ?"
        args.append(max(0, int(limit)))
        rows = self.db.read(lambda c: c.execute(sql, args).fetchall())
        return [_fact_of(r) for r in rows]

    def by_entity(
        self,
        tenant: str,
        entity_slug: str,
        *,
        now: datetime,
        active_only: bool = True,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        return self._query(
            tenant,
            " AND entity_slug = ?",
            [entity_slug],
            now=now,
            active_only=active_only,
            world_only=world_only,
            limit=limit,
        )

    def by_session(
        self,
        tenant: str,
        session_id: str,
        *,
        now: datetime,
        active_only: bool = True,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        return self._query(
            tenant,
            " AND session_id = ?",
            [session_id],
            now=now,
            active_only=active_only,
            world_only=world_only,
            limit=limit,
        )

    def recent(
        self,
        tenant: str,
        *,
        now: datetime,
        after: datetime | None = None,
        active_only: bool = True,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        where, params = ("", []) if after is None else (" AND created_at > ?", [ms(after)])
        return self._query(
            tenant, where, params, now=now, active_only=active_only, world_only=world_only, limit=limit
        )

    def many(self, tenant: str, fact_ids: Sequence[str]) -> list[Fact]:
        found = _batch_get(self.db, f"SELECT {_FACT_COLS} FROM facts", "fact_id", tenant, fact_ids, _fact_of, key=1)
        return [found[i] for i in fact_ids if i in found]

    def count_active(self, tenant: str, entity_slug: str, *, now: datetime, world_only: bool = True) -> int:
        clause, extra = _active_clause(now)
        sql = f"SELECT count(*) FROM facts WHERE tenant = ? AND entity_slug = ?{clause}"
        if world_only:
            sql += " AND visibility = 'world'"
        return int(self.db.read(lambda c: c.execute(sql, (tenant, entity_slug, *extra)).fetchone()[0]))

    def expire(
        self, tenant: str, fact_id: str, *, at: datetime, reason: str | None, actor: str,
        audit: AuditEvent | None = None,
    ) -> bool:
        """A fact already past its `valid_until` at `at` is not active: False, left untouched."""

        def run(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT expired_at, superseded_by, valid_until FROM facts WHERE tenant = ? AND fact_id = ?",
                (tenant, fact_id),
            ).fetchone()
            if row is None:
                raise NotFound("no such fact")
            when = ms(at)
            if row[0] is not None or row[1] is not None or (row[2] is not None and row[2] <= when):
                return False
            conn.execute(
                "UPDATE facts SET expired_at = ?, expired_reason = ?, expired_by = ? "
                "WHERE tenant = ? AND fact_id = ?",
                (when, reason, actor, tenant, fact_id),
            )
            if audit is not None:
                _insert_audit(conn, audit)
            return True

        return self.db.write(run)

    def purge(self, tenant: str, fact_id: str) -> bool:
        return self.db.write(
            lambda c: (
                c.execute("DELETE FROM facts WHERE tenant = ? AND fact_id = ?", (tenant, fact_id)).rowcount
                > 0
            )
        )

    def changed_after(
        self, tenant: str, *, seq: int, now: datetime, world_only: bool = True, limit: int = 50
    ) -> list[tuple[int, Fact]]:
        clause, extra = _active_clause(now)
        sql = f"SELECT {_FACT_COLS}, change_seq FROM facts WHERE tenant = ? AND change_seq > ?{clause}"
        if world_only:
            sql += " AND visibility = 'world'"
        sql += " ORDER BY change_seq LIMIT ?"
        args = (tenant, int(seq), *extra, max(0, int(limit)))
        return [(r[19], _fact_of(r)) for r in self.db.read(lambda c: c.execute(sql, args).fetchall())]

    def change_floor(self, tenant: str, *, after: datetime | None) -> int:
        if after is None:
            return self.db.read(lambda c: _change_floor(c, tenant, "fact", None, ()))
        sql = "SELECT min(change_seq) FROM facts WHERE tenant = ? AND created_at > ?"
        return self.db.read(lambda c: _change_floor(c, tenant, "fact", sql, (ms(after),)))


# ---------------------------------------------------------------------------------------------
# pages

#: link types that are mentions: listed as backlinks but not counted (the singular is tolerated)
_MENTION_TYPES = (MENTION_LINK_TYPE, "mention")
_HEAD_COLS = "slug, title, type, visibility, updated_at, last_retrieved_at"
_PAGE_COLS = (
    "tenant, slug, title, type, aliases, summary, visibility, body, links, timeline, frontmatter, "
    "created_at, updated_at, last_retrieved_at, author"
)
_WORD = re.compile(r"\w+")


def _head_of(r: Sequence[Any]) -> PageHead:
    return PageHead(
        slug=r[0],
        title=r[1],
        type=r[2],
        visibility=r[3],
        updated_at=dt_of(r[4]),
        last_retrieved_at=dt_opt(r[5]),
    )


def _page_of(r: Sequence[Any]) -> Page:
    return Page(
        tenant=r[0],
        slug=r[1],
        title=r[2],
        type=r[3],
        aliases=tuple(json.loads(r[4])),
        summary=r[5],
        visibility=r[6],
        body=r[7],
        links=tuple(Link(**x) for x in json.loads(r[8])),
        timeline=tuple(TimelineEntry(**x) for x in json.loads(r[9])),
        frontmatter=json.loads(r[10]),
        created_at=dt_of(r[11]),
        updated_at=dt_of(r[12]),
        last_retrieved_at=dt_opt(r[13]),
        author=r[14],
    )


def _names_text(page: Page) -> str:
    """What `keyword` near-misses match on: title, slug words and aliases."""
    return " ".join([page.title, page.slug.replace("/", " ").replace("-", " "), *page.aliases])


class SqlitePageStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, tenant: str, slug: str) -> Page | None:
        row = self.db.read(
            lambda c: c.execute(
                f"SELECT {_PAGE_COLS} FROM pages WHERE tenant = ? AND slug = ?", (tenant, slug)
            ).fetchone()
        )
        return None if row is None else _page_of(row)

    def put(self, page: Page) -> None:
        try:
            frontmatter = json.dumps(page.frontmatter, default=str, ensure_ascii=False)
        except (TypeError, ValueError):
            raise TooLarge("the page frontmatter cannot be stored") from None
        links = json.dumps([ln.model_dump() for ln in page.links], ensure_ascii=False)
        timeline = json.dumps([t.model_dump() for t in page.timeline], ensure_ascii=False)
        aliases = json.dumps(list(page.aliases), ensure_ascii=False)
        t, s = page.tenant, page.slug

        def run(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT rowid FROM pages WHERE tenant = ? AND slug = ?", (t, s)).fetchone()
            values: tuple[Any, ...] = (
                leaf_of(s),
                page.title,
                page.title.lower(),
                page.type,
                aliases,
                page.summary,
                page.visibility,
                page.body,
                links,
                timeline,
                frontmatter,
                ms(page.created_at),
                ms(page.updated_at),
                ms_opt(page.last_retrieved_at),
                page.author,
                _next_change(conn, t, "page"),  # D14: numbered inside this write transaction
            )
            rowid: int | None
            if row is None:
                rowid = conn.execute(
                    "INSERT INTO pages (leaf, title, title_lc, type, aliases, summary, visibility, body, "
                    "links, timeline, frontmatter, created_at, updated_at, last_retrieved_at, author, "
                    f"change_seq, tenant, slug) VALUES ({_marks(18)})",
                    (*values, t, s),
                ).lastrowid
            else:
                rowid = row[0]
                conn.execute(
                    "UPDATE pages SET leaf = ?, title = ?, title_lc = ?, type = ?, aliases = ?, summary = ?, "
                    "visibility = ?, body = ?, links = ?, timeline = ?, frontmatter = ?, created_at = ?, "
                    "updated_at = ?, last_retrieved_at = ?, author = ?, change_seq = ? WHERE rowid = ?",
                    (*values, rowid),
                )
            assert rowid is not None
            self._delete_derived(conn, t, s, rowid)
            conn.executemany(
                "INSERT OR IGNORE INTO aliases (tenant, alias, slug) VALUES (?, ?, ?)",
                [(t, a, s) for a in {normalize_alias(a) for a in page.aliases} if a],
            )
            conn.executemany(
                "INSERT INTO links (tenant, source, ord, target, type, context) VALUES (?, ?, ?, ?, ?, ?)",
                [(t, s, i, ln.target, ln.type, ln.context) for i, ln in enumerate(page.links)],
            )
            conn.executemany(
                "INSERT INTO timeline (tenant, slug, ord, date, text) VALUES (?, ?, ?, ?, ?)",
                [(t, s, i, e.date, e.text) for i, e in enumerate(page.timeline)],
            )
            conn.execute(
                "INSERT INTO page_names_fts (rowid, tenant_key, names) VALUES (?, ?, ?)",
                (rowid, tenant_key(t), _names_text(page)),
            )

        self.db.write(run)

    @staticmethod
    def _delete_derived(conn: sqlite3.Connection, tenant: str, slug: str, rowid: int) -> None:
        conn.execute("DELETE FROM aliases WHERE tenant = ? AND slug = ?", (tenant, slug))
        conn.execute("DELETE FROM links WHERE tenant = ? AND source = ?", (tenant, slug))
        conn.execute("DELETE FROM timeline WHERE tenant = ? AND slug = ?", (tenant, slug))
        conn.execute("DELETE FROM page_names_fts WHERE rowid = ?", (rowid,))

    def delete(self, tenant: str, slug: str) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT rowid FROM pages WHERE tenant = ? AND slug = ?", (tenant, slug)
            ).fetchone()
            if row is None:
                return False
            self._delete_derived(conn, tenant, slug, row[0])
            conn.execute("DELETE FROM pages WHERE rowid = ?", (row[0],))
            return True

        return self.db.write(run)

    def lookup(
        self,
        tenant: str,
        *,
        alias: str,
        title: str,
        slugs: Sequence[str],
        suffix: str,
        world_only: bool,
        limit: int = 10,
    ) -> list[PageMatch]:
        vis = " AND p.visibility = 'world'" if world_only else ""
        lim = max(0, int(limit))
        head = "p.slug, p.title, p.type, p.visibility, p.updated_at, p.last_retrieved_at"
        wanted_slugs = list(dict.fromkeys(slugs))[:_IN_CHUNK]

        def run(conn: sqlite3.Connection) -> list[PageMatch]:
            out: list[PageMatch] = []
            if alias:
                for r in conn.execute(
                    f"SELECT {head} FROM aliases a "
                    "CROSS JOIN pages p ON p.tenant = a.tenant AND p.slug = a.slug "
                    f"WHERE a.tenant = ? AND a.alias = ?{vis} ORDER BY a.slug LIMIT ?",
                    (tenant, alias, lim),
                ):
                    out.append(PageMatch(page=_head_of(r), via="alias"))
            if title:
                for r in conn.execute(
                    f"SELECT {head} FROM pages p WHERE p.tenant = ? AND p.title_lc = ?{vis} "
                    "ORDER BY p.slug LIMIT ?",
                    (tenant, title, lim),
                ):
                    out.append(PageMatch(page=_head_of(r), via="title"))
            if wanted_slugs:
                for r in conn.execute(
                    f"SELECT {head} FROM pages p "
                    f"WHERE p.tenant = ? AND p.slug IN ({_marks(len(wanted_slugs))}){vis} "
                    "ORDER BY p.slug LIMIT ?",
                    (tenant, *wanted_slugs, lim),
                ):
                    out.append(PageMatch(page=_head_of(r), via="slug"))
            if suffix:
                # index seek on (tenant, leaf); a multi-segment suffix is checked on the few rows found
                tail = "/" + suffix
                n = 0
                for r in conn.execute(
                    f"SELECT {head} FROM pages p WHERE p.tenant = ? AND p.leaf = ?{vis} ORDER BY p.slug",
                    (tenant, suffix.rsplit("/", 1)[-1]),
                ):
                    if n >= lim:
                        break
                    if r[0].endswith(tail):
                        out.append(PageMatch(page=_head_of(r), via="suffix"))
                        n += 1
            return out

        return self.db.read(run)

    def heads(self, tenant: str, slugs: Sequence[str]) -> list[PageHead]:
        found = _batch_get(self.db, f"SELECT {_HEAD_COLS} FROM pages", "slug", tenant, slugs, _head_of, key=0)
        return [found[s] for s in dict.fromkeys(slugs) if s in found]

    def list(
        self,
        tenant: str,
        *,
        world_only: bool,
        limit: int,
        after: str | None = None,
        type: str | None = None,
    ) -> list[PageHead]:
        sql = f"SELECT {_HEAD_COLS} FROM pages WHERE tenant = ?"
        args: list[Any] = [tenant]
        if type is not None:
            sql += " AND type = ?"
            args.append(type)
        if after is not None:
            sql += " AND slug > ?"
            args.append(after)
        if world_only:
            sql += " AND visibility = 'world'"
        sql += " ORDER BY slug LIMIT ?"
        args.append(max(0, int(limit)))
        return [_head_of(r) for r in self.db.read(lambda c: c.execute(sql, args).fetchall())]

    def backlinks(
        self, tenant: str, slug: str, *, world_only: bool, limit: int = 10
    ) -> tuple[builtins.list[Backlink], int]:
        vis = " AND p.visibility = 'world'" if world_only else ""
        base = (
            "FROM links l INDEXED BY links_target CROSS JOIN pages p ON p.tenant = l.tenant AND p.slug = l.source "
            f"WHERE l.tenant = ? AND l.target = ? AND l.source <> l.target{vis}"
        )

        def run(conn: sqlite3.Connection) -> tuple[builtins.list[Backlink], int]:
            rows = conn.execute(
                f"SELECT l.source, l.type, l.context {base} "
                "ORDER BY p.updated_at DESC, l.source, l.ord LIMIT ?",
                (tenant, slug, max(0, int(limit))),
            ).fetchall()
            (count,) = conn.execute(
                f"SELECT count(*) {base} AND l.type NOT IN (?, ?)", (tenant, slug, *_MENTION_TYPES)
            ).fetchone()
            return [Backlink(source=r[0], type=r[1], context=r[2]) for r in rows], int(count)

        return self.db.read(run)

    def updated_since(
        self,
        tenant: str,
        *,
        since: datetime,
        slug: str,
        world_only: bool,
        limit: int,
    ) -> builtins.list[PageHead]:
        vis = " AND visibility = 'world'" if world_only else ""
        sql = (
            f"SELECT {_HEAD_COLS} FROM pages WHERE tenant = ? AND (updated_at, slug) > (?, ?){vis} "
            "ORDER BY updated_at, slug LIMIT ?"
        )
        args = (tenant, ms(since), slug, max(0, int(limit)))
        return [_head_of(r) for r in self.db.read(lambda c: c.execute(sql, args).fetchall())]

    def changed_after(
        self, tenant: str, *, seq: int, world_only: bool, limit: int, now: datetime | None = None
    ) -> builtins.list[tuple[int, PageHead]]:
        # One writer at a time commits in change order and readers see every commit: no horizon.
        vis = " AND visibility = 'world'" if world_only else ""
        sql = (
            f"SELECT {_HEAD_COLS}, change_seq FROM pages WHERE tenant = ? AND change_seq > ?{vis} "
            "ORDER BY change_seq LIMIT ?"
        )
        args = (tenant, int(seq), max(0, int(limit)))
        return [(r[6], _head_of(r)) for r in self.db.read(lambda c: c.execute(sql, args).fetchall())]

    def change_floor(self, tenant: str, *, since: datetime | None, slug: str = "") -> int:
        if since is None:
            return self.db.read(lambda c: _change_floor(c, tenant, "page", None, ()))
        sql = "SELECT min(change_seq) FROM pages WHERE tenant = ? AND (updated_at, slug) > (?, ?)"
        return self.db.read(lambda c: _change_floor(c, tenant, "page", sql, (ms(since), slug)))

    def keyword(self, tenant: str, text: str, *, world_only: bool, limit: int = 3) -> builtins.list[PageHead]:
        match = fts_match(text, tenant)
        if match is None:
            return []
        vis = " AND p.visibility = 'world'" if world_only else ""
        sql = (
            f"SELECT p.slug, p.title, p.type, p.visibility, p.updated_at, p.last_retrieved_at "
            "FROM page_names_fts f JOIN pages p ON p.rowid = f.rowid "
            f"WHERE page_names_fts MATCH ? AND p.tenant = ?{vis} ORDER BY f.rank, p.slug LIMIT ?"
        )
        try:
            rows = self.db.read(lambda c: c.execute(sql, (match, tenant, max(0, int(limit)))).fetchall())
        except Unavailable as exc:
            if exc.reason == "busy":
                raise
            return []  # a query the FTS engine rejects yields no near-misses, never an error
        return [_head_of(r) for r in rows]


# ---------------------------------------------------------------------------------------------
# FTS query building

#: Function words dropped from keyword queries (they match nearly everything and cost time);
#: kept when a query consists of nothing else.
_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have i in is it its of on or that the this to was "
    "were what when where which who why will with".split()
)
_MAX_TERMS = 32


_FOLDED_WORD = re.compile(r"[^\W_]+")


def fold_words(text: str) -> list[str]:
    """Words as the keyword index sees them: case-folded, accents removed, split on anything that
    is not a letter or digit."""
    folded = text.casefold()
    if not folded.isascii():
        folded = "".join(ch for ch in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(ch))
    return _FOLDED_WORD.findall(folded)


def partition_key(tenant: str, kind: str, visibility: str) -> str:
    """Fixed-length alphanumeric prefix of the keyword tokens of one (tenant, kind, visibility)."""
    raw = f"{tenant}\x00{kind}\x00{visibility}".encode()
    return "p" + blake2b(raw, digest_size=10).hexdigest()


def fts_terms(tenant: str, kind: str, visibility: str, text: str | None) -> str:
    prefix = partition_key(tenant, kind, visibility)
    return " ".join(prefix + w for w in fold_words(text or ""))


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


def bound_terms(terms: Sequence[str], docs_with: Callable[[str], int], max_rows: int | None = None) -> list[str]:
    """`terms` without the most common ones while their doc counts add up to more than `max_rows`
    (default KEYWORD_MAX_ROWS)."""
    max_rows = KEYWORD_MAX_ROWS if max_rows is None else max_rows
    counts = {t: docs_with(t) for t in terms}
    if sum(counts.values()) <= max_rows:
        return list(terms)
    kept, total = set(), 0
    for t in sorted(terms, key=lambda t: counts[t]):
        if counts[t] == 0 or total == 0 or total + counts[t] <= max_rows:
            kept.add(t)
            total += counts[t]
    return [t for t in terms if t in kept]


def docs_match(
    text: str, tenant: str, kinds: Sequence[str], world_only: bool, counts: dict[str, int] | None = None
) -> str | None:
    """The MATCH expression for free user text over the partitions a query may see, or None when
    the text holds no searchable word. Terms are double-quoted alphanumeric tokens, so no user
    input is ever read as FTS syntax (operators, column filters, NEAR, prefixes). With `counts`
    (docs per partition token, from `TermCounts`) the terms are bounded by `bound_terms`."""
    terms = query_terms(text)
    if not terms:
        return None
    prefixes = _partitions(tenant, kinds, world_only)
    if counts is not None:
        terms = bound_terms(terms, lambda t: sum(counts.get(p + t, 0) for p in prefixes))
    return " OR ".join(f'"{p}{t}"' for t in terms for p in prefixes)


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
# cursors, clients, idempotency, audit


def _cursor_of(r: Sequence[Any]) -> Cursor:
    return Cursor(
        tenant=r[0],
        client_id=r[1],
        session_id=r[2],
        since=dt_of(r[3]),
        slug=r[4],
        touched_at=dt_of(r[5]),
        incomplete_streak=r[6],
        version=r[7],
        page_seq=r[8],
        fact_seq=r[9],
    )


class SqliteCursorStore:
    def __init__(
        self,
        db: Database,
        *,
        sessions_per_client: int = SESSIONS_PER_CLIENT,
        idle_days: int = SESSION_IDLE_DAYS,
    ) -> None:
        self.db = db
        self.sessions_per_client = sessions_per_client
        self.idle = timedelta(days=idle_days)

    def get(self, tenant: str, client_id: str, session_id: str, *, now: datetime) -> Cursor | None:
        row = self.db.read(
            lambda c: c.execute(
                "SELECT tenant, client_id, session_id, since, slug, touched_at, incomplete_streak, version, "
                "page_seq, fact_seq FROM cursors WHERE tenant = ? AND client_id = ? AND session_id = ?",
                (tenant, client_id, session_id),
            ).fetchone()
        )
        if row is None or now - dt_of(row[5]) > self.idle:
            return None
        return _cursor_of(row)

    def put(self, cursor: Cursor, *, expected_version: int | None) -> Cursor:
        """Idle expiry on write is judged at `cursor.touched_at` (the time of this wake)."""
        key = (cursor.tenant, cursor.client_id, cursor.session_id)

        def run(conn: sqlite3.Connection) -> Cursor:
            row = conn.execute(
                "SELECT version, touched_at FROM cursors "
                "WHERE tenant = ? AND client_id = ? AND session_id = ?",
                key,
            ).fetchone()
            if expected_version is None:
                if row is not None and cursor.touched_at - dt_of(row[1]) <= self.idle:
                    raise Conflict("the session cursor already exists")
            elif row is None or row[0] != expected_version:
                raise Conflict("the session cursor changed")
            version = (row[0] if row is not None else 0) + 1
            stored = cursor.model_copy(
                update={
                    "version": version,
                    "since": to_ms(cursor.since),
                    "touched_at": to_ms(cursor.touched_at),
                }
            )
            conn.execute(
                "INSERT INTO cursors (tenant, client_id, session_id, since, slug, touched_at, "
                "incomplete_streak, version, page_seq, fact_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant, client_id, session_id) DO UPDATE SET since = excluded.since, "
                "slug = excluded.slug, touched_at = excluded.touched_at, "
                "incomplete_streak = excluded.incomplete_streak, version = excluded.version, "
                "page_seq = excluded.page_seq, fact_seq = excluded.fact_seq",
                (
                    *key,
                    ms(stored.since),
                    stored.slug,
                    ms(stored.touched_at),
                    stored.incomplete_streak,
                    version,
                    stored.page_seq,
                    stored.fact_seq,
                ),
            )
            if row is None:
                # only a new session can push the client over its limit: evict the least recently woken
                conn.execute(
                    "DELETE FROM cursors WHERE tenant = ? AND client_id = ? AND session_id IN ("
                    "SELECT session_id FROM cursors WHERE tenant = ? AND client_id = ? "
                    "ORDER BY touched_at DESC, session_id DESC LIMIT -1 OFFSET ?)",
                    (
                        cursor.tenant,
                        cursor.client_id,
                        cursor.tenant,
                        cursor.client_id,
                        max(1, self.sessions_per_client),
                    ),
                )
            return stored

        return self.db.write(run)


def _client_of(r: Sequence[Any]) -> ClientRecord:
    return ClientRecord(
        token_hash=r[0],
        token_id=r[1],
        tenant=r[2],
        client_id=r[3],
        scopes=frozenset(json.loads(r[4])),
        created_at=dt_of(r[5]),
        revoked_at=dt_opt(r[6]),
    )


_CLIENT_COLS = "token_hash, token_id, tenant, client_id, scopes, created_at, revoked_at"


class SqliteClientStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, record: ClientRecord) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                f"INSERT INTO clients ({_CLIENT_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    record.token_hash,
                    record.token_id,
                    record.tenant,
                    record.client_id,
                    json.dumps(sorted(record.scopes)),
                    ms(record.created_at),
                    ms_opt(record.revoked_at),
                ),
            )

        self.db.write(run)

    def by_hash(self, token_hash: str) -> ClientRecord | None:
        row = self.db.read(
            lambda c: c.execute(
                f"SELECT {_CLIENT_COLS} FROM clients WHERE token_hash = ?", (token_hash,)
            ).fetchone()
        )
        return None if row is None else _client_of(row)

    def list(self, tenant: str | None = None) -> list[ClientRecord]:
        args: tuple[str, ...] = ()
        if tenant is None:
            sql = f"SELECT {_CLIENT_COLS} FROM clients ORDER BY tenant, created_at, token_id"
        else:
            sql = f"SELECT {_CLIENT_COLS} FROM clients WHERE tenant = ? ORDER BY created_at, token_id"
            args = (tenant,)
        return [_client_of(r) for r in self.db.read(lambda c: c.execute(sql, args).fetchall())]

    def revoke(self, token_id: str, *, at: datetime) -> bool:
        """True when a live token was revoked now; False when unknown or already revoked."""
        return self.db.write(
            lambda c: (
                c.execute(
                    "UPDATE clients SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL",
                    (ms(at), token_id),
                ).rowcount
                > 0
            )
        )


_IDEM_COLS = "tenant, client_id, verb, key, request_hash, result, created_at, expires_at"


def _idem_of(r: Sequence[Any]) -> IdempotencyRecord:
    return IdempotencyRecord(
        tenant=r[0],
        client_id=r[1],
        verb=r[2],
        key=r[3],
        request_hash=r[4],
        result=None if r[5] is None else json.loads(r[5]),
        created_at=dt_of(r[6]),
        expires_at=dt_of(r[7]),
    )


class SqliteIdempotencyStore:
    #: expired records are swept every this many claims (bounded work per call)
    SWEEP_EVERY = 256

    def __init__(self, db: Database) -> None:
        self.db = db
        self._claims = 0

    def claim(self, record: IdempotencyRecord, *, now: datetime) -> IdempotencyRecord | None:
        key = (record.tenant, record.client_id, record.verb, record.key)
        self._claims += 1
        sweep = self._claims % self.SWEEP_EVERY == 0

        def run(conn: sqlite3.Connection) -> IdempotencyRecord | None:
            if sweep:
                conn.execute(
                    "DELETE FROM idempotency WHERE (tenant, client_id, verb, key) IN ("
                    "SELECT tenant, client_id, verb, key FROM idempotency WHERE expires_at <= ? LIMIT 500)",
                    (ms(now),),
                )
            row = conn.execute(
                f"SELECT {_IDEM_COLS} FROM idempotency "
                "WHERE tenant = ? AND client_id = ? AND verb = ? AND key = ?",
                key,
            ).fetchone()
            if row is not None and row[7] > ms(now):
                return _idem_of(row)
            conn.execute(
                f"INSERT OR REPLACE INTO idempotency ({_IDEM_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    *key,
                    record.request_hash,
                    None if record.result is None else json.dumps(record.result),
                    ms(record.created_at),
                    ms(record.expires_at),
                ),
            )
            return None

        return self.db.write(run)

    def complete(self, tenant: str, client_id: str, verb: str, key: str, result: dict) -> None:
        payload = json.dumps(result, default=str, ensure_ascii=False)
        self.db.write(
            lambda c: c.execute(
                "UPDATE idempotency SET result = ? "
                "WHERE tenant = ? AND client_id = ? AND verb = ? AND key = ?",
                (payload, tenant, client_id, verb, key),
            )
        )

    def release(self, tenant: str, client_id: str, verb: str, key: str) -> None:
        self.db.write(
            lambda c: c.execute(
                "DELETE FROM idempotency WHERE tenant = ? AND client_id = ? AND verb = ? AND key = ? "
                "AND result IS NULL",
                (tenant, client_id, verb, key),
            )
        )


class SqliteAuditLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    def append(self, event: AuditEvent) -> None:
        self.db.write(lambda c: _insert_audit(c, event))

    def for_subject(self, tenant: str, subject: str) -> list[AuditEvent]:
        rows = self.db.read(
            lambda c: c.execute(
                "SELECT tenant, subject, action, actor, at, reason, provenance, detail FROM audit "
                "WHERE tenant = ? AND subject = ? ORDER BY at, id",
                (tenant, subject),
            ).fetchall()
        )
        return [
            AuditEvent(
                tenant=r[0],
                subject=r[1],
                action=r[2],
                actor=r[3],
                at=dt_of(r[4]),
                reason=r[5],
                provenance=r[6],
                detail=json.loads(r[7]),
            )
            for r in rows
        ]


# ---------------------------------------------------------------------------------------------
# search index


@dataclass
class _Matrix:
    """One (tenant, model, dim) vector matrix at search generation `gen`.

    The arrays are buffers with spare capacity: rows [0, n) are valid. A catch-up appends new rows
    in place and clears `alive` for replaced or deleted rows, then publishes a new `_Matrix` over
    the same buffers with a larger `n`; holders of the older object keep reading their prefix.
    Catch-ups are serialised (`SqliteSearchIndex._refresh_lock`).
    """

    gen: int
    n: int
    ids: np.ndarray  # int64 docs.id
    is_fact: np.ndarray  # bool
    is_world: np.ndarray  # bool
    alive: np.ndarray  # bool: False once the row was replaced or deleted
    vectors: np.ndarray  # float32 (capacity, dim), rows unit-normalised

    @property
    def nbytes(self) -> int:
        return int(self.vectors.nbytes + self.ids.nbytes * 2)

    @property
    def dead(self) -> int:
        return int(self.n - np.count_nonzero(self.alive[: self.n]))


_DOC_COLS = "tenant, doc_id, kind, slug, title, text, visibility, fact_id, updated_at, vector, vector_model"


def _doc_of(r: Sequence[Any], *, with_vector: bool = True) -> SearchDoc:
    return SearchDoc(
        tenant=r[0],
        doc_id=r[1],
        kind=r[2],
        slug=r[3],
        title=r[4],
        text=r[5],
        visibility=r[6],
        fact_id=r[7],
        updated_at=dt_of(r[8]),
        vector=r[9] if with_vector else None,
        vector_model=r[10] if with_vector else None,
    )


class SqliteSearchIndex:
    write_through = True

    def __init__(self, db: Database, *, cache_bytes: int = 768 * 1024 * 1024) -> None:
        self.db = db
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[tuple[str, str, int], _Matrix] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._refresh_lock = threading.Lock()

    # -- writes

    def upsert(self, docs: Sequence[SearchDoc]) -> None:
        if not docs:
            return

        def run(conn: sqlite3.Connection) -> None:
            gens = {t: _bump_gen(conn, t) for t in {d.tenant for d in docs}}
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

        self.db.write(run)

    def delete(self, tenant: str, doc_ids: Sequence[str]) -> None:
        ids = list(dict.fromkeys(doc_ids))
        if not ids:
            return

        def run(conn: sqlite3.Connection) -> None:
            gen = _bump_gen(conn, tenant)
            for part in _chunks(ids):
                conn.execute(
                    f"DELETE FROM docs WHERE tenant = ? AND doc_id IN ({_marks(len(part))})", (tenant, *part)
                )
            _prune_tombstones(conn, tenant, gen)

        self.db.write(run)

    def delete_page(self, tenant: str, slug: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            gen = _bump_gen(conn, tenant)
            conn.execute("DELETE FROM docs WHERE tenant = ? AND slug = ? AND kind = 'chunk'", (tenant, slug))
            _prune_tombstones(conn, tenant, gen)

        self.db.write(run)

    # -- search

    def search(self, query: SearchQuery) -> SearchHits:
        kinds = tuple(sorted(set(query.kinds)))
        k = max(0, int(query.k))
        keyword = self._keyword(query, kinds, k) if k and kinds else []
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

    def _keyword(self, query: SearchQuery, kinds: tuple[str, ...], k: int) -> list[SearchHit]:
        tokens = match_tokens(query.text, query.tenant, kinds, query.world_only)
        if not tokens:
            return []
        try:
            counts = self.db.read(lambda c: TermCounts.of(self.db).get(c, tokens))
        except PortError:
            counts = None  # no counts: the full MATCH, as without the bound
        match = docs_match(query.text, query.tenant, kinds, query.world_only, counts)
        if match is None:
            return []
        sql = (
            "SELECT d.doc_id, d.kind, d.slug, d.title, d.text, d.fact_id, r.score, d.tenant, d.visibility "
            "FROM (SELECT rowid AS id, rank AS score FROM docs_fts "
            "WHERE docs_fts MATCH ? ORDER BY rank LIMIT ?) r "
            "CROSS JOIN docs d ON d.id = r.id ORDER BY r.score, d.id"
        )
        try:
            rows = self.db.read(lambda c: c.execute(sql, (match, k)).fetchall())
        except Unavailable as exc:
            if exc.reason == "busy":
                raise
            return []  # the FTS engine rejecting a query must not fail the call
        return [
            SearchHit(
                doc_id=r[0], kind=r[1], slug=r[2], title=r[3], text=r[4], fact_id=r[5], score=-float(r[6])
            )
            for r in rows
            # the partition tokens already filtered; re-checking the real columns costs nothing
            if r[7] == query.tenant and r[1] in kinds and (not query.world_only or r[8] == "world")
        ]

    def _gen(self, tenant: str) -> tuple[int, int]:
        row = self.db.read(
            lambda c: c.execute("SELECT gen, floor FROM search_gen WHERE tenant = ?", (tenant,)).fetchone()
        )
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
            if cached is not None and cached.gen >= floor:
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

    def _catch_up(
        self, conn: sqlite3.Connection, m: _Matrix, tenant: str, model: str, dim: int
    ) -> _Matrix | None:
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
                r[0]
                for r in conn.execute(
                    "SELECT id FROM docs_gone WHERE tenant = ? AND rev > ?", (tenant, m.gen)
                )
            ]
        finally:
            conn.execute("COMMIT")
        fresh = [r for r in changed if r[4] == model and r[3] is not None and len(r[3]) == dim * 4]
        if len(changed) + len(gone) > max(2000, m.n // 4) or m.dead + len(changed) + len(gone) > max(
            1000, m.n // 4
        ):
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

    def _vector(self, query: SearchQuery, kinds: tuple[str, ...], k: int) -> list[SearchHit]:
        assert query.vector is not None and query.vector_model is not None
        if len(query.vector) % 4 or not query.vector:
            raise ValueError("the query vector is malformed")
        q = np.frombuffer(query.vector, dtype="<f4").astype(np.float32)
        norm = float(np.linalg.norm(q))
        if not np.isfinite(norm) or norm == 0.0:
            raise ValueError("the query vector has zero length")
        q /= norm
        m = self._matrix(query.tenant, query.vector_model, q.shape[0])
        n = m.n
        if not n:
            return []
        # einsum, not BLAS: a matrix-vector product is memory-bound, and multi-threaded BLAS on a
        # busy machine costs tens of milliseconds waiting for its threads
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
        cand_scores = np.einsum("ij,j->i", m.vectors[:n], q)[candidates]
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
            hits.append(
                SearchHit(doc_id=r[1], kind=r[2], slug=r[3], title=r[4], text=r[5], fact_id=r[6], score=score)
            )
        return hits

    def drop_cache(self) -> None:
        with self._cache_lock:
            self._cache.clear()


# ---------------------------------------------------------------------------------------------
# the bundle


class LocalStores:
    """All local ports over one database, plus the maintenance the embedder tooling needs."""

    def __init__(self, db: Database, *, sessions_per_client: int = SESSIONS_PER_CLIENT) -> None:
        self.db = db
        self.facts = SqliteFactStore(db)
        self.pages = SqlitePageStore(db)
        self.cursors = SqliteCursorStore(db, sessions_per_client=sessions_per_client)
        self.clients = SqliteClientStore(db)
        self.idempotency = SqliteIdempotencyStore(db)
        self.audit = SqliteAuditLog(db)
        self.search = SqliteSearchIndex(db)

    @property
    def path(self) -> str:
        return self.db.path

    def close(self) -> None:
        self.search.drop_cache()
        self.db.close()

    def __enter__(self) -> LocalStores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- maintenance (local only)

    def unembedded(self, model_id: str) -> dict[str, int]:
        """How many search docs and facts lack a vector of `model_id` (all tenants)."""

        def run(conn: sqlite3.Connection) -> dict[str, int]:
            (docs,) = conn.execute(
                "SELECT count(*) FROM docs WHERE vector IS NULL OR vector_model IS NOT ?", (model_id,)
            ).fetchone()
            (facts,) = conn.execute(
                "SELECT count(*) FROM facts WHERE vector IS NULL OR vector_model IS NOT ?", (model_id,)
            ).fetchone()
            return {"docs": int(docs), "facts": int(facts)}

        return self.db.read(run)

    def docs_without_vector(self, model_id: str, limit: int) -> list[SearchDoc]:
        """Docs (any tenant) lacking a `model_id` vector, oldest row first; returned without vectors."""
        rows = self.db.read(
            lambda c: c.execute(
                f"SELECT {_DOC_COLS} FROM docs "
                "WHERE vector IS NULL OR vector_model IS NOT ? ORDER BY id LIMIT ?",
                (model_id, max(0, int(limit))),
            ).fetchall()
        )
        return [_doc_of(r, with_vector=False) for r in rows]

    def facts_without_vector(self, model_id: str, limit: int) -> list[Fact]:
        rows = self.db.read(
            lambda c: c.execute(
                f"SELECT {_FACT_COLS} FROM facts WHERE vector IS NULL OR vector_model IS NOT ? "
                "ORDER BY rowid LIMIT ?",
                (model_id, max(0, int(limit))),
            ).fetchall()
        )
        return [_fact_of(r) for r in rows]

    def set_doc_vectors(self, model_id: str, items: Sequence[tuple[str, str, bytes]]) -> int:
        """Attach `model_id` vectors to docs; returns how many docs were updated."""
        if not items:
            return 0

        def run(conn: sqlite3.Connection) -> int:
            gens = {t: _bump_gen(conn, t) for t in {i[0] for i in items}}
            n = 0
            for tenant, doc_id, vec in items:
                n += conn.execute(
                    "UPDATE docs SET vector = ?, vector_model = ?, rev = ? WHERE tenant = ? AND doc_id = ?",
                    (vec, model_id, gens[tenant], tenant, doc_id),
                ).rowcount
            return n

        return self.db.write(run)

    def set_fact_vectors(self, model_id: str, items: Sequence[tuple[str, str, bytes]]) -> int:
        if not items:
            return 0

        def run(conn: sqlite3.Connection) -> int:
            n = 0
            for tenant, fact_id, vec in items:
                n += conn.execute(
                    "UPDATE facts SET vector = ?, vector_model = ? WHERE tenant = ? AND fact_id = ?",
                    (vec, model_id, tenant, fact_id),
                ).rowcount
            return n

        return self.db.write(run)


def _private_store(directory: Path) -> Path:
    """Create or open `directory` for the store, readable by its owner only: the directory 0700
    when this call creates it (or it is still empty before the store's first open), the database
    file 0600 (created so before SQLite opens it, which then gives its -wal/-shm siblings the same
    mode) and existing -wal/-shm files 0600. Facts, pages and token hashes live in that file."""
    created = not directory.exists()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / DB_FILENAME
    if created or (not path.exists() and not any(directory.iterdir())):
        directory.chmod(0o700)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass  # an existing store (or another process created it a moment ago)
    for name in (DB_FILENAME, f"{DB_FILENAME}-wal", f"{DB_FILENAME}-shm"):
        member = directory / name
        try:
            if member.stat().st_mode & 0o077:
                member.chmod(0o600)
        except (FileNotFoundError, PermissionError):
            pass  # absent, or another user's file: SQLite reports what it cannot open
    return path


def open_local(data_dir: Path | str, **options: Any) -> LocalStores:
    """Open (creating when needed) the local store in `data_dir`, or a private in-memory store for
    ":memory:". Options: `sessions_per_client`, `busy_timeout_ms`, `retries`. Files are private to
    their owner (`_private_store`)."""
    db_options = {k: options.pop(k) for k in ("busy_timeout_ms", "retries") if k in options}
    if str(data_dir) == ":memory:":
        path = ":memory:"
    else:
        try:
            path = str(_private_store(Path(data_dir).expanduser()))
        except OSError:
            raise Unavailable("the data directory cannot be created", reason="data_dir") from None
    return LocalStores(Database(path, **db_options), **options)
