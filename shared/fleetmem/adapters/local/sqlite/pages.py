"""The page store (with its aliases, links, timeline and near-miss name index)."""

from __future__ import annotations

import builtins
import json
import re
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from fleetmem.adapters.local.sqlite.db import (
    _IN_CHUNK,
    Database,
    _batch_get,
    _keyset_floor,
    _marks,
    _next_change,
    dt_of,
    dt_opt,
    leaf_of,
    ms,
    ms_opt,
    row_model,
    tenant_key,
)
from fleetmem.adapters.local.sqlite.search import fts_match
from fleetmem.errors import Conflict, TooLarge, Unavailable
from fleetmem.memory.slugs import match_key
from fleetmem.models import (
    Backlink,
    Link,
    Page,
    PageHead,
    PageMatch,
    PageTombstone,
    TimelineEntry,
)
from fleetmem.ports import PageTallies
from fleetmem.protocol import MENTION_LINK_TYPE

# ---------------------------------------------------------------------------------------------
# pages

#: link types that are mentions: listed as backlinks but not counted (the singular is tolerated)
_MENTION_TYPES = (MENTION_LINK_TYPE, "mention")
_HEAD_COLS = "slug, title, type, visibility, updated_at, last_retrieved_at"
_PAGE_COLS = (
    "tenant, slug, title, type, aliases, summary, visibility, body, links, timeline, frontmatter, "
    "created_at, updated_at, last_retrieved_at, author"
)
_WORD = re.compile(r"\w+")


_head_of = row_model(PageHead, _HEAD_COLS, updated_at=dt_of, last_retrieved_at=dt_opt)
_page_of = row_model(
    Page,
    _PAGE_COLS,
    aliases=lambda v: tuple(json.loads(v)),
    links=lambda v: tuple(Link(**x) for x in json.loads(v)),
    timeline=lambda v: tuple(TimelineEntry(**x) for x in json.loads(v)),
    frontmatter=json.loads,
    created_at=dt_of,
    updated_at=dt_of,
    last_retrieved_at=dt_opt,
)


def _names_text(page: Page) -> str:
    """What `keyword` near-misses match on: title, slug words and aliases."""
    return " ".join([page.title, page.slug.replace("/", " ").replace("-", " "), *page.aliases])


class SqlitePageStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, tenant: str, slug: str) -> Page | None:
        row = self.db.one(f"SELECT {_PAGE_COLS} FROM pages WHERE tenant = ? AND slug = ?", (tenant, slug))
        return None if row is None else _page_of(row)

    def put(self, page: Page, *, expected_updated_at: datetime | Literal[""] | None = None) -> None:
        try:
            frontmatter = json.dumps(page.frontmatter, default=str, ensure_ascii=False)
        except (TypeError, ValueError):
            raise TooLarge("the page frontmatter cannot be stored") from None
        links = json.dumps([ln.model_dump() for ln in page.links], ensure_ascii=False)
        timeline = json.dumps([t.model_dump() for t in page.timeline], ensure_ascii=False)
        aliases = json.dumps(list(page.aliases), ensure_ascii=False)
        t, s = page.tenant, page.slug

        def run(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT rowid, updated_at FROM pages WHERE tenant = ? AND slug = ?", (t, s)).fetchone()
            # the condition is read and the page written in one write transaction (BEGIN IMMEDIATE)
            if expected_updated_at == "" and row is not None:
                raise Conflict("a page is already stored under this slug")
            if isinstance(expected_updated_at, datetime) and (row is None or row[1] != ms(expected_updated_at)):
                raise Conflict("the stored page has another updated_at")
            values: tuple[Any, ...] = (
                leaf_of(s),
                page.title,
                match_key(page.title),
                page.type,
                aliases,
                page.summary,
                page.visibility,
                page.body,
                links,
                timeline,
                frontmatter,
                ms(page.created_at),
                ms(page.updated_at),
                ms_opt(page.last_retrieved_at),
                page.author,
                _next_change(conn, t, "page"),  # D14: numbered inside this write transaction
            )
            rowid: int | None
            if row is None:
                rowid = conn.execute(
                    "INSERT INTO pages (leaf, title, title_lc, type, aliases, summary, visibility, body, "
                    "links, timeline, frontmatter, created_at, updated_at, last_retrieved_at, author, "
                    f"change_seq, tenant, slug) VALUES ({_marks(18)})",
                    (*values, t, s),
                ).lastrowid
            else:
                rowid = row[0]
                conn.execute(
                    "UPDATE pages SET leaf = ?, title = ?, title_lc = ?, type = ?, aliases = ?, summary = ?, "
                    "visibility = ?, body = ?, links = ?, timeline = ?, frontmatter = ?, created_at = ?, "
                    "updated_at = ?, last_retrieved_at = ?, author = ?, change_seq = ? WHERE rowid = ?",
                    (*values, rowid),
                )
            assert rowid is not None
            conn.execute("DELETE FROM page_tombstones WHERE tenant = ? AND slug = ?", (t, s))
            self._delete_derived(conn, t, s, rowid)
            conn.executemany(
                "INSERT OR IGNORE INTO aliases (tenant, alias, slug) VALUES (?, ?, ?)",
                [(t, a, s) for a in {match_key(a) for a in page.aliases} if a],
            )
            updated, vis = ms(page.updated_at), page.visibility
            conn.executemany(
                "INSERT INTO links (tenant, source, ord, target, type, context, source_updated_at, "
                "source_visibility) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(t, s, i, ln.target, ln.type, ln.context, updated, vis) for i, ln in enumerate(page.links)],
            )
            conn.executemany(
                "INSERT INTO timeline (tenant, slug, ord, date, text) VALUES (?, ?, ?, ?, ?)",
                [(t, s, i, e.date, e.text) for i, e in enumerate(page.timeline)],
            )
            conn.execute(
                "INSERT INTO page_names_fts (rowid, tenant_key, names) VALUES (?, ?, ?)",
                (rowid, tenant_key(t), _names_text(page)),
            )

        self.db.write(run)

    @staticmethod
    def _delete_derived(conn: sqlite3.Connection, tenant: str, slug: str, rowid: int) -> None:
        conn.execute("DELETE FROM aliases WHERE tenant = ? AND slug = ?", (tenant, slug))
        conn.execute("DELETE FROM links WHERE tenant = ? AND source = ?", (tenant, slug))
        conn.execute("DELETE FROM timeline WHERE tenant = ? AND slug = ?", (tenant, slug))
        conn.execute("DELETE FROM page_names_fts WHERE rowid = ?", (rowid,))

    def delete(self, tenant: str, slug: str, *, at: datetime | None = None) -> bool:
        when = ms(at or datetime.now(UTC))

        def run(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT rowid, visibility FROM pages WHERE tenant = ? AND slug = ?", (tenant, slug)
            ).fetchone()
            if row is None:
                return False
            self._delete_derived(conn, tenant, slug, row[0])
            conn.execute("DELETE FROM pages WHERE rowid = ?", (row[0],))
            conn.execute(
                "INSERT OR REPLACE INTO page_tombstones (tenant, slug, visibility, deleted_at, change_seq) "
                "VALUES (?, ?, ?, ?, ?)",
                (tenant, slug, row[1], when, _next_change(conn, tenant, "page")),
            )
            return True

        return self.db.write(run)

    def lookup(
        self,
        tenant: str,
        *,
        aliases: Sequence[str],
        titles: Sequence[str],
        slugs: Sequence[str],
        suffix: str,
        world_only: bool,
        limit: int = 10,
    ) -> list[PageMatch]:
        vis = " AND p.visibility = 'world'" if world_only else ""
        lim = max(0, int(limit))
        head = "p.slug, p.title, p.type, p.visibility, p.updated_at, p.last_retrieved_at"
        wanted_slugs = list(dict.fromkeys(slugs))[:_IN_CHUNK]
        wanted_aliases = [a for a in dict.fromkeys(aliases) if a][:_IN_CHUNK]
        wanted_titles = [t for t in dict.fromkeys(titles) if t][:_IN_CHUNK]

        def run(conn: sqlite3.Connection) -> list[PageMatch]:
            out: list[PageMatch] = []
            if wanted_aliases:
                # DISTINCT: a page holding an alias under both key forms is one candidate
                for r in conn.execute(
                    f"SELECT DISTINCT {head} FROM aliases a "
                    "CROSS JOIN pages p ON p.tenant = a.tenant AND p.slug = a.slug "
                    f"WHERE a.tenant = ? AND a.alias IN ({_marks(len(wanted_aliases))}){vis} "
                    "ORDER BY p.slug LIMIT ?",
                    (tenant, *wanted_aliases, lim),
                ):
                    out.append(PageMatch(page=_head_of(r), via="alias"))
            if wanted_titles:
                for r in conn.execute(
                    f"SELECT {head} FROM pages p "
                    f"WHERE p.tenant = ? AND p.title_lc IN ({_marks(len(wanted_titles))}){vis} "
                    "ORDER BY p.slug LIMIT ?",
                    (tenant, *wanted_titles, lim),
                ):
                    out.append(PageMatch(page=_head_of(r), via="title"))
            if wanted_slugs:
                for r in conn.execute(
                    f"SELECT {head} FROM pages p "
                    f"WHERE p.tenant = ? AND p.slug IN ({_marks(len(wanted_slugs))}){vis} "
                    "ORDER BY p.slug LIMIT ?",
                    (tenant, *wanted_slugs, lim),
                ):
                    out.append(PageMatch(page=_head_of(r), via="slug"))
            if suffix:
                # index seek on (tenant, leaf); a multi-segment suffix is checked on the few rows found
                tail = "/" + suffix
                n = 0
                for r in conn.execute(
                    f"SELECT {head} FROM pages p WHERE p.tenant = ? AND p.leaf = ?{vis} ORDER BY p.slug",
                    (tenant, suffix.rsplit("/", 1)[-1]),
                ):
                    if n >= lim:
                        break
                    if r[0].endswith(tail):
                        out.append(PageMatch(page=_head_of(r), via="suffix"))
                        n += 1
            return out

        return self.db.read(run)

    def heads(self, tenant: str, slugs: Sequence[str]) -> list[PageHead]:
        found = _batch_get(self.db, f"SELECT {_HEAD_COLS} FROM pages", "slug", tenant, slugs, _head_of, key=0)
        return [found[s] for s in dict.fromkeys(slugs) if s in found]

    def list(
        self,
        tenant: str,
        *,
        world_only: bool,
        limit: int,
        after: str | None = None,
        type: str | None = None,
    ) -> list[PageHead]:
        sql = f"SELECT {_HEAD_COLS} FROM pages WHERE tenant = ?"
        args: list[Any] = [tenant]
        if type is not None:
            sql += " AND type = ?"
            args.append(type)
        if after is not None:
            sql += " AND slug > ?"
            args.append(after)
        if world_only:
            sql += " AND visibility = 'world'"
        sql += " ORDER BY slug LIMIT ?"
        args.append(max(0, int(limit)))
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
        # Both reads stay inside the link indexes: the newest `limit` rows of `links_recent`
        # (source_updated_at is the source page's, kept current by `put`), and a count over the
        # covering `links_count` entries of this target.
        vis = " AND source_visibility = 'world'" if world_only else ""
        where = f"WHERE tenant = ? AND target = ? AND source <> target{vis}"

        def run(conn: sqlite3.Connection) -> tuple[builtins.list[Backlink], int]:
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

        return self.db.read(run)

    def updated_since(
        self,
        tenant: str,
        *,
        since: datetime,
        slug: str,
        world_only: bool,
        limit: int,
        now: datetime | None = None,
    ) -> builtins.list[PageHead]:
        vis = " AND visibility = 'world'" if world_only else ""
        sql = (
            f"SELECT {_HEAD_COLS} FROM pages WHERE tenant = ? AND (updated_at, slug) > (?, ?){vis} "
            "ORDER BY updated_at, slug LIMIT ?"
        )
        args = (tenant, ms(since), slug, max(0, int(limit)))
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

    def keyword(self, tenant: str, text: str, *, world_only: bool, limit: int = 3) -> builtins.list[PageHead]:
        match = fts_match(text, tenant)
        if match is None:
            return []
        vis = " AND p.visibility = 'world'" if world_only else ""
        sql = (
            f"SELECT p.slug, p.title, p.type, p.visibility, p.updated_at, p.last_retrieved_at "
            "FROM page_names_fts f JOIN pages p ON p.rowid = f.rowid "
            f"WHERE page_names_fts MATCH ? AND p.tenant = ?{vis} ORDER BY f.rank, p.slug LIMIT ?"
        )
        try:
            rows = self.db.all(sql, (match, tenant, max(0, int(limit))))
        except Unavailable as exc:
            if exc.reason == "busy":
                raise
            return []  # a query the FTS engine rejects yields no near-misses, never an error
        return [_head_of(r) for r in rows]

    # --------------------------------------------------------------- memory packs (fleetmem.pack)

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[builtins.list[Page], str | None]:
        """Every page of the tenant, whole, by slug ascending after the position `after` (a slug;
        None: the start); the position to continue from, None at the end."""
        n = max(1, int(limit))
        rows = self.db.all(
            f"SELECT {_PAGE_COLS} FROM pages WHERE tenant = ? AND slug > ? ORDER BY slug LIMIT ?",
            (tenant, after or "", n),
        )
        pages = [_page_of(r) for r in rows]
        return pages, (pages[-1].slug if len(pages) == n else None)
