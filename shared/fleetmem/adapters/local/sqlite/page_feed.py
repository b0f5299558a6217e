"""`PageFeed` on SQLite: what delta reads (page change numbers, tombstones, updates after a position)."""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Unpack

from fleetmem.adapters.local.sqlite.db import _keyset_floor, dt_of, ms
from fleetmem.adapters.local.sqlite.page_table import _HEAD_COLS, SqlitePageTable, _head_of
from fleetmem.models import PageHead, PageTombstone
from fleetmem.ports.pages import PageSince, PageSinceOptions


class SqlitePageFeed(SqlitePageTable):
    def updated_since(self, tenant: str, **opts: Unpack[PageSinceOptions]) -> builtins.list[PageHead]:
        q = PageSince.of(opts)
        vis = " AND visibility = 'world'" if q.world_only else ""
        sql = (
            f"SELECT {_HEAD_COLS} FROM pages WHERE tenant = ? AND (updated_at, slug) > (?, ?){vis} "
            "ORDER BY updated_at, slug LIMIT ?"
        )
        args = (tenant, ms(q.since), q.slug, max(0, int(q.limit)))
        return [_head_of(r) for r in self.db.all(sql, args)]

    def changed_after(
        self, tenant: str, *, seq: int, world_only: bool, limit: int, now: datetime | None = None
    ) -> builtins.list[tuple[int, PageHead]]:
        # One writer at a time commits in change order and readers see every commit: no horizon.
        vis = " AND visibility = 'world'" if world_only else ""
        sql = (
            f"SELECT {_HEAD_COLS}, change_seq FROM pages WHERE tenant = ? AND change_seq > ?{vis} "
            "ORDER BY change_seq LIMIT ?"
        )
        args = (tenant, int(seq), max(0, int(limit)))
        return [(r[6], _head_of(r)) for r in self.db.all(sql, args)]

    def deleted_after(
        self, tenant: str, *, seq: int, world_only: bool, limit: int
    ) -> builtins.list[tuple[int, PageTombstone]]:
        vis = " AND visibility = 'world'" if world_only else ""
        sql = (
            "SELECT slug, visibility, deleted_at, change_seq FROM page_tombstones "
            f"WHERE tenant = ? AND change_seq > ?{vis} ORDER BY change_seq LIMIT ?"
        )
        rows = self.db.all(sql, (tenant, int(seq), max(0, int(limit))))
        return [(r[3], PageTombstone(slug=r[0], visibility=r[1], deleted_at=dt_of(r[2]))) for r in rows]

    def change_floor(self, tenant: str, *, since: datetime | None, slug: str = "", walk: bool = False) -> int:
        position = None if since is None else (ms(since), slug)
        return _keyset_floor(self.db, tenant, "page", "pages", "updated_at, slug", position, walk)
