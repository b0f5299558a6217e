"""Connections, the writer path, error translation and the small helpers every store shares (the
schema and its migrations: `schema`)."""

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
from fleetmem.adapters.local.sqlite.schema import create_schema
from fleetmem.errors import Conflict, PortError, TooLarge, Unavailable
from fleetmem.models import provenance_matches
from fleetmem.timefmt import to_ms

T = TypeVar("T")
M = TypeVar("M")

DB_FILENAME = "fleetmem.db"
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


def _icontains(hay: str | None, needle: str | None) -> bool:
    """SQL `fm_icontains(text, part)`: `models.provenance_matches` (full Unicode case folding)."""
    return hay is not None and needle is not None and provenance_matches(hay, needle)


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


def row_model(model: Callable[..., M], cols: str, **convert: Callable[[Any], Any]) -> Callable[[Sequence[Any]], M]:
    """What builds `model` from a row of `cols` (column names that are the model's field names, in
    order; extra trailing values are ignored); `convert` turns a field's stored value into the
    model's (epoch ms into datetimes, JSON text into values)."""
    names = tuple(c.strip() for c in cols.split(","))
    converted = tuple((n, convert[n]) for n in names if n in convert)
    # a pydantic model's own validator takes the dict as it is (no keyword unpacking, no __init__)
    build: Callable[[dict[str, Any]], M] = getattr(
        getattr(model, "__pydantic_validator__", None), "validate_python", None
    ) or (lambda d: model(**d))

    def of(r: Sequence[Any]) -> M:
        d = dict(zip(names, r, strict=False))
        for n, f in converted:
            if n in d:
                d[n] = f(d[n])
        return build(d)

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
        #: statements running now on any connection; `close` waits for them (closing a connection
        #: another thread is stepping on is undefined behaviour in SQLite's C API)
        self._inflight = 0
        self._idle = threading.Condition(threading.Lock())
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
            conn.create_function("fm_icontains", 2, _icontains, deterministic=True)
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
    def _in_use(self) -> Iterator[None]:
        """Counts one use of a connection, so `close` can wait for it; refuses once closed."""
        with self._idle:
            if self._closed:
                raise Unavailable("the local store is closed", reason="closed")
            self._inflight += 1
        try:
            yield
        finally:
            with self._idle:
                self._inflight -= 1
                if self._inflight == 0:
                    self._idle.notify_all()

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        with self._in_use():
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
            with self._in_use():
                if self._writer is None:
                    self._writer = self._connect()
                yield self._writer
        finally:
            self._write_lock.release()

    def _init_schema(self) -> None:
        self.write(create_schema)

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

    def change_stamp(self) -> tuple[int, int]:
        """A value that differs from the one the calling thread read before once anything was
        committed to the file since: SQLite's `data_version` (it moves when ANY other connection,
        in this process or another, commits) with this connection's own `total_changes` (the one
        shared connection of ":memory:" writes too). One PRAGMA, no table read; comparable only
        with stamps read on the same thread."""
        return self.read(lambda c: (int(c.execute("PRAGMA data_version").fetchone()[0]), c.total_changes))

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

    #: how long `close` waits for statements other threads are running
    CLOSE_WAIT_S = 30.0

    def close(self) -> None:
        """Refuse new uses, wait (at most `CLOSE_WAIT_S`) for the running ones, close every
        connection. A use that starts after this raises `Unavailable` (reason "closed")."""
        with self._idle:
            self._closed = True
            self._idle.wait_for(lambda: self._inflight == 0, timeout=self.CLOSE_WAIT_S)
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


def _change_floor(conn: sqlite3.Connection, tenant: str, kind: str, min_sql: str | None, args: Sequence[Any]) -> int:
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
