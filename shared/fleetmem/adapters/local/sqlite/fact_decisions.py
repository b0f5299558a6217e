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
    _pool_sql,
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
            pool = q.pool
            if pool is None or not _unchanged(conn, pool, tenant, entity_slug, q.now, q.limit):
                pool = _read_pool(conn, tenant, entity_slug, q.now, q.limit)
            write = decide(pool)
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


def _unchanged(
    conn: sqlite3.Connection, pool: DecisionPool, tenant: str, entity_slug: str | None, now: datetime, limit: int
) -> bool:
    """Whether `pool`, read before the write lock was taken, is still the pool at `now`: the same
    query, and the same active facts with the same embedding model now (read under the lock, two
    columns instead of every fact's row). A fact's text, entity, visibility and validity never
    change in place (a change retracts it, which takes it out of the pool); its vector changes only
    with its model (`fleetmem reindex`)."""
    if pool.token[:4] != (tenant, entity_slug, now, limit):
        return False
    sql, args = _pool_sql(tenant, entity_slug, now, limit, "fact_id, vector_model")
    current = conn.execute(sql, args).fetchall()
    return len(current) == len(pool.facts) and set(current) == {(f.fact_id, f.vector_model) for f in pool.facts}
