"""Every storage port over ONE SQLite file (`<data_dir>/fleetmem.db`), plus the local search index.

Modules: `db` (connections, schema, migrations, the writer path, shared helpers), one module per
port (`facts`, `fact_decisions`, `fact_feed`, `fact_listing` over `fact_table`; `pages`, `page_feed`,
`page_listing` over `page_table`; `cursors`, `clients`, `idempotency`, `audit`), `search` (the search index
and the FTS query building), and this package (the `LocalStores` bundle and `open_local`).

Layout and rules:
- WAL mode. Every write transaction of the process runs on one writer connection behind a lock
  (`BEGIN IMMEDIATE`), so threads queue for it instead of contending for the file lock; reads run
  on one connection per thread and never wait for a write. `busy_timeout` and a bounded retry on
  SQLITE_BUSY cover other processes (CLI commands next to the server) on the same file; only
  after those retries does "database is locked" become `Unavailable`.
- ":memory:" uses one connection behind a lock for both (an in-memory database exists only inside
  its connection).
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

import os
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetmem.adapters.local.sqlite.audit import SqliteAuditLog
from fleetmem.adapters.local.sqlite.clients import SqliteClientStore
from fleetmem.adapters.local.sqlite.cursors import SqliteCursorStore
from fleetmem.adapters.local.sqlite.db import DB_FILENAME, Database
from fleetmem.adapters.local.sqlite.fact_decisions import SqliteFactDecisions
from fleetmem.adapters.local.sqlite.fact_feed import SqliteFactFeed
from fleetmem.adapters.local.sqlite.fact_listing import SqliteFactListing
from fleetmem.adapters.local.sqlite.facts import SqliteFactStore
from fleetmem.adapters.local.sqlite.idempotency import SqliteIdempotencyStore
from fleetmem.adapters.local.sqlite.maintenance import SqliteVectorMaintenance
from fleetmem.adapters.local.sqlite.page_feed import SqlitePageFeed
from fleetmem.adapters.local.sqlite.page_listing import SqlitePageListing
from fleetmem.adapters.local.sqlite.pages import SqlitePageStore
from fleetmem.adapters.local.sqlite.schema import SCHEMA_VERSION
from fleetmem.adapters.local.sqlite.search import SqliteSearchIndex
from fleetmem.errors import Unavailable
from fleetmem.ports import Ports
from fleetmem.protocol import SESSIONS_PER_CLIENT

__all__ = ["DB_FILENAME", "SCHEMA_VERSION", "Database", "LocalStores", "local_stores", "open_local"]


# ---------------------------------------------------------------------------------------------
# the bundle


@dataclass(kw_only=True, eq=False)
class LocalStores(Ports, AbstractContextManager["LocalStores"]):
    """All local ports over one database (`local_stores`), plus the re-embedding queries
    (`maintenance`, a `fleetmem.ports.VectorMaintenance`)."""

    db: Database
    maintenance: SqliteVectorMaintenance

    @property
    def path(self) -> str:
        return self.db.path

    def close(self) -> None:
        if isinstance(self.search, SqliteSearchIndex):
            self.search.drop_cache()
        self.db.close()

    def __exit__(self, *exc: object) -> None:
        self.close()


def local_stores(db: Database, *, sessions_per_client: int = SESSIONS_PER_CLIENT) -> LocalStores:
    """Every port over `db`."""
    return LocalStores(
        db=db,
        facts=SqliteFactStore(db),
        fact_decisions=SqliteFactDecisions(db),
        fact_feed=SqliteFactFeed(db),
        fact_listing=SqliteFactListing(db),
        pages=SqlitePageStore(db),
        page_feed=SqlitePageFeed(db),
        page_listing=SqlitePageListing(db),
        cursors=SqliteCursorStore(db, sessions_per_client=sessions_per_client),
        clients=SqliteClientStore(db),
        idempotency=SqliteIdempotencyStore(db),
        audit=SqliteAuditLog(db),
        search=SqliteSearchIndex(db),
        maintenance=SqliteVectorMaintenance(db),
    )


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
    return local_stores(Database(path, **db_options), **options)
