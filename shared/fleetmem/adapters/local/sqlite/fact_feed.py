"""`FactFeed` on SQLite: what delta reads (change numbers, expiries, creations after a time)."""

from __future__ import annotations

from datetime import datetime
from typing import Unpack

from fleetmem.adapters.local.sqlite.db import _keyset_floor, ms
from fleetmem.adapters.local.sqlite.fact_table import _FACT_COLS, _MAX_SEQ, SqliteFactTable, _active_clause, _fact_of
from fleetmem.models import Fact
from fleetmem.ports.facts import FactChanges, FactChangesOptions, FactSince, FactSinceOptions


class SqliteFactFeed(SqliteFactTable):
    def created_after(self, tenant: str, *, now: datetime, **opts: Unpack[FactSinceOptions]) -> list[Fact]:
        q = FactSince.of(opts)
        clause, extra = _active_clause(now)
        sql = f"SELECT {_FACT_COLS} FROM facts WHERE tenant = ? AND (created_at, seq) > (?, ?){clause}"
        if q.world_only:
            sql += " AND visibility = 'world'"
        sql += " ORDER BY created_at, seq LIMIT ?"
        args = (tenant, *_position(q), *extra, max(0, int(q.limit)))
        return [_fact_of(r) for r in self.db.all(sql, args)]

    def changed_after(self, tenant: str, **opts: Unpack[FactChangesOptions]) -> list[tuple[int, Fact]]:
        q = FactChanges.of(opts)
        clause, extra = _active_clause(q.now)
        if q.retracted:  # active, or retracted by a write (a TTL expiry is listed by expired_between)
            clause, extra = (
                " AND (expired_at IS NOT NULL OR superseded_by IS NOT NULL OR valid_until IS NULL OR valid_until > ?)",
                [ms(q.now)],
            )
        sql = f"SELECT {_FACT_COLS}, change_seq FROM facts WHERE tenant = ? AND change_seq > ?{clause}"
        if q.world_only:
            sql += " AND visibility = 'world'"
        sql += " ORDER BY change_seq LIMIT ?"
        args = (tenant, int(q.seq), *extra, max(0, int(q.limit)))
        return [(r[-1], _fact_of(r)) for r in self.db.all(sql, args)]  # change_seq follows the fact columns

    def expired_between(self, tenant: str, *, until: datetime, **opts: Unpack[FactSinceOptions]) -> list[Fact]:
        q = FactSince.of(opts)
        sql = (
            f"SELECT {_FACT_COLS} FROM facts INDEXED BY facts_expiry WHERE tenant = ? "
            "AND valid_until IS NOT NULL AND (valid_until, seq) > (?, ?) AND valid_until <= ? "
            "AND expired_at IS NULL AND superseded_by IS NULL"
        )
        if q.world_only:
            sql += " AND visibility = 'world'"
        sql += " ORDER BY valid_until, seq LIMIT ?"
        args = (tenant, *_position(q), ms(until), max(0, int(q.limit)))
        return [_fact_of(r) for r in self.db.all(sql, args)]

    def change_floor(
        self, tenant: str, *, after: datetime | None, walk: bool = False, after_seq: int | None = None
    ) -> int:
        position = None if after is None else (ms(after), _MAX_SEQ if after_seq is None else int(after_seq))
        return _keyset_floor(self.db, tenant, "fact", "facts", "created_at, seq", position, walk)


def _position(q: FactSince) -> tuple[int, int]:
    """The (time, seq) keyset position of `q` in the table's terms (`after_seq=None`: after the instant)."""
    return ms(q.after), _MAX_SEQ if q.after_seq is None else int(q.after_seq)
