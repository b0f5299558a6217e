"""PageStore on DynamoDB (table `pages`, see docs/table-design.md).

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
import json
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from fleetmem.adapters.aws import changes, keys
from fleetmem.adapters.aws.dynamo import (
    ITEM_LIMIT_BYTES,
    AwsClients,
    DynamoStore,
    approx_item_size,
    as_int,
    call,
    chunks,
    parallel,
    parse_ts,
    query_all,
    same_named,
    to_ddb,
    translate_client_error,
    ts,
)
from fleetmem.adapters.aws.tables import HEAD_ATTRS, PAGES
from fleetmem.errors import TooLarge
from fleetmem.memory.slugs import last_segment, match_key
from fleetmem.models import Backlink, Link, Page, PageHead, PageMatch, PageTombstone, TimelineEntry
from fleetmem.ports import PageTallies

PAGE_SK = "P"
#: a deleted page's tombstone row (in the page's partition, numbered in the page change sequence;
#: it carries `tp` + `cs` for `by_change` and nothing the other indexes read but `tp` + `slug`)
TOMBSTONE_SK = "T"
CHANGE_SK = "C"  # with pk "<tenant>#~chg" (keys.CHANGE): the tenant's page change counter (D14)
#: a transaction holds at most 100 actions; bigger rewrites fall back to batches (not atomic)
_TX_MAX = 100
#: link types that are mere mentions (not counted as backlinks); both spellings are in use
_MENTION_TYPES = frozenset({"mention", "mentions"})
_WORD = re.compile(r"[a-z0-9]+")
_HEAD_PROJECTION = ", ".join(f"#{a}" for a in HEAD_ATTRS)
_HEAD_NAMES = {f"#{a}": a for a in HEAD_ATTRS}


def page_pk(tenant: str, slug: str) -> str:
    return keys.key(tenant, slug)


def words(*texts: str) -> list[str]:
    """Lower-cased ASCII-folded words of 3+ characters, first-seen order."""
    seen: dict[str, None] = {}
    for text in texts:
        folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
        for w in _WORD.findall(folded):
            if len(w) >= 3:
                seen.setdefault(w, None)
    return list(seen)


#: Near-miss prefixes are looked up by their first PREFIX_LEN letters (the length of the shortest
#: word `words` keeps), then filtered on the words the row lists.
PREFIX_LEN = 3


def _position(at: datetime, slug: str) -> str:
    """`us` of a page row: `<updated_at>#<slug>` (the slug escaped), delta's keyset position."""
    return f"{ts(at)}#{keys.part(slug)}"


def _head_attrs(page: Page) -> dict[str, Any]:
    return {
        **same_named(page, "slug", "title"),
        "ptype": page.type,
        "visibility": page.visibility,
        "updated_at": ts(page.updated_at),
        "last_retrieved_at": ts(page.last_retrieved_at),
    }


def _page_condition(expected_updated_at: datetime | Literal[""] | None) -> dict[str, Any]:
    """The ConditionExpression that makes a page write conditional ({} = unconditional)."""
    if expected_updated_at is None:
        return {}
    if expected_updated_at == "":
        return {"ConditionExpression": "attribute_not_exists(pk)"}
    return {
        "ConditionExpression": "updated_at = :expected_updated_at",
        "ExpressionAttributeValues": {":expected_updated_at": {"S": str(ts(expected_updated_at))}},
    }


def page_to_item(page: Page) -> dict[str, Any]:
    return {
        "pk": page_pk(page.tenant, page.slug),
        "sk": PAGE_SK,
        "typ": "page",
        "tenant": page.tenant,
        "tp": keys.tenant(page.tenant),
        **_head_attrs(page),
        "aliases": list(page.aliases) or None,
        "summary": page.summary,
        "body": page.body,
        "links": json.dumps([link.model_dump() for link in page.links]) if page.links else None,
        "timeline": json.dumps([t.model_dump() for t in page.timeline]) if page.timeline else None,
        "frontmatter": json.dumps(page.frontmatter, default=str) if page.frontmatter else None,
        "created_at": ts(page.created_at),
        "author": page.author,
        "tk": keys.key(page.tenant, match_key(page.title)),
        "lk": keys.key(page.tenant, last_segment(page.slug)),
        "us": _position(page.updated_at, page.slug),
    }


def item_to_page(item: dict[str, Any]) -> Page:
    return Page(
        tenant=item["tenant"],
        slug=item["slug"],
        title=item["title"],
        type=item.get("ptype"),
        aliases=tuple(item.get("aliases") or ()),
        summary=item.get("summary"),
        visibility=item.get("visibility", "world"),
        body=item.get("body", ""),
        links=tuple(Link(**x) for x in json.loads(item["links"])) if item.get("links") else (),
        timeline=tuple(TimelineEntry(**x) for x in json.loads(item["timeline"])) if item.get("timeline") else (),
        frontmatter=json.loads(item["frontmatter"]) if item.get("frontmatter") else {},
        created_at=parse_ts(item["created_at"]),  # type: ignore[arg-type]
        updated_at=parse_ts(item["updated_at"]),  # type: ignore[arg-type]
        last_retrieved_at=parse_ts(item.get("last_retrieved_at")),
        author=item.get("author"),
    )


def item_to_head(item: dict[str, Any]) -> PageHead:
    return PageHead(
        slug=item["slug"],
        title=item["title"],
        type=item.get("ptype"),
        visibility=item.get("visibility", "world"),
        updated_at=parse_ts(item["updated_at"]),  # type: ignore[arg-type]
        last_retrieved_at=parse_ts(item.get("last_retrieved_at")),
    )


def derived_rows(page: Page) -> list[dict[str, Any]]:
    """The alias, link and word rows of a page (all in the page's partition)."""
    pk = page_pk(page.tenant, page.slug)
    head = _head_attrs(page)
    rows: dict[str, dict[str, Any]] = {}
    for alias in page.aliases:
        norm = match_key(alias)
        if norm:
            sk = f"A#{keys.part(norm)}"
            rows[sk] = {
                "pk": pk,
                "sk": sk,
                "typ": "alias",
                "ak": keys.key(page.tenant, norm),
                "alias": norm,
                **head,
            }
    for link in page.links:
        sk = f"L#{keys.part(link.target)}#{keys.part(link.type)}"
        rows[sk] = {
            "pk": pk,
            "sk": sk,
            "typ": "link",
            "gk": keys.key(page.tenant, link.target),
            "src": page.slug,
            "ltype": link.type,
            "context": link.context,
            "src_visibility": page.visibility,
            "src_updated_at": ts(page.updated_at),
        }
    by_prefix: dict[str, list[str]] = {}
    for w in words(page.title, page.slug.replace("/", " "), *page.aliases):
        rows[f"W#{w}"] = {"pk": pk, "sk": f"W#{w}", "typ": "word", "wk": keys.key(page.tenant, w), **head}
        by_prefix.setdefault(w[:PREFIX_LEN], []).append(w)
    for pre, ws in by_prefix.items():
        rows[f"X#{pre}"] = {
            "pk": pk,
            "sk": f"X#{pre}",
            "typ": "prefix",
            "wk": keys.prefix_key(page.tenant, pre),
            "pw": ws,
            **head,
        }
    return list(rows.values())


class DynamoPageStore(DynamoStore):
    TABLE = PAGES

    def __init__(self, clients: AwsClients, prefix: str, *, settle_ms: int = 0) -> None:
        super().__init__(clients, prefix)
        self.settle = timedelta(milliseconds=settle_ms)

    # -- reads ---------------------------------------------------------------------------------

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

    def _query_raw(self, req: dict[str, Any]) -> Iterator[dict[str, Any]]:
        return query_all(self._db, req)

    def _query(self, tenant: str, req: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The tenant's items of a Query (an item of another tenant is dropped as if missing)."""
        return keys.owned_items(self._query_raw(req), tenant, table="pages")

    def _gsi(
        self,
        tenant: str,
        index: str,
        key_attr: str,
        key: str,
        *,
        limit: int | None = None,
        sort: tuple[str, str, str] | None = None,
        forward: bool = True,
    ) -> Iterator[dict[str, Any]]:
        values: dict[str, Any] = {":k": {"S": key}}
        cond = f"{key_attr} = :k"
        if sort is not None:
            _, op, value = sort
            cond += f" AND #s {op} :s"
            values[":s"] = {"S": value}
        req: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": index,
            "KeyConditionExpression": cond,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": forward,
        }
        if sort is not None:
            req["ExpressionAttributeNames"] = {"#s": sort[0]}
        if limit is not None:
            req["Limit"] = limit
        return self._query(tenant, req)

    @staticmethod
    def _visible(item: dict[str, Any], world_only: bool) -> bool:
        return not world_only or item.get("visibility", "world") == "world"

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
    ) -> builtins.list[PageMatch]:
        def take(
            items: Iterator[dict[str, Any]], via: str, keep: Callable[[dict[str, Any]], bool]
        ) -> builtins.list[PageMatch]:
            out: builtins.list[PageMatch] = []
            for item in items:
                if self._visible(item, world_only) and keep(item):
                    out.append(PageMatch(page=item_to_head(item), via=via))  # type: ignore[arg-type]
                    if len(out) >= limit:
                        break
            return out

        thunks: builtins.list[Callable[[], builtins.list[PageMatch]]] = []
        # one index query per key form (the current key, and the key pages written before it carry)
        for alias in dict.fromkeys(a for a in aliases if a):
            thunks.append(
                lambda a=alias: take(self._gsi(tenant, "by_alias", "ak", keys.key(tenant, a)), "alias", lambda _: True)
            )
        for title in dict.fromkeys(t for t in titles if t):
            thunks.append(
                lambda t=title: take(self._gsi(tenant, "by_title", "tk", keys.key(tenant, t)), "title", lambda _: True)
            )
        wanted = [s for s in dict.fromkeys(slugs) if s]
        if wanted:
            thunks.append(
                lambda: [
                    PageMatch(page=h, via="slug")
                    for h in self.heads(tenant, wanted)
                    if not world_only or h.visibility == "world"
                ][:limit]
            )
        if suffix:
            tail = "/" + suffix
            thunks.append(
                lambda: take(
                    self._gsi(tenant, "by_leaf", "lk", keys.key(tenant, last_segment(suffix))),
                    "suffix",
                    lambda i: str(i["slug"]).endswith(tail),
                )
            )
        # a page found under both key forms is one candidate of its way
        found = {(m.via, m.page.slug): m for group in parallel(thunks) for m in group}
        return list(found.values())

    def heads(self, tenant: str, slugs: Sequence[str]) -> builtins.list[PageHead]:
        wanted = list(dict.fromkeys(s for s in slugs if s))
        found: dict[str, PageHead] = {}

        def fetch(group: Sequence[str]) -> builtins.list[dict[str, Any]]:
            request: dict[str, Any] = {
                self.table: {
                    "Keys": [{"pk": {"S": page_pk(tenant, s)}, "sk": {"S": PAGE_SK}} for s in group],
                    "ProjectionExpression": _HEAD_PROJECTION + ", pk, tenant",
                    "ExpressionAttributeNames": _HEAD_NAMES,
                }
            }
            items: builtins.list[dict[str, Any]] = []
            while request:
                out = call(self._db.batch_get_item, RequestItems=request)
                items.extend(out.get("Responses", {}).get(self.table, []))
                request = out.get("UnprocessedKeys") or {}
            return items

        for items in parallel([functools.partial(fetch, g) for g in chunks(wanted, 100)]):
            for item in keys.owned_items(items, tenant, table="pages"):
                found[item["slug"]] = item_to_head(item)
        return [found[s] for s in wanted if s in found]

    def list(
        self, tenant: str, *, world_only: bool, limit: int, after: str | None = None, type: str | None = None
    ) -> builtins.list[PageHead]:
        it = self._gsi(tenant, "by_slug", "tp", keys.tenant(tenant), sort=("slug", ">", after) if after else None)
        out: builtins.list[PageHead] = []
        if limit <= 0:
            return out
        for item in it:
            if item.get("sk", PAGE_SK) != PAGE_SK:
                continue  # a tombstone (it carries tp + slug for by_change)
            if not self._visible(item, world_only) or (type is not None and item.get("ptype") != type):
                continue
            out.append(item_to_head(item))
            if len(out) >= limit:
                break
        return out

    def tallies(self, tenant: str, *, world_only: bool, since: datetime) -> PageTallies:
        """One paginated Query of the tenant's `by_change` range (page heads; tombstones skipped;
        pages from before change numbers get into it with `fleetmem admin reindex`)."""
        req: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "by_change",
            "KeyConditionExpression": "tp = :k",
            "ExpressionAttributeValues": {":k": {"S": keys.tenant(tenant)}},
        }
        count = 0
        per_day: dict[str, int] = {}
        day0 = str(ts(since))[:10]
        for item in self._query(tenant, req):
            if item.get("sk") != PAGE_SK or not self._visible(item, world_only):
                continue
            count += 1
            day = str(item.get("updated_at", ""))[:10]
            if day >= day0:
                per_day[day] = per_day.get(day, 0) + 1
        return PageTallies(pages=count, per_day=per_day)

    def backlinks(
        self, tenant: str, slug: str, *, world_only: bool, limit: int = 10
    ) -> tuple[builtins.list[Backlink], int]:
        links: builtins.list[Backlink] = []
        count = 0
        for item in self._gsi(tenant, "by_target", "gk", keys.key(tenant, slug)):
            if item.get("src") == slug:
                continue
            if world_only and item.get("src_visibility", "world") != "world":
                continue
            if item.get("ltype") not in _MENTION_TYPES:
                count += 1
            if len(links) < limit:
                links.append(
                    Backlink(source=item["src"], type=item.get("ltype", "related"), context=item.get("context"))
                )
        return links, count

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
        out: builtins.list[PageHead] = []
        if limit <= 0:
            return out
        horizon = changes.settle_horizon(now, self.settle)
        for item in self._gsi(
            tenant, "by_updated", "tp", keys.tenant(tenant), sort=("us", ">", _position(since, slug))
        ):
            if horizon is not None and item.get("updated_at", "") > ts(horizon):
                break  # not settled: an earlier write may still be on its way into the index
            if not self._visible(item, world_only):
                continue
            out.append(item_to_head(item))
            if len(out) >= limit:
                break
        return out

    def keyword(self, tenant: str, text: str, *, world_only: bool, limit: int = 3) -> builtins.list[PageHead]:
        terms = words(text)[:8]
        if not terms or limit <= 0:
            return []

        def by_word(word: str) -> builtins.list[dict[str, Any]]:
            return builtins.list(self._gsi(tenant, "by_word", "wk", keys.key(tenant, word), limit=50))

        def by_prefix(word: str) -> builtins.list[dict[str, Any]]:
            rows = self._gsi(tenant, "by_word", "wk", keys.prefix_key(tenant, word[:PREFIX_LEN]), limit=100)
            return [i for i in rows if any(str(w).startswith(word) for w in i.get("pw") or ())]

        # one concurrent round: whole-word rows and prefix rows for every term
        found = parallel(
            [functools.partial(by_word, w) for w in terms] + [functools.partial(by_prefix, w) for w in terms]
        )
        exact: dict[str, int] = {}
        matched: dict[str, set[str]] = {}
        heads: dict[str, PageHead] = {}
        for n, items in enumerate(found):
            term = terms[n % len(terms)]
            for item in items:
                if not self._visible(item, world_only):
                    continue
                s = item["slug"]
                matched.setdefault(s, set()).add(term)
                if n < len(terms):
                    exact[s] = exact.get(s, 0) + 1
                heads[s] = item_to_head(item)
        ranked = sorted(
            heads.values(),
            key=lambda h: (-len(matched[h.slug]), -exact.get(h.slug, 0), -h.updated_at.timestamp(), h.slug),
        )
        return ranked[:limit]

    # -- writes --------------------------------------------------------------------------------

    def put(self, page: Page, *, expected_updated_at: datetime | Literal[""] | None = None) -> None:
        item = page_to_item(page)
        if approx_item_size(item) > ITEM_LIMIT_BYTES - 8 * 1024:
            raise TooLarge("page is larger than one DynamoDB item can hold (400 KB)")
        rows = derived_rows(page)
        existing = self._partition_keys(page.tenant, page.slug)
        keep = {r["sk"] for r in rows} | {PAGE_SK}
        pk = page_pk(page.tenant, page.slug)
        stale = [sk for sk in existing if sk not in keep]
        deletes = [{"pk": pk, "sk": sk} for sk in stale]
        condition = _page_condition(expected_updated_at)
        if len(rows) + len(deletes) + 2 > _TX_MAX:
            # too many rows for one transaction: derived rows first, then the page row with its
            # change number (readers see the page only with its rows)
            if condition:  # refuse before touching the derived rows; the page row checks again
                self._check_page(pk, condition)
            self._write(rows, deletes)
            rows, deletes = [], []

        def build(n: int) -> builtins.list[dict[str, Any]]:
            # D21: the page row carries a pending change number; a reader numbers it
            actions: builtins.list[dict[str, Any]] = [
                {"Delete": {"TableName": self.table, "Key": to_ddb(k)}} for k in deletes
            ]
            actions += [{"Put": {"TableName": self.table, "Item": to_ddb(p)}} for p in rows]
            actions.append({"Put": {"TableName": self.table, "Item": to_ddb({**item, "cs": n}), **condition}})
            return actions

        changes.transact_pending(self._db, build=build)

    def _check_page(self, pk: str, condition: dict[str, Any]) -> None:
        try:
            self._db.transact_write_items(
                TransactItems=[
                    {
                        "ConditionCheck": {
                            "TableName": self.table,
                            "Key": to_ddb({"pk": pk, "sk": PAGE_SK}),
                            **condition,
                        }
                    }
                ]
            )
        except Exception as exc:
            raise translate_client_error(exc) from None

    def _counter_key(self, tenant: str) -> dict[str, Any]:
        return {"pk": {"S": keys.reserved(tenant, keys.CHANGE)}, "sk": {"S": CHANGE_SK}}

    def _number(self, tenant: str, now: datetime | None = None) -> Any:
        """D21: number the tenant's pending page changes (pages and tombstones) before reading positions."""
        return changes.number_pending(
            self._db, table=self.table, counter_key=self._counter_key(tenant), tp=keys.tenant(tenant), now=now
        )

    def changed_after(
        self, tenant: str, *, seq: int, world_only: bool, limit: int, now: datetime | None = None
    ) -> builtins.list[tuple[int, PageHead]]:
        return self._numbered_changes(tenant, seq=seq, world_only=world_only, limit=limit, now=now, sk=PAGE_SK)

    def _numbered_changes(
        self, tenant: str, *, seq: int, world_only: bool, limit: int, now: datetime | None, sk: str
    ) -> builtins.list[tuple[int, PageHead]]:
        """D21: pending changes numbered next to the listing (one concurrent round). Without a settle
        horizon (an index read as consistent) a pass that numbered something lists again, so what
        it numbered is listed at once — cut before the first change of the OTHER kind it numbered
        (a tombstone for the page list, a page for the tombstone list): the parallel listing of
        that kind ran before the numbering, and delta merges both into one position, which must not
        pass a change neither list showed. With a horizon, what it numbered has not settled yet."""
        numbering, listed = parallel(
            [
                lambda: self._number(tenant, now),
                lambda: self._changes(tenant, seq=seq, world_only=world_only, limit=limit, now=now, sk=sk),
            ]
        )
        if not numbering.fresh or changes.settle_horizon(now, self.settle) is not None:
            return listed
        again = self._changes(tenant, seq=seq, world_only=world_only, limit=limit, now=now, sk=sk)
        other = [n for n, item in numbering.fresh.values() if item.get("sk", {}).get("S", PAGE_SK) != sk]
        return [(n, h) for n, h in again if n < min(other)] if other else again

    def _changes(
        self, tenant: str, *, seq: int, world_only: bool, limit: int, now: datetime | None, sk: str
    ) -> builtins.list[tuple[int, PageHead]]:
        """`by_change` entries of page rows (`sk` "P") or tombstones ("T"), which share the index."""
        out: builtins.list[tuple[int, PageHead]] = []
        if limit <= 0 or int(seq) >= changes.PENDING - 1:
            return out  # nothing is numbered above the largest position (BETWEEN would be refused)
        horizon = changes.settle_horizon(now, self.settle)
        req = keys.numbered_changes(self.table, tenant, seq, page_size=max(10, min(limit * 2, 500)))
        for item in self._query(tenant, req):
            if horizon is not None and changes.change_time(item, "updated_at") > str(ts(horizon)):
                break  # not settled: an earlier number may still be on its way into the index
            if item.get("sk", PAGE_SK) != sk or not self._visible(item, world_only):
                continue
            out.append((as_int(item["cs"]), item_to_head(item)))
            if len(out) >= limit:
                break
        return out

    def change_floor(self, tenant: str, *, since: datetime | None, slug: str = "", walk: bool = False) -> int:
        if walk and since is not None:
            self._number(tenant)
            top = changes.read_counter(self._db, table=self.table, key=self._counter_key(tenant))
            position = _position(since, slug)
            for n, head in self._changes(tenant, seq=0, world_only=False, limit=top + 1, now=None, sk=PAGE_SK):
                if _position(head.updated_at, head.slug) > position:
                    return min(top, n - 1)
            return top
        since_query = None
        if since is not None:
            since_query = {
                "IndexName": "by_updated",
                "KeyConditionExpression": "tp = :k AND us > :s",
                "ExpressionAttributeValues": {":k": {"S": keys.tenant(tenant)}, ":s": {"S": _position(since, slug)}},
            }
        return changes.change_floor(
            self._db,
            table=self.table,
            counter_key=self._counter_key(tenant),
            tp=keys.tenant(tenant),
            since_query=since_query,
        )

    def delete(self, tenant: str, slug: str, *, at: datetime | None = None) -> bool:
        page = self.get(tenant, slug)
        if page is None:
            return False
        existing = self._partition_keys(tenant, slug)
        pk = page_pk(tenant, slug)
        derived = [{"pk": pk, "sk": sk} for sk in existing if sk not in (PAGE_SK, TOMBSTONE_SK)]
        if len(derived) + 3 > _TX_MAX:
            self._write([], derived)  # too many rows for one transaction: derived rows first
            derived = []
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
            actions.append({"Put": {"TableName": self.table, "Item": to_ddb(tomb)}})
            return actions

        changes.transact_pending(self._db, build=build)
        return True

    def deleted_after(
        self, tenant: str, *, seq: int, world_only: bool, limit: int
    ) -> builtins.list[tuple[int, PageTombstone]]:
        return [
            (n, PageTombstone(slug=h.slug, visibility=h.visibility, deleted_at=h.updated_at))
            for n, h in self._numbered_changes(
                tenant, seq=seq, world_only=world_only, limit=limit, now=None, sk=TOMBSTONE_SK
            )
        ]

    def _write(self, puts: builtins.list[dict[str, Any]], deletes: builtins.list[dict[str, str]]) -> None:
        if len(puts) + len(deletes) <= _TX_MAX:
            actions: builtins.list[dict[str, Any]] = [
                {"Delete": {"TableName": self.table, "Key": to_ddb(k)}} for k in deletes
            ]
            actions += [{"Put": {"TableName": self.table, "Item": to_ddb(p)}} for p in puts]
            call(self._db.transact_write_items, TransactItems=actions)
            return
        requests = [{"DeleteRequest": {"Key": to_ddb(k)}} for k in deletes]
        requests += [{"PutRequest": {"Item": to_ddb(p)}} for p in puts]
        for group in chunks(requests, 25):
            pending: dict[str, Any] = {self.table: list(group)}
            while pending:
                out = call(self._db.batch_write_item, RequestItems=pending)
                pending = out.get("UnprocessedItems") or {}

    # -- memory packs (fleetmem.pack) ----------------------------------------------------------

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[builtins.list[Page], str | None]:
        """Every page of the tenant, whole, by slug ascending after the slug `after`."""
        n = max(1, int(limit))
        heads = self.list(tenant, world_only=False, limit=n, after=after)
        pages = [p for p in (self.get(tenant, h.slug) for h in heads) if p is not None]
        return pages, (heads[-1].slug if len(heads) == n else None)

    def backfill_changes(self, tenant: str) -> int:
        """Number the tenant's pages written before change numbers existed (no `cs`), so delta
        lists them (`fleetmem admin reindex`); returns how many."""
        req: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "by_slug",
            "KeyConditionExpression": "tp = :k",
            "FilterExpression": "attribute_not_exists(cs) AND sk = :p",
            "ProjectionExpression": "pk, sk",
            "ExpressionAttributeValues": {":k": {"S": keys.tenant(tenant)}, ":p": {"S": PAGE_SK}},
        }
        found = [{"pk": i["pk"], "sk": i["sk"]} for i in self._query_raw(req)]
        return changes.backfill_changes(
            self._db, table=self.table, counter_key=self._counter_key(tenant), tp=keys.tenant(tenant), item_keys=found
        )
