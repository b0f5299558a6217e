"""`PageListing` on SQLite: list_pages, memory_stats and backlinks."""

from __future__ import annotations

import builtins
import sqlite3
from datetime import datetime
from typing import Any, Unpack

from fleetmem.adapters.local.sqlite.db import ms
from fleetmem.adapters.local.sqlite.page_table import _HEAD_COLS, _MENTION_TYPES, SqlitePageTable, _head_of
from fleetmem.models import Backlink, PageHead
from fleetmem.ports import PageTallies
from fleetmem.ports.pages import PageList, PageListOptions, Referring


class SqlitePageListing(SqlitePageTable):
    def list(self, tenant: str, **opts: Unpack[PageListOptions]) -> builtins.list[PageHead]:
        q = PageList.of(opts)
        sql = f"SELECT {_HEAD_COLS} FROM pages WHERE tenant = ?"
        args: builtins.list[Any] = [tenant]
        if q.type is not None:
            sql += " AND type = ?"
            args.append(q.type)
        if q.after is not None:
            sql += " AND slug > ?"
            args.append(q.after)
        if q.world_only:
            sql += " AND visibility = 'world'"
        sql += " ORDER BY slug LIMIT ?"
        args.append(max(0, int(q.limit)))
        return [_head_of(r) for r in self.db.all(sql, args)]

    def tallies(self, tenant: str, *, world_only: bool, since: datetime) -> PageTallies:
        seen = " AND visibility = 'world'" if world_only else ""

        def run(c: sqlite3.Connection) -> PageTallies:
            (count,) = c.execute(f"SELECT count(*) FROM pages WHERE tenant = ?{seen}", (tenant,)).fetchone()
            per_day = c.execute(
                "SELECT strftime('%Y-%m-%d', updated_at / 1000, 'unixepoch') AS d, count(*) FROM pages "
                f"WHERE tenant = ? AND updated_at >= ?{seen} GROUP BY d",
                (tenant, ms(since)),
            ).fetchall()
            return PageTallies(pages=int(count), per_day={str(d): int(n) for d, n in per_day})

        return self.db.read(run)

    def backlinks(
        self, tenant: str, slug: str, *, world_only: bool, limit: int = 10
    ) -> tuple[builtins.list[Backlink], int]:
        where = _link_where(world_only)
        return self.db.read(lambda conn: _backlinks(conn, tenant, slug, where, limit))

    def referring(self, tenant: str, slug: str, *, world_only: bool, limit: int = 10) -> Referring:
        where = _link_where(world_only)

        def run(conn: sqlite3.Connection) -> Referring:
            links, count = _backlinks(conn, tenant, slug, where, limit)
            sources = conn.execute(
                f"SELECT source FROM links INDEXED BY links_recent {where} "
                "GROUP BY source ORDER BY max(source_updated_at) DESC, source",
                (tenant, slug),
            ).fetchall()
            return Referring(links=links, link_count=count, sources=[r[0] for r in sources])

        return self.db.read(run)


def _link_where(world_only: bool) -> str:
    vis = " AND source_visibility = 'world'" if world_only else ""
    return f"WHERE tenant = ? AND target = ? AND source <> target{vis}"


def _backlinks(
    conn: sqlite3.Connection, tenant: str, slug: str, where: str, limit: int
) -> tuple[builtins.list[Backlink], int]:
    # Both reads stay inside the link indexes: the newest `limit` rows of `links_recent`
    # (source_updated_at is the source page's, kept current by `put`), and a count over the
    # covering `links_count` entries of this target.
    rows = conn.execute(
        f"SELECT source, type, context FROM links INDEXED BY links_recent {where} "
        "ORDER BY source_updated_at DESC, source, ord LIMIT ?",
        (tenant, slug, max(0, int(limit))),
    ).fetchall()
    (count,) = conn.execute(
        f"SELECT count(*) FROM links INDEXED BY links_count {where} AND type NOT IN (?, ?)",
        (tenant, slug, *_MENTION_TYPES),
    ).fetchone()
    return [Backlink(source=r[0], type=r[1], context=r[2]) for r in rows], int(count)
