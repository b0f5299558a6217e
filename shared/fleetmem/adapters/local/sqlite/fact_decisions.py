"""`FactDecisions` on SQLite (D20): the pool a `remember` decision reads, and the decision taken under
the file's write lock."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Unpack

from fleetmem.adapters.local.sqlite.fact_table import (
    SqliteFactTable,
    _active_clause,
    _check_tenant,
    _insert,
    _read_pool,
)
from fleetmem.ports import DecisionPool
from fleetmem.ports.facts import Decide, Decided, DecidedOptions, Decision, DecisionOptions


class SqliteFactDecisions(SqliteFactTable):
    def decision_pool(self, tenant: str, entity_slug: str | None, **opts: Unpack[DecisionOptions]) -> DecisionPool:
        q = Decision.of(opts)
        return self.db.read(lambda c: _read_pool(c, tenant, entity_slug, q.now, q.limit))

    def put_decided(self, tenant: str, entity_slug: str | None, decide: Decide, **opts: Unpack[DecidedOptions]) -> None:
        # Read, decide and write in ONE write transaction: its lock (BEGIN IMMEDIATE) is the file's,
        # taken by every process on the data directory, so no other decision comes in between.
        q = Decided.of(opts)

        def run(conn: sqlite3.Connection) -> None:
            write = decide(_read_pool(conn, tenant, entity_slug, q.now, q.limit))
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
