"""`FactDecisions` on SQLite (D20): the pool a `remember` decision reads, and the decision taken under
the file's write lock."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime

from fleetmem.adapters.local.sqlite.fact_table import (
    SqliteFactTable,
    _active_clause,
    _check_tenant,
    _insert,
    _read_pool,
)
from fleetmem.ports import DecisionPool, FactWrite


class SqliteFactDecisions(SqliteFactTable):
    def decision_pool(self, tenant: str, entity_slug: str | None, *, now: datetime, limit: int) -> DecisionPool:
        return self.db.read(lambda c: _read_pool(c, tenant, entity_slug, now, limit))

    def put_decided(
        self,
        tenant: str,
        entity_slug: str | None,
        decide: Callable[[DecisionPool], FactWrite | None],
        *,
        now: datetime,
        limit: int,
        pool: DecisionPool | None = None,
    ) -> None:
        # Read, decide and write in ONE write transaction: its lock (BEGIN IMMEDIATE) is the file's,
        # taken by every process on the data directory, so no other decision comes in between.
        def run(conn: sqlite3.Connection) -> None:
            write = decide(_read_pool(conn, tenant, entity_slug, now, limit))
            if write is not None:
                _check_tenant(write.fact, write.supersede)
                _insert(conn, write.fact, write.supersede, write.audit)

        self.db.write(run)

    def count_active(self, tenant: str, entity_slug: str, *, now: datetime, world_only: bool = True) -> int:
        clause, extra = _active_clause(now)
        sql = f"SELECT count(*) FROM facts WHERE tenant = ? AND entity_slug = ?{clause}"
        if world_only:
            sql += " AND visibility = 'world'"
        return int(self.db.read(lambda c: c.execute(sql, (tenant, entity_slug, *extra)).fetchone()[0]))
