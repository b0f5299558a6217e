"""PageStore on DynamoDB (table `pages`, see docs/table-design.md); the other page roles are
`page_feed` and `page_listing`, over the same table (`page_table.PageTable`).

One partition per page (`pk = "<tenant>#<slug>"`): the page row (`sk = "P"`, everything the page
holds) plus derived rows that exist only to be indexed: `A#<alias>` (resolution by alias),
`L#<target>#<type>` (backlinks), `W#<word>` (near-miss suggestions by word) and `X#<first 3
letters>` (near-miss suggestions by word prefix: the row lists the page's words that start with
those letters, so "Pri" finds "Priya Raman"). A put replaces the derived rows in the same
transaction as the page row. Pages written before the `X#` rows existed get them on their next put.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Unpack
from urllib.parse import unquote

from fleetmem.adapters.aws import changes, keys
from fleetmem.adapters.aws.dynamo import (
    ITEM_LIMIT_BYTES,
    approx_item_size,
    call,
    chunks,
    parallel,
    to_ddb,
    ts,
)
from fleetmem.adapters.aws.page_table import (
    CORE_SK,
    HEAD_PROJECTION,
    NAME_SETS,
    NAME_SK,
    PAGE_SK,
    PREFIX_LEN,
    TOMBSTONE_SK,
    TX_MAX,
    core_key,
    core_update,
    derived_rows,
    item_to_head,
    item_to_page,
    name_marks,
    name_pk,
    name_updates,
    nameable,
    page_condition,
    page_pk,
    page_to_item,
    parse_mark,
    words,
)
from fleetmem.adapters.aws.page_upkeep import PageUpkeep
from fleetmem.errors import TooLarge
from fleetmem.memory.core import is_core
from fleetmem.memory.slugs import last_segment, match_key
from fleetmem.models import Page, PageHead, PageMatch
from fleetmem.ports.pages import NAME_KEYS_MAX, BareCandidates, PageLeadSource, PageLookup, PageLookupOptions


class DynamoPageStore(PageUpkeep):
    def get(self, tenant: str, slug: str) -> Page | None:
        out = call(
            self._db.get_item,
            TableName=self.table,
            Key={"pk": {"S": page_pk(tenant, slug)}, "sk": {"S": PAGE_SK}},
        )
        return next((item_to_page(i) for i in keys.owned_items([out.get("Item")], tenant, table="pages")), None)

    def _partition_keys(self, tenant: str, slug: str) -> builtins.list[str]:
        req: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": page_pk(tenant, slug)}},
            "ProjectionExpression": "sk",
        }
        return [i["sk"]["S"] for i in self._query_raw(req)]

    def lookup(self, tenant: str, **opts: Unpack[PageLookupOptions]) -> builtins.list[PageMatch]:
        # D24/D35: alias and title keys are read from the name items (one BatchGetItem of up to 100
        # keys per chunk, then one of the heads they list), so one name and a batch of fifty read
        # the same items; a key no name item is kept for (more than NGRAM_MAX words, or too long)
        # is its own by_alias/by_title Query. Each key gives at most `limit` pages (name items: the
        # first in slug order).
        q = PageLookup.of(opts)
        world_only, limit, suffix = q.world_only, q.limit, q.suffix

        def take(
            items: Iterator[dict[str, Any]], via: str, keep: Callable[[dict[str, Any]], bool]
        ) -> builtins.list[PageMatch]:
            out: builtins.list[PageMatch] = []
            for item in items:
                if self._visible(item, world_only) and keep(item):
                    key = str(item.get("alias", "")) if via == "alias" else ""
                    out.append(PageMatch(page=item_to_head(item), via=via, key=key))  # type: ignore[arg-type]
                    if len(out) >= limit:
                        break
            return out

        asked = {
            "alias": [k for k in dict.fromkeys(q.aliases) if k],
            "title": [k for k in dict.fromkeys(q.titles) if k],
        }
        named = [k for k in dict.fromkeys([*asked["alias"], *asked["title"]]) if nameable(k)]
        wanted = [s for s in dict.fromkeys(q.slugs) if s]
        thunks: builtins.list[Callable[[], Any]] = [
            functools.partial(self._name_items, tenant, named),
            functools.partial(self.heads, tenant, wanted),
        ]
        for index, attr, via in (("by_alias", "ak", "alias"), ("by_title", "tk", "title")):
            for k in asked[via]:
                if not nameable(k):
                    gsi = functools.partial(self._gsi, tenant, index, attr, keys.key(tenant, k))
                    thunks.append(functools.partial(lambda g, v: take(g(), v, lambda _: True), gsi, via))
        if suffix:
            tail = "/" + suffix
            thunks.append(
                lambda: take(
                    self._gsi(tenant, "by_leaf", "lk", keys.key(tenant, last_segment(suffix))),
                    "suffix",
                    lambda i: str(i["slug"]).endswith(tail),
                )
            )
        got = parallel(thunks)
        items, slug_heads, rest = got[0], got[1], got[2:]
        matches = [PageMatch(page=h, via="slug") for h in slug_heads if not world_only or h.visibility == "world"]
        ways = {"alias": set(asked["alias"]), "title": set(asked["title"])}
        listed = self._listed(items, ways)
        if listed:
            known = {h.slug: h for h in slug_heads}
            known.update((h.slug, h) for h in self.heads(tenant, [s for _, _, s in listed if s not in known]))
            per_key: dict[tuple[str, str], builtins.list[PageMatch]] = {}
            for key, via, m in self._listed_matches(listed, known, world_only=world_only):
                per_key.setdefault((via, key), []).append(m)
            for found in per_key.values():
                matches += sorted(found, key=lambda m: m.page.slug)[:limit]
        matches += [m for group in rest for m in group]
        # a page found under both key forms is one candidate of its way (per alias it holds: a
        # batch may ask for two of one page's aliases)
        return list({(m.via, m.page.slug, m.key): m for m in matches}.values())

    @staticmethod
    def _listed(items: builtins.list[dict[str, Any]], ways: dict[str, set[str]]) -> builtins.list[tuple[str, str, str]]:
        """(key, via, slug) of every slug the name items list, for the ways each key was asked for."""
        listed: builtins.list[tuple[str, str, str]] = []
        for item in items:
            key = unquote(str(item["pk"]).rsplit(keys.SEP, 1)[-1])
            for way, attr in NAME_SETS.items():
                via = "alias" if way == "a" else "title"
                if key in ways[via]:
                    listed += [(key, via, str(s)) for s in sorted(item.get(attr) or ())]
        return listed

    @staticmethod
    def _listed_matches(
        listed: builtins.list[tuple[str, str, str]], heads: dict[str, PageHead], *, world_only: bool
    ) -> Iterator[tuple[str, str, PageMatch]]:
        for key, via, slug in listed:
            head = heads.get(slug)
            if head is None or (world_only and head.visibility != "world"):
                continue  # a page deleted since, or private for a remote caller
            if via == "title" and match_key(head.title) != key:
                continue
            yield key, via, PageMatch(page=head, via=via, key=key if via == "alias" else "")  # type: ignore[arg-type]

    def names(self, tenant: str, name_keys: Sequence[str], *, world_only: bool) -> builtins.list[tuple[str, PageMatch]]:
        # one BatchGetItem of the name items (at most NAME_KEYS_MAX = 100 keys, its limit), then
        # one of the heads of the pages they list (only when some key is a name)
        wanted = [k for k in dict.fromkeys(name_keys) if k][:NAME_KEYS_MAX]
        listed = self._listed(self._name_items(tenant, wanted), {"alias": set(wanted), "title": set(wanted)})
        if not listed:
            return []
        heads = {h.slug: h for h in self.heads(tenant, [s for _, _, s in listed])}
        return [(key, m) for key, _, m in self._listed_matches(listed, heads, world_only=world_only)]

    def _name_items(self, tenant: str, wanted: Sequence[str]) -> builtins.list[dict[str, Any]]:
        """The name items of `wanted` (consistent BatchGetItems of 100 keys, concurrently)."""

        def fetch(group: Sequence[str]) -> builtins.list[dict[str, Any]]:
            pending: dict[str, Any] = {
                self.table: {
                    "Keys": [{"pk": {"S": name_pk(tenant, k)}, "sk": {"S": NAME_SK}} for k in group],
                    "ConsistentRead": True,
                }
            }
            raws: builtins.list[dict[str, Any]] = []
            while pending:
                out = call(self._db.batch_get_item, RequestItems=pending)
                raws += out.get("Responses", {}).get(self.table, [])
                pending = out.get("UnprocessedKeys") or {}
            return raws

        groups = parallel([functools.partial(fetch, g) for g in chunks(list(wanted), NAME_KEYS_MAX)])
        return builtins.list(keys.owned_items([i for g in groups for i in g], tenant, table="pages"))

    def heads(self, tenant: str, slugs: Sequence[str]) -> builtins.list[PageHead]:
        return [item_to_head(i) for i in self._batch_items(tenant, slugs, HEAD_PROJECTION + ", pk, tenant")]

    def many(self, tenant: str, slugs: Sequence[str]) -> builtins.list[Page]:
        return [item_to_page(i) for i in self._batch_items(tenant, slugs, "")]

    def leads(self, tenant: str, slugs: Sequence[str]) -> builtins.list[PageLeadSource]:
        # the items `many` reads (one request pattern), each made into a page as `many` makes it
        return [PageLeadSource.of(p) for p in self.many(tenant, slugs)]

    def bare_candidates(
        self, tenant: str, *, suffixes: Sequence[str], prefixes: Sequence[str], world_only: bool, limit: int = 10
    ) -> BareCandidates:
        # one concurrent round: a suffix Query per suffix, one BatchGetItem of every prefix's own
        # slug, and the two slugs after each prefix (a by_slug Query each)
        def suffix_of(s: str) -> builtins.list[PageMatch]:
            return self.lookup(tenant, aliases=[], titles=[], slugs=[], suffix=s, world_only=world_only, limit=limit)

        thunks: builtins.list[Callable[[], Any]] = [functools.partial(suffix_of, s) for s in suffixes]
        thunks.append(functools.partial(self.heads, tenant, prefixes))
        thunks += [functools.partial(self._by_slug, tenant, world_only=world_only, limit=2, after=p) for p in prefixes]
        got = parallel(thunks)
        n = len(suffixes)
        own = {h.slug: h for h in got[n] if not world_only or h.visibility == "world"}
        after = got[n + 1 :]
        return BareCandidates(
            suffix=dict(zip(suffixes, got[:n], strict=True)),
            prefix={p: [*([own[p]] if p in own else []), *nxt] for p, nxt in zip(prefixes, after, strict=True)},
        )

    def keyword_many(
        self, tenant: str, texts: Sequence[str], *, world_only: bool, limit: int = 3
    ) -> builtins.list[builtins.list[PageHead]]:
        # one concurrent round for every text: one Query per distinct 3-letter prefix of their
        # words, however many texts share it. A prefix row lists the page's words with that prefix,
        # so it answers both "a word of the page is the term" and "starts with the term" (the `W#`
        # row of a word exists exactly when its prefix row lists it: `derived_rows`).
        terms_of = [words(t)[:8] if limit > 0 else [] for t in texts]
        prefixes = builtins.list(dict.fromkeys(w[:PREFIX_LEN] for terms in terms_of for w in terms))

        def by_prefix(pre: str) -> builtins.list[dict[str, Any]]:
            return builtins.list(self._gsi(tenant, "by_word", "wk", keys.prefix_key(tenant, pre), limit=100))

        rows = dict(zip(prefixes, parallel([functools.partial(by_prefix, p) for p in prefixes]), strict=True))
        return [self._ranked_words(terms, rows, world_only=world_only, limit=limit) for terms in terms_of]

    def _ranked_words(
        self, terms: builtins.list[str], rows: dict[str, builtins.list[dict[str, Any]]], *, world_only: bool, limit: int
    ) -> builtins.list[PageHead]:
        """A text's near-misses from its words' prefix rows: pages with more of its words first (a
        word of the page that is, or starts with, the term), then more whole words, then the newest."""
        exact: dict[str, int] = {}
        matched: dict[str, set[str]] = {}
        heads: dict[str, PageHead] = {}
        for term in terms:
            for item in rows[term[:PREFIX_LEN]]:
                listed = [str(w) for w in item.get("pw") or ()]
                if not self._visible(item, world_only) or not any(w.startswith(term) for w in listed):
                    continue
                s = item["slug"]
                matched.setdefault(s, set()).add(term)
                if term in listed:
                    exact[s] = exact.get(s, 0) + 1
                heads[s] = item_to_head(item)
        ranked = sorted(
            heads.values(),
            key=lambda h: (-len(matched[h.slug]), -exact.get(h.slug, 0), -h.updated_at.timestamp(), h.slug),
        )
        return ranked[:limit]

    def keyword(self, tenant: str, text: str, *, world_only: bool, limit: int = 3) -> builtins.list[PageHead]:
        return self.keyword_many(tenant, [text], world_only=world_only, limit=limit)[0]

    def put(self, page: Page, *, expected_updated_at: datetime | Literal[""] | None = None) -> None:
        item = page_to_item(page)
        if approx_item_size(item) > ITEM_LIMIT_BYTES - 8 * 1024:
            raise TooLarge("page is larger than one DynamoDB item can hold (400 KB)")
        rows = derived_rows(page)
        existing = self._partition_keys(page.tenant, page.slug)
        pk = page_pk(page.tenant, page.slug)
        core = is_core(page)
        if core:
            rows.append({"pk": pk, "sk": CORE_SK, "typ": "core_mark"})  # D32
        keep = {r["sk"] for r in rows} | {PAGE_SK}
        stale = [sk for sk in existing if sk not in keep]
        deletes = [{"pk": pk, "sk": sk} for sk in stale]
        names = self._name_changes(page, stale)
        if core != (CORE_SK in existing):  # D32: the core item changes only when the mark does
            names.append(core_update(self.table, page.tenant, page.slug, add=core))
        condition = page_condition(expected_updated_at)
        if len(rows) + len(deletes) + len(names) + 2 > TX_MAX:
            # too many rows for one transaction: derived rows and name items first, then the page
            # row with its change number (readers see the page only with its rows)
            if condition:  # refuse before touching the derived rows; the page row checks again
                self._check_page(pk, condition)
            self._write(rows, deletes)
            self._update_each(names)
            rows, deletes, names = [], [], []

        def build(n: int) -> builtins.list[dict[str, Any]]:
            # D21: the page row carries a pending change number; a reader numbers it
            actions: builtins.list[dict[str, Any]] = [
                {"Delete": {"TableName": self.table, "Key": to_ddb(k)}} for k in deletes
            ]
            actions += [{"Put": {"TableName": self.table, "Item": to_ddb(p)}} for p in rows]
            actions += names
            actions.append({"Put": {"TableName": self.table, "Item": to_ddb({**item, "cs": n}), **condition}})
            return actions

        changes.transact_pending(self._db, build=build)

    def _name_changes(self, page: Page, stale: builtins.list[str]) -> builtins.list[dict[str, Any]]:
        """D24: the name items' updates of a put: the page's names added, the names it lost removed."""
        removed = [m for m in (parse_mark(sk) for sk in stale) if m is not None]
        current = builtins.list(name_marks(page).values())
        return name_updates(self.table, page.tenant, page.slug, current, removed)

    def delete(self, tenant: str, slug: str, *, at: datetime | None = None) -> bool:
        page = self.get(tenant, slug)
        if page is None:
            return False
        existing = self._partition_keys(tenant, slug)
        pk = page_pk(tenant, slug)
        derived = [{"pk": pk, "sk": sk} for sk in existing if sk not in (PAGE_SK, TOMBSTONE_SK)]
        marks = [m for m in (parse_mark(sk) for sk in existing) if m is not None]
        names = name_updates(self.table, tenant, slug, [], marks)
        if CORE_SK in existing:  # D32
            names.append(core_update(self.table, tenant, slug, add=False))
        if len(derived) + len(names) + 3 > TX_MAX:
            self._write([], derived)  # too many rows for one transaction: derived rows first
            self._update_each(names)
            derived, names = [], []
        when = ts(at or datetime.now(UTC))

        def build(n: int) -> builtins.list[dict[str, Any]]:
            # the page row's delete and its tombstone (with a pending page change number) land together
            tomb = {
                "pk": pk,
                "sk": TOMBSTONE_SK,
                "typ": "tombstone",
                "tenant": tenant,
                "tp": keys.tenant(tenant),
                "slug": slug,
                "title": page.title,
                "visibility": page.visibility,
                "updated_at": when,
                "cs": n,
            }
            actions: builtins.list[dict[str, Any]] = [
                {"Delete": {"TableName": self.table, "Key": to_ddb({"pk": pk, "sk": PAGE_SK})}}
            ]
            actions += [{"Delete": {"TableName": self.table, "Key": to_ddb(k)}} for k in derived]
            actions += names
            actions.append({"Put": {"TableName": self.table, "Item": to_ddb(tomb)}})
            return actions

        changes.transact_pending(self._db, build=build)
        return True

    def core(self, tenant: str, *, world_only: bool, limit: int) -> builtins.list[Page]:
        # D32: one GetItem of the core item; the pages it lists (one BatchGetItem) only when it lists some
        out = call(self._db.get_item, TableName=self.table, Key=core_key(tenant), ConsistentRead=True)
        item = next(keys.owned_items([out.get("Item")], tenant, table="pages"), None)
        slugs = sorted(str(s) for s in (item or {}).get("slugs") or ())[: max(0, int(limit))]
        if not slugs:
            return []
        request: dict[str, Any] = {
            self.table: {"Keys": [{"pk": {"S": page_pk(tenant, s)}, "sk": {"S": PAGE_SK}} for s in slugs]}
        }
        raws: builtins.list[dict[str, Any]] = []
        while request:
            got = call(self._db.batch_get_item, RequestItems=request)
            raws += got.get("Responses", {}).get(self.table, [])
            request = got.get("UnprocessedKeys") or {}
        pages = [item_to_page(i) for i in keys.owned_items(raws, tenant, table="pages")]
        return sorted(
            (p for p in pages if is_core(p) and self._visible({"visibility": p.visibility}, world_only)),
            key=lambda p: p.slug,
        )

    # -- memory packs (fleetmem.pack) ----------------------------------------------------------

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[builtins.list[Page], str | None]:
        """Every page of the tenant, whole, by slug ascending after the slug `after`."""
        n = max(1, int(limit))
        heads = self._by_slug(tenant, world_only=False, limit=n, after=after)
        pages = [p for p in (self.get(tenant, h.slug) for h in heads) if p is not None]
        return pages, (heads[-1].slug if len(heads) == n else None)

    def backfill_changes(self, tenant: str) -> int:
        """Number the tenant's pages written before change numbers existed (no `cs`), so delta
        lists them (`fleetmem admin reindex`); returns how many."""
        req = self._tenant_range(
            "by_slug",
            tenant,
            values={":p": {"S": PAGE_SK}},
            FilterExpression="attribute_not_exists(cs) AND sk = :p",
            ProjectionExpression="pk, sk",
        )
        return self._backfill(tenant, req)
