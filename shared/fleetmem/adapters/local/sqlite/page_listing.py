"""`PageListing` on SQLite: list_pages, memory_stats and backlinks."""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Unpack

from fleetmem.adapters.local.sqlite.db import ms
from fleetmem.adapters.local.sqlite.page_table import _HEAD_COLS, SqlitePageTable, _head_of
from fleetmem.adapters.local.sqlite.schema import MENTION_TYPES
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
            # the newest link rows, as `backlinks` reads them, and one more: when they are all of this
            # target's link rows (the common case), the counts and each group's newest pages come
            # from them; otherwise from `link_groups` and an index range per group
            rows = conn.execute(
                f"SELECT source, type, context, source_updated_at, source_group, first_to_target FROM links "
                f"INDEXED BY links_recent {where} ORDER BY source_updated_at DESC, source, ord LIMIT ?",
                (tenant, slug, max(0, int(limit)) + 1),
            ).fetchall()
            links = [Backlink(source=r[0], type=r[1], context=r[2]) for r in rows[: max(0, int(limit))]]
            if len(rows) <= limit:
                groups, newest = _groups_of_rows(rows)
            else:
                groups = _group_counts(conn, tenant, slug, world_only)
                newest = _newest_per_group(conn, tenant, slug, where, [g for g, _, _ in groups])
            totals = {g: pages for g, pages, _ in groups}
            # groups in the order of their newest page; the pages of the first REFERRING_ROWS rows
            ordered = {r[2]: totals.get(r[2], 0) for r in newest} | totals
            shown = [r[1] for r in newest[:REFERRING_ROWS]]
            vis = " AND visibility = 'world'" if world_only else ""
            sql = f"SELECT {_HEAD_COLS} FROM pages WHERE tenant = ? AND slug IN ({', '.join('?' * len(shown))}){vis}"
            heads = {r[0]: _head_of(r) for r in conn.execute(sql, (tenant, *shown))} if shown else {}
            count = sum(n for _, _, n in groups)
            return Referring(
                links=links,
                link_count=count,
                count=sum(totals.values()),
                totals=ordered,
                heads=[heads[s] for s in shown if s in heads],
            )

        return self.db.read(run)


#: (source_updated_at, source, group), newest first
_Newest = builtins.list[tuple[int, str, str]]


def _groups_of_rows(rows: Sequence[Sequence[Any]]) -> tuple[builtins.list[tuple[str, int, int]], _Newest]:
    """`_group_counts` and `_newest_per_group` from EVERY link row of a target (source, type, context,
    source_updated_at, source_group, first_to_target), as those two read them from the store."""
    pages: dict[str, int] = {}
    typed: dict[str, int] = {}
    seen: dict[str, tuple[int, str, str]] = {}
    for source, kind, _, updated, group, first in rows:
        pages[group] = pages.get(group, 0) + int(first)
        typed[group] = typed.get(group, 0) + int(kind not in MENTION_TYPES)
        seen.setdefault(source, (int(updated), str(source), str(group)))
    kept: dict[str, int] = {}
    newest: _Newest = []
    for row in sorted(seen.values(), reverse=True):
        kept[row[2]] = kept.get(row[2], 0) + 1
        if kept[row[2]] <= REFERRING_PER_GROUP:
            newest.append(row)
    return [(g, pages[g], typed[g]) for g in pages], newest


def _newest_per_group(conn: sqlite3.Connection, tenant: str, slug: str, where: str, groups: Sequence[str]) -> _Newest:
    """Each group's newest linking pages: an index range per group, read up to the rows shown."""
    term = (
        "SELECT * FROM (SELECT DISTINCT source_updated_at, source, source_group FROM links "
        f"INDEXED BY links_group {where} "
        f"AND source_group = ? ORDER BY source_updated_at DESC, source DESC LIMIT {REFERRING_PER_GROUP})"
    )
    newest: _Newest = []
    for at in range(0, len(groups), 100):
        part = groups[at : at + 100]
        sql = " UNION ALL ".join([term] * len(part))
        newest += [
            (int(u), str(s), str(g)) for u, s, g in conn.execute(sql, [a for g in part for a in (tenant, slug, g)])
        ]
    newest.sort(reverse=True)
    return newest


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
