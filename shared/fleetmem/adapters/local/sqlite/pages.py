"""The page store (with its aliases, links, timeline and near-miss name index); the other page roles
are `page_feed` and `page_listing` (`page_table.SqlitePageTable`)."""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Unpack

from fleetmem.adapters.local.sqlite.db import (
    _IN_CHUNK,
    _batch_get,
    _marks,
    _next_change,
    leaf_of,
    ms,
    ms_opt,
    tenant_key,
)
from fleetmem.adapters.local.sqlite.page_table import _HEAD_COLS, _PAGE_COLS, SqlitePageTable, _head_of, _page_of
from fleetmem.adapters.local.sqlite.search import fts_match
from fleetmem.errors import Conflict, TooLarge, Unavailable
from fleetmem.memory.slugs import match_key
from fleetmem.models import Page, PageHead, PageMatch
from fleetmem.ports.pages import (
    NAME_KEYS_MAX,
    BareCandidates,
    PageLeadSource,
    PageLookup,
    PageLookupOptions,
    canonical_type,
)

# ---------------------------------------------------------------------------------------------
# pages

#: SELECTs per compound statement (SQLite allows 500; each takes at most 3 parameters)
_COMPOUND_TERMS = 200


def _names_text(page: Page) -> str:
    """What `keyword` near-misses match on: title, slug words and aliases."""
    return " ".join([page.title, page.slug.replace("/", " ").replace("-", " "), *page.aliases])


class SqlitePageStore(SqlitePageTable):
    def get(self, tenant: str, slug: str) -> Page | None:
        row = self.db.one(f"SELECT {_PAGE_COLS} FROM pages WHERE tenant = ? AND slug = ?", (tenant, slug))
        return None if row is None else _page_of(row)

    def many(self, tenant: str, slugs: Sequence[str]) -> list[Page]:
        wanted = list(dict.fromkeys(s for s in slugs if s))
        found: dict[str, Page] = {}
        for i in range(0, len(wanted), _IN_CHUNK):
            group = wanted[i : i + _IN_CHUNK]
            sql = f"SELECT {_PAGE_COLS} FROM pages WHERE tenant = ? AND slug IN ({_marks(len(group))})"
            found.update((p.slug, p) for p in map(_page_of, self.db.all(sql, (tenant, *group))))
        return [found[s] for s in wanted if s in found]

    def leads(self, tenant: str, slugs: Sequence[str]) -> list[PageLeadSource]:
        wanted = list(dict.fromkeys(s for s in slugs if s))
        found: dict[str, PageLeadSource] = {}
        for i in range(0, len(wanted), _IN_CHUNK):
            group = wanted[i : i + _IN_CHUNK]
            sql = (
                "SELECT slug, title, type, visibility, aliases, body FROM pages "
                f"WHERE tenant = ? AND slug IN ({_marks(len(group))})"
            )
            for slug, title, kind, vis, aliases, body in self.db.all(sql, (tenant, *group)):
                found[slug] = PageLeadSource(slug, title, kind, vis, tuple(json.loads(aliases)), body)
        return [found[s] for s in wanted if s in found]

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
            updated, vis, group = ms(page.updated_at), page.visibility, canonical_type(page.type)
            firsts = {ln.target: i for i, ln in reversed(list(enumerate(page.links)))}
            conn.executemany(
                "INSERT INTO links (tenant, source, ord, target, type, context, source_updated_at, "
                "source_visibility, source_group, first_to_target) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (t, s, i, ln.target, ln.type, ln.context, updated, vis, group, int(firsts[ln.target] == i))
                    for i, ln in enumerate(page.links)
                ],
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

    def names(self, tenant: str, name_keys: Sequence[str], *, world_only: bool) -> list[tuple[str, PageMatch]]:
        wanted = [k for k in dict.fromkeys(name_keys) if k][:NAME_KEYS_MAX]
        if not wanted:
            return []
        vis = " AND p.visibility = 'world'" if world_only else ""
        head = "p.slug, p.title, p.type, p.visibility, p.updated_at, p.last_retrieved_at"
        marks = _marks(len(wanted))
        # one statement: both index seeks (aliases by key, pages by title key)
        sql = (
            f"SELECT DISTINCT 'alias', a.alias, {head} FROM aliases a CROSS JOIN pages p ON p.tenant = a.tenant "
            f"AND p.slug = a.slug WHERE a.tenant = ? AND a.alias IN ({marks}){vis} "
            f"UNION ALL SELECT 'title', p.title_lc, {head} FROM pages p "
            f"WHERE p.tenant = ? AND p.title_lc IN ({marks}){vis}"
        )
        rows = self.db.read(lambda conn: conn.execute(sql, (tenant, *wanted, tenant, *wanted)).fetchall())
        return [(r[1], PageMatch(page=_head_of(r[2:]), via=r[0])) for r in rows]

    def lookup(self, tenant: str, **opts: Unpack[PageLookupOptions]) -> list[PageMatch]:
        q = PageLookup.of(opts)
        suffix = q.suffix
        vis = " AND p.visibility = 'world'" if q.world_only else ""
        lim = max(0, int(q.limit))
        head = "p.slug, p.title, p.type, p.visibility, p.updated_at, p.last_retrieved_at"
        # each way: the rows it reads up to the key column, and the keys asked for (the slugs as
        # given, the other keys without the empty one); an alias or title key gives at most `lim`
        # pages, the first by slug, so a key is answered alike however many keys are asked with it
        # (entity{name} and entity{names}, D35)
        ways: tuple[tuple[Literal["alias", "title", "slug"], str, list[str]], ...] = (
            # DISTINCT: a page holding an alias under both key forms is one candidate
            (
                "alias",
                "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY slug) AS rn FROM "
                f"(SELECT DISTINCT {head}, a.alias AS k FROM aliases a CROSS JOIN pages p ON p.tenant = a.tenant "
                "AND p.slug = a.slug WHERE a.tenant = ? AND a.alias IN ({marks}){vis})) WHERE rn <= ? ORDER BY slug",
                [a for a in dict.fromkeys(q.aliases) if a][:_IN_CHUNK],
            ),
            (
                "title",
                f"SELECT * FROM (SELECT {head}, p.title_lc AS k, ROW_NUMBER() OVER (PARTITION BY p.title_lc "
                "ORDER BY p.slug) AS rn FROM pages p WHERE p.tenant = ? AND p.title_lc IN ({marks}){vis}) "
                "WHERE rn <= ? ORDER BY slug",
                [t for t in dict.fromkeys(q.titles) if t][:_IN_CHUNK],
            ),
            (
                # a slug names one page: no cut
                "slug",
                f"SELECT {head} FROM pages p WHERE p.tenant = ? AND p.slug IN ({{marks}}){{vis}} "
                "ORDER BY p.slug LIMIT ?",
                list(dict.fromkeys(q.slugs))[:_IN_CHUNK],
            ),
        )

        def run(conn: sqlite3.Connection) -> list[PageMatch]:
            out: list[PageMatch] = []
            for via, select, wanted in ways:
                if wanted:
                    sql = select.format(marks=_marks(len(wanted)), vis=vis)
                    out += [
                        PageMatch(page=_head_of(r[:6]), via=via, key=r[6] if via == "alias" else "")
                        for r in conn.execute(sql, (tenant, *wanted, lim if via != "slug" else len(wanted)))
                    ]
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

    def bare_candidates(
        self, tenant: str, *, suffixes: Sequence[str], prefixes: Sequence[str], world_only: bool, limit: int = 10
    ) -> BareCandidates:
        vis = " AND p.visibility = 'world'" if world_only else ""
        head = "p.slug, p.title, p.type, p.visibility, p.updated_at, p.last_retrieved_at"
        lim = max(0, int(limit))
        # one read, one index seek per suffix and per prefix, each a statement of fixed text (so
        # prepared once per connection, not once per mix of names as one compound statement was):
        # per suffix a seek on (tenant, leaf) (a multi-segment suffix is checked below on the rows
        # found, so it takes them all); per prefix its own slug and the next two slugs, read as the
        # first three slugs from it (the third kept only when the first is the prefix itself)
        by_leaf = f"SELECT {head} FROM pages p WHERE p.tenant = ? AND p.leaf = ?{vis} ORDER BY p.slug"
        from_prefix = f"SELECT {head} FROM pages p WHERE p.tenant = ? AND p.slug >= ?{vis} ORDER BY p.slug LIMIT 3"
        by_suffix: dict[str, list[PageMatch]] = {s: [] for s in suffixes}
        by_prefix: dict[str, list[PageHead]] = {p: [] for p in prefixes}

        def run(conn: sqlite3.Connection) -> None:
            for suffix in by_suffix:
                leaf, tail = suffix.rsplit("/", 1)[-1], "/" + suffix
                if "/" in suffix:
                    rows = conn.execute(by_leaf, (tenant, leaf))
                else:
                    rows = conn.execute(by_leaf + " LIMIT ?", (tenant, leaf, lim))
                found = by_suffix[suffix]
                for r in rows:
                    if len(found) >= lim:
                        break
                    if r[0].endswith(tail):
                        found.append(PageMatch(page=_head_of(r), via="suffix"))
            for prefix in by_prefix:
                first = conn.execute(from_prefix, (tenant, prefix)).fetchall()
                by_prefix[prefix] = [_head_of(r) for r in (first if first and first[0][0] == prefix else first[:2])]

        if by_suffix or by_prefix:
            self.db.read(run)
        return BareCandidates(suffix=by_suffix, prefix=by_prefix)

    def keyword_many(
        self, tenant: str, texts: Sequence[str], *, world_only: bool, limit: int = 3
    ) -> list[list[PageHead]]:
        matches = [fts_match(t, tenant) for t in texts]
        asked = [(i, m) for i, m in enumerate(matches) if m is not None]
        out: list[list[PageHead]] = [[] for _ in texts]
        if not asked:
            return out
        vis = " AND p.visibility = 'world'" if world_only else ""
        term = (
            "SELECT * FROM (SELECT {i}, p.slug, p.title, p.type, p.visibility, p.updated_at, p.last_retrieved_at "
            "FROM page_names_fts f JOIN pages p ON p.rowid = f.rowid "
            f"WHERE page_names_fts MATCH ? AND p.tenant = ?{vis} ORDER BY f.rank, p.slug LIMIT ?)"
        )
        n = max(0, int(limit))
        for at in range(0, len(asked), _COMPOUND_TERMS):
            group = asked[at : at + _COMPOUND_TERMS]
            sql = " UNION ALL ".join(term.format(i=i) for i, _ in group)
            try:
                rows = self.db.all(sql, [a for _, m in group for a in (m, tenant, n)])
            except Unavailable as exc:
                if exc.reason == "busy":
                    raise
                # a query the FTS engine rejects: each text alone, so only that one yields nothing
                for i, _ in group:
                    out[i] = self.keyword(tenant, texts[i], world_only=world_only, limit=limit)
                continue
            for r in rows:
                out[r[0]].append(_head_of(r[1:]))
        return out

    def core(self, tenant: str, *, world_only: bool, limit: int) -> builtins.list[Page]:
        # the WHERE term is the partial index's own, so the read is one seek on `pages_core`
        vis = " AND visibility = 'world'" if world_only else ""
        rows = self.db.all(
            f"SELECT {_PAGE_COLS} FROM pages WHERE tenant = ? AND json_type(frontmatter, '$.core') = 'true'"
            f"{vis} ORDER BY slug LIMIT ?",
            (tenant, max(0, int(limit))),
        )
        return [_page_of(r) for r in rows]

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
