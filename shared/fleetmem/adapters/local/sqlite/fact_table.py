"""The `facts` table every SQLite fact role reads and writes: the row mapping, the shared SQL, and
`SqliteFactTable`, the base the role stores (`facts`, `fact_decisions`, `fact_feed`, `fact_listing`)
share."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from fleetmem.adapters.local.sqlite.audit import _insert_audit
from fleetmem.adapters.local.sqlite.db import Database, _marks, _next_change, dt_of, dt_opt, ms, ms_opt, row_model
from fleetmem.errors import Conflict
from fleetmem.models import AuditEvent, Fact
from fleetmem.ports import DecisionPool

_FACT_COLS = (
    "tenant, fact_id, seq, text, kind, entity_slug, provenance, visibility, session_id, client_id, "
    "created_at, valid_until, expired_at, expired_reason, expired_by, superseded_by, supersedes, "
    "vector, vector_model, content_origin"
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
        f.content_origin,
    )


_fact_of = row_model(Fact, _FACT_COLS, created_at=dt_of, valid_until=dt_opt, expired_at=dt_opt)

_MAX_SEQ = 2**63 - 1  # above every fact seq: "(created_at, seq) > (t, _MAX_SEQ)" is created_at > t


def _active_clause(now: datetime) -> tuple[str, list[Any]]:
    return (
        " AND expired_at IS NULL AND superseded_by IS NULL AND (valid_until IS NULL OR valid_until > ?)",
        [ms(now)],
    )


def _status_sql(now: datetime) -> tuple[str, list[Any]]:
    """`Fact.status` as an SQL expression over a facts row (the same order of tests)."""
    return (
        "(CASE WHEN superseded_by IS NOT NULL THEN 'superseded' "
        "WHEN valid_until IS NOT NULL AND valid_until <= ? AND (expired_at IS NULL OR valid_until <= expired_at) "
        "THEN 'expired' WHEN expired_at IS NOT NULL THEN 'forgotten' ELSE 'active' END)",
        [ms(now)],
    )


def _pool_sql(tenant: str, entity_slug: str | None, now: datetime, limit: int, cols: str) -> tuple[str, list[Any]]:
    """The decision pool's query (`decision_pool`), newest first; for no entity, the unattributed
    facts among the tenant's `limit` newest active ones, chosen in SQL: only their rows are read
    back (a remember with an entity reads this pool too, and at scale nearly all of the newest
    facts have an entity)."""
    clause, extra = _active_clause(now)
    order = " ORDER BY created_at DESC, seq DESC"
    if entity_slug is None:
        newest = f"SELECT rowid FROM facts WHERE tenant = ?{clause}{order} LIMIT ?"
        sql = f"SELECT {cols} FROM facts WHERE rowid IN ({newest}) AND entity_slug IS NULL{order}"
        return sql, [tenant, *extra, max(0, int(limit))]
    sql = f"SELECT {cols} FROM facts WHERE tenant = ? AND entity_slug = ?{clause}{order} LIMIT ?"
    return sql, [tenant, entity_slug, *extra, max(0, int(limit))]


def _pool_ids(
    conn: sqlite3.Connection, tenant: str, entity_slug: str | None, now: datetime, limit: int
) -> frozenset[str]:
    sql, args = _pool_sql(tenant, entity_slug, now, limit, "fact_id")
    return frozenset(r[0] for r in conn.execute(sql, args))


def _check_tenant(fact: Fact, supersede: Fact | None) -> None:
    if supersede is not None and supersede.tenant != fact.tenant:
        raise Conflict("the superseded fact belongs to another tenant")


def _read_pool(
    conn: sqlite3.Connection, tenant: str, entity_slug: str | None, now: datetime, limit: int
) -> DecisionPool:
    """The decision pool read on `conn`, with the ids of its active facts as the token `put` checks."""
    sql, args = _pool_sql(tenant, entity_slug, now, limit, _FACT_COLS)
    facts = [_fact_of(r) for r in conn.execute(sql, args)]
    return DecisionPool(facts, (tenant, entity_slug, now, limit, frozenset(f.fact_id for f in facts)))


def _insert(conn: sqlite3.Connection, fact: Fact, supersede: Fact | None, audit: Sequence[AuditEvent]) -> None:
    """Store `fact` in the caller's write transaction, retracting `supersede` (Conflict when it is
    no longer active or was changed) and writing the `audit` rows."""
    if supersede is not None:
        row = conn.execute(
            "SELECT text, valid_until, expired_at, superseded_by FROM facts WHERE tenant = ? AND fact_id = ?",
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
        # the retraction is a change of the old fact: its next change number (delta reports it)
        conn.execute(
            "UPDATE facts SET expired_at = ?, expired_reason = ?, expired_by = ?, superseded_by = ?, "
            "change_seq = ? WHERE tenant = ? AND fact_id = ?",
            (
                created,
                "superseded",
                fact.client_id,
                fact.fact_id,
                _next_change(conn, fact.tenant, "fact"),
                fact.tenant,
                supersede.fact_id,
            ),
        )
    # a duplicate fact_id violates UNIQUE: `_translate` turns that into Conflict
    row = (*_fact_row(fact), _next_change(conn, fact.tenant, "fact"))
    conn.execute(f"INSERT INTO facts ({_FACT_COLS}, change_seq) VALUES ({_marks(21)})", row)
    for event in audit:
        _insert_audit(conn, event)


class SqliteFactTable:
    """One role over the `facts` table."""

    def __init__(self, db: Database) -> None:
        self.db = db
