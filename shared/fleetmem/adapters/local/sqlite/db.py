"""Connections, schema, migrations, the writer path and the small helpers every store shares."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from hashlib import blake2b
from typing import Any, TypeVar

from fleetmem.adapters.local.sqlite.fts import fts_terms
from fleetmem.errors import Conflict, PortError, TooLarge, Unavailable
from fleetmem.protocol import IDEMPOTENCY_LEASE_SECONDS
from fleetmem.timefmt import to_ms

T = TypeVar("T")
M = TypeVar("M")

DB_FILENAME = "fleetmem.db"
SCHEMA_VERSION = 5
# 2: D14 change sequences (pages/facts change_seq, cursors page_seq/fact_seq)
# 3: links carry their source page's updated_at and visibility (backlinks read only what they return)
# 4: idempotency claims carry a lease (lease_until) and a claim id
# 5: page tombstones, the cursors' TTL-expiry position, facts indexed by valid_until (delta's retracted[])
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


def row_model(
    model: Callable[..., M], cols: str, **convert: Callable[[Any], Any]
) -> Callable[[Sequence[Any]], M]:
    """What builds `model` from a row of `cols` (column names that are the model's field names, in
    order; extra trailing values are ignored); `convert` turns a field's stored value into the
    model's (epoch ms into datetimes, JSON text into values)."""
    names = tuple(c.strip() for c in cols.split(","))

    def of(r: Sequence[Any]) -> M:
        return model(**{n: convert[n](v) if n in convert else v for n, v in zip(names, r, strict=False)})

    return of


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
CREATE INDEX IF NOT EXISTS facts_expiry ON facts (tenant, valid_until, seq) WHERE valid_until IS NOT NULL;

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

-- A deleted page's tombstone, numbered in the page change sequence (delta's retracted[])
CREATE TABLE IF NOT EXISTS page_tombstones (
  tenant TEXT NOT NULL, slug TEXT NOT NULL, visibility TEXT NOT NULL, deleted_at INTEGER NOT NULL,
  change_seq INTEGER NOT NULL, PRIMARY KEY (tenant, slug)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS page_tombstones_change ON page_tombstones (tenant, change_seq);

-- D14: per-tenant commit-ordered change counters ('page', 'fact'), bumped inside each write
CREATE TABLE IF NOT EXISTS change_seq (
  tenant TEXT NOT NULL, kind TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (tenant, kind)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS aliases (
  tenant TEXT NOT NULL, alias TEXT NOT NULL, slug TEXT NOT NULL, PRIMARY KEY (tenant, alias, slug)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS aliases_slug ON aliases (tenant, slug);

-- A link row carries its source page's updated_at and visibility (rewritten with the page, in
-- the same transaction), so a target's newest backlinks are the first rows of `links_recent`
-- and its backlink count is a scan of the covering `links_count` entries: no page is read.
CREATE TABLE IF NOT EXISTS links (
  tenant TEXT NOT NULL, source TEXT NOT NULL, ord INTEGER NOT NULL, target TEXT NOT NULL,
  type TEXT NOT NULL, context TEXT, source_updated_at INTEGER NOT NULL DEFAULT 0,
  source_visibility TEXT NOT NULL DEFAULT 'private', PRIMARY KEY (tenant, source, ord)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS links_recent ON links (tenant, target, source_updated_at DESC, source, ord);
CREATE INDEX IF NOT EXISTS links_count ON links (tenant, target, source_visibility, type);

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
  version INTEGER NOT NULL, page_seq INTEGER, fact_seq INTEGER, expiry TEXT,
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
  lease_until INTEGER, claim_id TEXT,
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
    """Connections, transactions, retries and error translation for one SQLite file.

    The writer path: every write transaction of this process runs on ONE writer connection, one
    at a time, behind `_write_lock` (callers queue on the lock instead of racing for SQLite's file
    lock, so contention inside the process never surfaces as "busy"). Reads run on per-thread
    connections; in WAL mode they never wait for the writer. Other processes on the same file
    (CLI commands next to a server) are the only source of SQLITE_BUSY: `BEGIN IMMEDIATE` waits
    up to `busy_timeout_ms` for them, then the transaction is retried `retries` times with backoff
    before the caller sees `Unavailable`.
    """

    def __init__(
        self,
        path: str,
        *,
        busy_timeout_ms: int = 30_000,
        retries: int = 6,
        write_wait_s: float = 300.0,
    ) -> None:
        self.path = path
        self.memory = path == ":memory:"
        self.busy_timeout_ms = busy_timeout_ms
        self.retries = retries
        #: bound on the wait for this process's writer (only a stuck write could exhaust it)
        self.write_wait_s = write_wait_s
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._memory_lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._writer: sqlite3.Connection | None = None
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

    @contextmanager
    def _writer_conn(self) -> Iterator[sqlite3.Connection]:
        """The writer connection, held exclusively for one write transaction (with its retries)."""
        if self._closed or self._shared is not None:
            with self._conn() as conn:  # closed: raises; in memory: the one connection, locked
                yield conn
            return
        if not self._write_lock.acquire(timeout=self.write_wait_s):
            raise Unavailable("the local store is busy", retry_after_seconds=1, reason="busy")
        try:
            if self._closed:
                raise Unavailable("the local store is closed", reason="closed")
            if self._writer is None:
                self._writer = self._connect()
            yield self._writer
        finally:
            self._write_lock.release()

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
            if 1 <= version <= 2:
                _migrate_2_to_3(conn)
            if 1 <= version <= 3:
                _migrate_3_to_4(conn)
            if 1 <= version <= 4:
                _migrate_4_to_5(conn)
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

    def all(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """Every row one read-only statement returns."""
        return self.read(lambda c: c.execute(sql, args).fetchall())

    def one(self, sql: str, args: Sequence[Any] = ()) -> Any | None:
        """The first row one read-only statement returns (None: no row)."""
        return self.read(lambda c: c.execute(sql, args).fetchone())

    def run(self, sql: str, args: Sequence[Any] = ()) -> int:
        """One write statement in its own transaction; how many rows it changed."""
        return self.write(lambda c: c.execute(sql, args).rowcount)

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` inside one `BEGIN IMMEDIATE` transaction on the writer connection; retried as
        a whole when another process holds the file. Port errors raised by `fn` (e.g. Conflict)
        roll the transaction back and propagate. `fn` must not call `write` itself."""
        with self._writer_conn() as conn:
            return self._transaction(conn, fn)

    def _transaction(self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
        for attempt in range(self.retries):
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


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    """Schema 2 -> 3, inside the schema transaction: copy each source page's updated_at and
    visibility onto its link rows and swap the target index for the two backlink indexes (the
    schema script that runs next creates them)."""
    conn.execute("ALTER TABLE links ADD COLUMN source_updated_at INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE links ADD COLUMN source_visibility TEXT NOT NULL DEFAULT 'private'")
    conn.execute(
        "UPDATE links SET source_updated_at = p.updated_at, source_visibility = p.visibility "
        "FROM pages p WHERE p.tenant = links.tenant AND p.slug = links.source"
    )
    conn.execute("DROP INDEX IF EXISTS links_target")


def _migrate_3_to_4(conn: sqlite3.Connection) -> None:
    """Schema 3 -> 4, inside the schema transaction: idempotency claims carry a lease and a claim
    id. A claim still in flight from before was left by a call that no longer runs (a killed
    server), so it gets the lease it would have had: a retry takes its key over once it lapses."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(idempotency)")}
    for column, kind in (("lease_until", "INTEGER"), ("claim_id", "TEXT")):
        if column not in have:
            conn.execute(f"ALTER TABLE idempotency ADD COLUMN {column} {kind}")
    conn.execute(
        "UPDATE idempotency SET lease_until = created_at + ? WHERE result IS NULL AND lease_until IS NULL",
        (IDEMPOTENCY_LEASE_SECONDS * 1000,),
    )


def _migrate_4_to_5(conn: sqlite3.Connection) -> None:
    """Schema 4 -> 5, inside the schema transaction: the cursors' TTL-expiry position (the schema
    script that runs next adds the tombstone table and the expiry index)."""
    if "expiry" not in {r[1] for r in conn.execute("PRAGMA table_info(cursors)")}:
        conn.execute("ALTER TABLE cursors ADD COLUMN expiry TEXT")


def _increment(conn: sqlite3.Connection, table: str, column: str, key: dict[str, Any]) -> int:
    """Add one to the counter `column` of `table`'s row at `key` (a new row starts at 1), inside the
    caller's write transaction; the counter's new value."""
    names = ", ".join(key)
    row = conn.execute(
        f"INSERT INTO {table} ({names}, {column}) VALUES ({_marks(len(key))}, 1) "
        f"ON CONFLICT ({names}) DO UPDATE SET {column} = {column} + 1 RETURNING {column}",
        tuple(key.values()),
    ).fetchone()
    return int(row[0])


def _next_change(conn: sqlite3.Connection, tenant: str, kind: str) -> int:
    """D14: the tenant's next change number of `kind`, inside the caller's write transaction.
    Writes hold the database lock from BEGIN IMMEDIATE to COMMIT, so numbers commit in order."""
    return _increment(conn, "change_seq", "seq", {"tenant": tenant, "kind": kind})


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


def _keyset_floor(
    db: Database, tenant: str, kind: str, table: str, order: str, position: tuple[Any, Any] | None, walk: bool
) -> int:
    """`_change_floor` of the `table` rows after a keyset `position` in `order` (two columns); None:
    the counter. `walk`: the first such row in change order, read through the change index."""
    if position is None:
        return db.read(lambda c: _change_floor(c, tenant, kind, None, ()))
    sql = f"SELECT min(change_seq) FROM {table} WHERE tenant = ? AND ({order}) > (?, ?)"
    if walk:
        sql = (
            f"SELECT (SELECT change_seq FROM {table} INDEXED BY {table}_change WHERE tenant = ? "
            f"AND ({order}) > (?, ?) ORDER BY change_seq LIMIT 1)"
        )
    return db.read(lambda c: _change_floor(c, tenant, kind, sql, position))


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
