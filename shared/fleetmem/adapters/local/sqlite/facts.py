"""The fact store."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from fleetmem.adapters.local.sqlite.audit import _insert_audit
from fleetmem.adapters.local.sqlite.db import (
    Database,
    _batch_get,
    _increment,
    _keyset_floor,
    _marks,
    _next_change,
    dt_of,
    dt_opt,
    ms,
    ms_opt,
    row_model,
)
from fleetmem.errors import Conflict, NotFound
from fleetmem.models import AuditEvent, Fact
from fleetmem.ports import DecisionPool, FactFilter, FactTallies, FactWrite

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
    """The decision pool's query (`decision_pool`); for no entity, the tenant's newest active facts
    (the caller keeps the unattributed ones)."""
    clause, extra = _active_clause(now)
    where, args = ("", []) if entity_slug is None else (" AND entity_slug = ?", [entity_slug])
    sql = f"SELECT {cols} FROM facts WHERE tenant = ?{where}{clause} ORDER BY created_at DESC, seq DESC LIMIT ?"
    return sql, [tenant, *args, *extra, max(0, int(limit))]


def _pool_ids(
    conn: sqlite3.Connection, tenant: str, entity_slug: str | None, now: datetime, limit: int
) -> frozenset[str]:
    sql, args = _pool_sql(tenant, entity_slug, now, limit, "fact_id, entity_slug")
    return frozenset(r[0] for r in conn.execute(sql, args) if entity_slug is not None or r[1] is None)


def _check_tenant(fact: Fact, supersede: Fact | None) -> None:
    if supersede is not None and supersede.tenant != fact.tenant:
        raise Conflict("the superseded fact belongs to another tenant")


def _read_pool(
    conn: sqlite3.Connection, tenant: str, entity_slug: str | None, now: datetime, limit: int
) -> DecisionPool:
    """The decision pool read on `conn`, with the ids of its active facts as the token `put` checks."""
    sql, args = _pool_sql(tenant, entity_slug, now, limit, _FACT_COLS)
    facts = [f for f in map(_fact_of, conn.execute(sql, args)) if entity_slug is not None or f.entity_slug is None]
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
    conn.execute(f"INSERT INTO facts ({_FACT_COLS}, change_seq) VALUES ({_marks(20)})", row)
    for event in audit:
        _insert_audit(conn, event)


class SqliteFactStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def next_seq(self, tenant: str) -> int:
        return self.db.write(lambda c: _increment(c, "fact_seq", "seq", {"tenant": tenant}))

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

    def put(
        self,
        fact: Fact,
        *,
        supersede: Fact | None = None,
        audit: Sequence[AuditEvent] = (),
        decided: DecisionPool | None = None,
    ) -> None:
        _check_tenant(fact, supersede)

        def run(conn: sqlite3.Connection) -> None:
            if decided is not None:
                # the token is what the decision depended on: the ids of the pool's active facts
                tenant, entity_slug, at, limit, ids = decided.token
                if tenant != fact.tenant or entity_slug != fact.entity_slug:
                    raise Conflict("the decision pool belongs to another entity")
                if _pool_ids(conn, tenant, entity_slug, at, limit) != ids:
                    raise Conflict("the entity's facts changed since the decision")
            _insert(conn, fact, supersede, audit)

        self.db.write(run)

    def get(self, tenant: str, fact_id: str) -> Fact | None:
        row = self.db.one(f"SELECT {_FACT_COLS} FROM facts WHERE tenant = ? AND fact_id = ?", (tenant, fact_id))
        return None if row is None else _fact_of(row)

    def _query(
        self, tenant: str, where: str, params: list[Any], now: datetime, active_only: bool, world_only: bool, limit: int
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
        rows = self.db.all(sql, args)
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
        return self._query(tenant, " AND entity_slug = ?", [entity_slug], now, active_only, world_only, limit)

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
        return self._query(tenant, " AND session_id = ?", [session_id], now, active_only, world_only, limit)

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
        return self._query(tenant, where, params, now, active_only, world_only, limit)

    def created_after(
        self,
        tenant: str,
        *,
        after: datetime,
        after_seq: int | None,
        now: datetime,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        clause, extra = _active_clause(now)
        sql = f"SELECT {_FACT_COLS} FROM facts WHERE tenant = ? AND (created_at, seq) > (?, ?){clause}"
        if world_only:
            sql += " AND visibility = 'world'"
        sql += " ORDER BY created_at, seq LIMIT ?"
        args = (tenant, ms(after), _MAX_SEQ if after_seq is None else int(after_seq), *extra, max(0, int(limit)))
        return [_fact_of(r) for r in self.db.all(sql, args)]

    def many(self, tenant: str, fact_ids: Sequence[str]) -> list[Fact]:
        found = _batch_get(self.db, f"SELECT {_FACT_COLS} FROM facts", "fact_id", tenant, fact_ids, _fact_of, key=1)
        return [found[i] for i in fact_ids if i in found]

    def count_active(self, tenant: str, entity_slug: str, *, now: datetime, world_only: bool = True) -> int:
        clause, extra = _active_clause(now)
        sql = f"SELECT count(*) FROM facts WHERE tenant = ? AND entity_slug = ?{clause}"
        if world_only:
            sql += " AND visibility = 'world'"
        return int(self.db.read(lambda c: c.execute(sql, (tenant, entity_slug, *extra)).fetchone()[0]))

    def listing(
        self,
        tenant: str,
        *,
        now: datetime,
        world_only: bool,
        where: FactFilter,
        before: tuple[datetime, int] | None = None,
        limit: int = 50,
    ) -> list[Fact]:
        sql = f"SELECT {_FACT_COLS} FROM facts WHERE tenant = ?"
        args: list[Any] = [tenant]
        for column, value in (
            ("entity_slug", where.entity_slug),
            ("session_id", where.session_id),
            ("kind", where.kind),
        ):
            if value is not None:
                sql += f" AND {column} = ?"
                args.append(value)
        if where.provenance is not None:
            sql += " AND fm_icontains(provenance, ?)"
            args.append(where.provenance)
        if where.created_after is not None:
            sql += " AND created_at > ?"
            args.append(ms(where.created_after))
        if where.created_before is not None:
            sql += " AND created_at < ?"
            args.append(ms(where.created_before))
        if before is not None:
            sql += " AND (created_at, seq) < (?, ?)"
            args += [ms(before[0]), int(before[1])]
        if where.state != "any":
            status, extra = _status_sql(now)
            sql += f" AND {status} = ?"
            args += [*extra, where.state]
        if world_only:
            sql += " AND visibility = 'world'"
        sql += " ORDER BY created_at DESC, seq DESC LIMIT ?"
        args.append(max(0, int(limit)))
        return [_fact_of(r) for r in self.db.all(sql, args)]

    def tallies(self, tenant: str, *, now: datetime, world_only: bool, since: datetime, top: int = 10) -> FactTallies:
        seen = " AND visibility = 'world'" if world_only else ""
        status, extra = _status_sql(now)
        active, active_args = _active_clause(now)

        def run(c: sqlite3.Connection) -> FactTallies:
            by_status = dict(
                c.execute(
                    f"SELECT {status} AS st, count(*) FROM facts WHERE tenant = ?{seen} GROUP BY st", (*extra, tenant)
                ).fetchall()
            )
            entity = f"FROM facts WHERE tenant = ? AND entity_slug IS NOT NULL{active}{seen}"
            (entities,) = c.execute(f"SELECT count(DISTINCT entity_slug) {entity}", (tenant, *active_args)).fetchone()
            busiest = c.execute(
                f"SELECT entity_slug, count(*) AS n {entity} GROUP BY entity_slug ORDER BY n DESC, entity_slug LIMIT ?",
                (tenant, *active_args, max(0, int(top))),
            ).fetchall()
            per_day = c.execute(
                "SELECT strftime('%Y-%m-%d', created_at / 1000, 'unixepoch') AS d, count(*) FROM facts "
                f"WHERE tenant = ? AND created_at >= ?{seen} GROUP BY d",
                (tenant, ms(since)),
            ).fetchall()
            return FactTallies(
                status={k: int(by_status.get(k, 0)) for k in ("active", "superseded", "forgotten", "expired")},
                entities=int(entities),
                busiest=[(str(slug), int(n)) for slug, n in busiest],
                per_day={str(d): int(n) for d, n in per_day},
            )

        return self.db.read(run)

    def expire(
        self,
        tenant: str,
        fact_id: str,
        *,
        at: datetime,
        reason: str | None,
        actor: str,
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
                "UPDATE facts SET expired_at = ?, expired_reason = ?, expired_by = ?, change_seq = ? "
                "WHERE tenant = ? AND fact_id = ?",
                (when, reason, actor, _next_change(conn, tenant, "fact"), tenant, fact_id),
            )
            if audit is not None:
                _insert_audit(conn, audit)
            return True

        return self.db.write(run)

    def purge(self, tenant: str, fact_id: str) -> bool:
        return self.db.write(
            lambda c: c.execute("DELETE FROM facts WHERE tenant = ? AND fact_id = ?", (tenant, fact_id)).rowcount > 0
        )

    def changed_after(
        self,
        tenant: str,
        *,
        seq: int,
        now: datetime,
        world_only: bool = True,
        limit: int = 50,
        retracted: bool = False,
    ) -> list[tuple[int, Fact]]:
        clause, extra = _active_clause(now)
        if retracted:  # active, or retracted by a write (a TTL expiry is listed by expired_between)
            clause, extra = (
                " AND (expired_at IS NOT NULL OR superseded_by IS NOT NULL OR valid_until IS NULL OR valid_until > ?)",
                [ms(now)],
            )
        sql = f"SELECT {_FACT_COLS}, change_seq FROM facts WHERE tenant = ? AND change_seq > ?{clause}"
        if world_only:
            sql += " AND visibility = 'world'"
        sql += " ORDER BY change_seq LIMIT ?"
        args = (tenant, int(seq), *extra, max(0, int(limit)))
        return [(r[19], _fact_of(r)) for r in self.db.all(sql, args)]

    def expired_between(
        self,
        tenant: str,
        *,
        after: datetime,
        after_seq: int | None,
        until: datetime,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        sql = (
            f"SELECT {_FACT_COLS} FROM facts INDEXED BY facts_expiry WHERE tenant = ? "
            "AND valid_until IS NOT NULL AND (valid_until, seq) > (?, ?) AND valid_until <= ? "
            "AND expired_at IS NULL AND superseded_by IS NULL"
        )
        if world_only:
            sql += " AND visibility = 'world'"
        sql += " ORDER BY valid_until, seq LIMIT ?"
        args = (tenant, ms(after), _MAX_SEQ if after_seq is None else int(after_seq), ms(until), max(0, int(limit)))
        return [_fact_of(r) for r in self.db.all(sql, args)]

    def change_floor(
        self, tenant: str, *, after: datetime | None, walk: bool = False, after_seq: int | None = None
    ) -> int:
        position = None if after is None else (ms(after), _MAX_SEQ if after_seq is None else int(after_seq))
        return _keyset_floor(self.db, tenant, "fact", "facts", "created_at, seq", position, walk)

    # --------------------------------------------------------------- memory packs (fleetmem.pack)

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[list[Fact], str | None]:
        """Every fact of the tenant in any state, by (created_at, seq, fact_id) ascending, from the
        opaque position `after` (None: the start); the position to continue from, None at the end."""
        created, seq, fact_id = (-1, -1, "") if after is None else _scan_position(after)
        sql = (
            f"SELECT {_FACT_COLS} FROM facts WHERE tenant = ? AND (created_at, seq, fact_id) > (?, ?, ?) "
            "ORDER BY created_at, seq, fact_id LIMIT ?"
        )
        n = max(1, int(limit))
        rows = self.db.all(sql, (tenant, created, seq, fact_id, n))
        facts = [_fact_of(r) for r in rows]
        if len(facts) < n:
            return facts, None
        last = facts[-1]
        return facts, f"{ms(last.created_at)}:{last.seq}:{last.fact_id}"

    def raise_seq(self, tenant: str, at_least: int) -> None:
        """Make the tenant's fact sequence continue above `at_least` (facts stored with their own seq)."""
        self.db.write(
            lambda c: c.execute(
                "INSERT INTO fact_seq (tenant, seq) VALUES (?, ?) "
                "ON CONFLICT (tenant) DO UPDATE SET seq = max(seq, excluded.seq)",
                (tenant, int(at_least)),
            )
        )


def _scan_position(after: str) -> tuple[int, int, str]:
    created, seq, fact_id = after.split(":", 2)
    return int(created), int(seq), fact_id
