"""`FactFeed` on SQLite: what delta reads (change numbers, expiries, creations after a time)."""

from __future__ import annotations

from datetime import datetime

from fleetmem.adapters.local.sqlite.db import (
    _keyset_floor,
    ms,
)
from fleetmem.adapters.local.sqlite.fact_table import (
    _FACT_COLS,
    _MAX_SEQ,
    SqliteFactTable,
    _active_clause,
    _fact_of,
)
from fleetmem.models import Fact


class SqliteFactFeed(SqliteFactTable):
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
