"""`PageListing` on SQLite: list_pages, memory_stats and backlinks."""

from __future__ import annotations

import builtins
import sqlite3
from datetime import datetime
from typing import Any, Unpack

from fleetmem.adapters.local.sqlite.db import ms
from fleetmem.adapters.local.sqlite.page_table import _HEAD_COLS, SqlitePageTable, _head_of
from fleetmem.models import Backlink, PageHead
from fleetmem.ports import PageTallies
from fleetmem.ports.pages import (
    REFERRING_PER_GROUP,
    REFERRING_ROWS,
    PageList,
    PageListOptions,
    Referring,
)


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

        def run(conn: sqlite3.Connection) -> tuple[builtins.list[Backlink], int]:
            # the newest `limit` rows of `links_recent` (source_updated_at is the source page's, kept
            # current by `put`) and the target's non-mention link count from `link_groups`
            count = sum(int(g[2]) for g in _group_counts(conn, tenant, slug, world_only))
            return _newest_links(conn, tenant, slug, where, limit), count

        return self.db.read(run)

    def referring(self, tenant: str, slug: str, *, world_only: bool, limit: int = 10) -> Referring:
        where = _link_where(world_only)

        def run(conn: sqlite3.Connection) -> Referring:
            # the newest link rows, as `backlinks` reads them
            links = _newest_links(conn, tenant, slug, where, limit)
            # distinct linking pages per group, and the non-mention link count `backlinks` gives: the
            # counts the `link_groups` triggers keep (a row per group and visibility)
            groups = _group_counts(conn, tenant, slug, world_only)
            # each group's newest pages: an index range per group, read up to the rows shown
            term = (
                "SELECT * FROM (SELECT DISTINCT source_updated_at, source, source_group FROM links "
                f"INDEXED BY links_group {where} "
                f"AND source_group = ? ORDER BY source_updated_at DESC, source DESC LIMIT {REFERRING_PER_GROUP})"
            )
            newest: builtins.list[tuple[int, str, str]] = []
            for at in range(0, len(groups), 100):
                part = groups[at : at + 100]
                sql = " UNION ALL ".join([term] * len(part))
                newest += conn.execute(sql, [a for g in part for a in (tenant, slug, g[0])]).fetchall()
            newest.sort(reverse=True)
            totals = {str(g[0]): int(g[1]) for g in groups}
            # groups in the order of their newest page; the pages of the first REFERRING_ROWS rows
            ordered = {str(r[2]): totals.get(str(r[2]), 0) for r in newest} | totals
            shown = [r[1] for r in newest[:REFERRING_ROWS]]
            vis = " AND visibility = 'world'" if world_only else ""
            sql = f"SELECT {_HEAD_COLS} FROM pages WHERE tenant = ? AND slug IN ({', '.join('?' * len(shown))}){vis}"
            heads = {r[0]: _head_of(r) for r in conn.execute(sql, (tenant, *shown))} if shown else {}
            rows = [heads[s] for s in shown if s in heads]
            count = sum(int(g[2] or 0) for g in groups)
            return Referring(links=links, link_count=count, count=sum(totals.values()), totals=ordered, heads=rows)

        return self.db.read(run)


def _link_where(world_only: bool) -> str:
    vis = " AND source_visibility = 'world'" if world_only else ""
    return f"WHERE tenant = ? AND target = ? AND source <> target{vis}"


def _newest_links(conn: sqlite3.Connection, tenant: str, slug: str, where: str, limit: int) -> builtins.list[Backlink]:
    rows = conn.execute(
        f"SELECT source, type, context FROM links INDEXED BY links_recent {where} "
        "ORDER BY source_updated_at DESC, source, ord LIMIT ?",
        (tenant, slug, max(0, int(limit))),
    ).fetchall()
    return [Backlink(source=r[0], type=r[1], context=r[2]) for r in rows]


def _group_counts(
    conn: sqlite3.Connection, tenant: str, slug: str, world_only: bool
) -> builtins.list[tuple[str, int, int]]:
    """(group, linking pages, non-mention links) of this target, from the counts the `link_groups`
    triggers keep (schema 11): a row per group and visibility, never a scan of the link rows."""
    vis = " AND source_visibility = 'world'" if world_only else ""
    rows = conn.execute(
        f"SELECT source_group, sum(pages), sum(typed) FROM link_groups WHERE tenant = ? AND target = ?{vis} "
        "GROUP BY source_group",
        (tenant, slug),
    ).fetchall()
    return [(str(g), int(p), int(n)) for g, p, n in rows]
