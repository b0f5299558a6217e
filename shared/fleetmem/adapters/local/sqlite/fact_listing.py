"""`FactListing` on SQLite: list_facts, memory_stats and the per-entity/session/time reads."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Unpack

from fleetmem.adapters.local.sqlite.db import dt_opt, ms
from fleetmem.adapters.local.sqlite.fact_table import _FACT_COLS, SqliteFactTable, _active_clause, _fact_of, _status_sql
from fleetmem.models import Fact
from fleetmem.ports import EntityFacts, FactTallies
from fleetmem.ports.facts import FactList, FactListOptions, FactRead, FactReadOptions, keep_card_facts

_KIND = [c.strip() for c in _FACT_COLS.split(",")].index("kind")


class SqliteFactListing(SqliteFactTable):
    def by_entity(self, tenant: str, entity_slug: str, **opts: Unpack[FactReadOptions]) -> list[Fact]:
        return self._read(tenant, " AND entity_slug = ?", [entity_slug], FactRead.of(opts))

    def by_session(self, tenant: str, session_id: str, **opts: Unpack[FactReadOptions]) -> list[Fact]:
        return self._read(tenant, " AND session_id = ?", [session_id], FactRead.of(opts))

    def recent(self, tenant: str, **opts: Unpack[FactReadOptions]) -> list[Fact]:
        return self._read(tenant, "", [], FactRead.of(opts))

    def _read(self, tenant: str, where: str, params: list[Any], q: FactRead) -> list[Fact]:
        """by_entity, by_session, recent: the rows `where` keeps, newest first, as `q` asks. `after`
        is a range on created_at, the column after the equalities in each of the indexes
        (facts_entity, facts_session, facts_created), so the read stays one index range."""
        sql = f"SELECT {_FACT_COLS} FROM facts WHERE tenant = ?{where}"
        args: list[Any] = [tenant, *params]
        if q.after is not None:
            sql += " AND created_at > ?"
            args.append(ms(q.after))
        if q.active_only:
            clause, extra = _active_clause(q.now)
            sql += clause
            args += extra
        if q.world_only:
            sql += " AND visibility = 'world'"
        sql += " ORDER BY created_at DESC, seq DESC LIMIT ?"
        args.append(max(0, int(q.limit)))
        return [_fact_of(r) for r in keep_card_facts(self.db.all(sql, args), q.newest, lambda r: r[_KIND])]

    def entity_tallies(
        self, tenant: str, slugs: Sequence[str], *, now: datetime, world_only: bool
    ) -> dict[str, EntityFacts]:
        """One GROUP BY over `facts_entity`, which carries every column it reads (a covering index:
        no table row is read), an index range per slug."""
        wanted = list(dict.fromkeys(slugs))
        if not wanted:
            return {}
        at = ms(now)
        sql = (
            "SELECT entity_slug, sum(expired_at IS NULL AND superseded_by IS NULL "
            "AND (valid_until IS NULL OR valid_until > ?)), max(created_at), max(expired_at), "
            "max(CASE WHEN valid_until <= ? THEN valid_until END) FROM facts "
            f"WHERE tenant = ? AND entity_slug IN ({', '.join('?' * len(wanted))})"
            + (" AND visibility = 'world'" if world_only else "")
            + " GROUP BY entity_slug"
        )
        rows = self.db.all(sql, [at, at, tenant, *wanted])
        return {
            str(slug): EntityFacts(active=int(active or 0), changed_at=dt_opt(max(t for t in times if t is not None)))
            for slug, active, *times in rows
        }

    def listing(self, tenant: str, **opts: Unpack[FactListOptions]) -> list[Fact]:
        q = FactList.of(opts)
        now, world_only, where, before, limit = q.now, q.world_only, q.where, q.before, q.limit
        sql = f"SELECT {_FACT_COLS} FROM facts WHERE tenant = ?"
        args: list[Any] = [tenant]
        for column, value in (
            ("entity_slug", where.entity_slug),
            ("session_id", where.session_id),
            ("kind", where.kind),
            ("client_id", where.client_id),
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
