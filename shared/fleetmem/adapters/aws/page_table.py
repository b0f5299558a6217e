"""The pages table (`tables.PAGES`) every DynamoDB page role reads and writes: the rows a page is
stored as, their conversion, and `PageTable`, the base the role stores (`pages`, `page_feed`,
`page_listing`) share."""

from __future__ import annotations

import builtins
import functools
import json
import re
import unicodedata
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, Literal
from urllib.parse import unquote

from fleetmem.adapters.aws import keys
from fleetmem.adapters.aws.change_table import ChangeTable
from fleetmem.adapters.aws.dynamo import call, chunks, parallel, parse_ts, query_all, same_named, ts
from fleetmem.adapters.aws.tables import HEAD_ATTRS, PAGES
from fleetmem.memory.entity_inference import NGRAM_MAX
from fleetmem.memory.slugs import last_segment, match_key
from fleetmem.models import Link, Page, PageHead, TimelineEntry

PAGE_SK = "P"

#: a deleted page's tombstone row (in the page's partition, numbered in the page change sequence;
#: it carries `tp` + `cs` for `by_change` and nothing the other indexes read but `tp` + `slug`)
TOMBSTONE_SK = "T"

CHANGE_SK = "C"  # with pk "<tenant>#~chg" (keys.CHANGE): the tenant's page change counter (D14)

#: D24, entity inference: a name item (pk "<tenant>#~name#<escaped match key>", sk `NAME_SK`) holds
#: the slugs of the pages that have the key as their title (`ts`) or an alias (`as`), string sets
#: kept by every page put and delete in the page's own transaction, so one BatchGetItem finds the
#: pages a text names. A page partition's `N#<a|t>#<escaped key>` rows mark which name items
#: list the page (what a later put or delete takes it out of).
NAME_SK = "N"
NAME_PART = "~name"
NAME_MARK = "N#"
NAME_SETS = {"a": "as", "t": "ts"}  # marker way -> the name item's set

#: D32, core memory: the tenant's core item (pk "<tenant>#~core", sk `CORE_SK`) holds the string set
#: `slugs` of the pages marked `core: true`, kept by every page put and delete in the page's own
#: transaction; a core page's partition holds a `CORE_SK` marker row (so a put that unmarks the page,
#: or its delete, knows to take the slug out). A tenant without core pages has no core item.
CORE_SK = "K"
CORE_PART = "~core"

#: a transaction holds at most 100 actions; bigger rewrites fall back to batches (not atomic)
TX_MAX = 100

#: link types that are mere mentions (not counted as backlinks); both spellings are in use
MENTION_TYPES = frozenset({"mention", "mentions"})

_WORD = re.compile(r"[a-z0-9]+")

#: index items asked for beyond a slug listing's limit per request (tombstones and private pages
#: are skipped client-side; the Query pages on when more are needed)
_SLUG_SLACK = 8

HEAD_PROJECTION = ", ".join(f"#{a}" for a in HEAD_ATTRS)

HEAD_NAMES = {f"#{a}": a for a in HEAD_ATTRS}


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


def us_position(at: datetime, slug: str) -> str:
    """`us` of a page row: `<updated_at>#<slug>` (the slug escaped), delta's keyset position."""
    return f"{ts(at)}#{keys.part(slug)}"


def _head_attrs(page: Page) -> dict[str, Any]:
    times = {name: ts(getattr(page, name)) for name in ("updated_at", "last_retrieved_at")}
    return {**same_named(page, "slug", "title", "visibility"), "ptype": page.type, **times}


def page_condition(expected_updated_at: datetime | Literal[""] | None) -> dict[str, Any]:
    """The ConditionExpression that makes a page write conditional ({} = unconditional)."""
    if expected_updated_at is None:
        return {}
    if expected_updated_at == "":
        return {"ConditionExpression": "attribute_not_exists(pk)"}
    return {
        "ConditionExpression": "updated_at = :expected_updated_at",
        "ExpressionAttributeValues": {":expected_updated_at": {"S": str(ts(expected_updated_at))}},
    }


def name_pk(tenant: str, key: str) -> str:
    """The name item's partition key: reserved ("~"), so no page's escaped slug can spell it."""
    return f"{keys.reserved(tenant, NAME_PART)}{keys.SEP}{keys.part(key)}"


#: The longest escaped name key a name item is kept for: well inside DynamoDB's key sizes (a sort
#: key holds 1,024 bytes, a partition key 2,048), and far above any name of `NGRAM_MAX` words.
NAME_KEY_BYTES_MAX = 512


def nameable(key: str) -> bool:
    """A key inference can ever look up (at most `NGRAM_MAX` words, D24) and short enough to key
    an item: a longer title names no entity a fact's words could match."""
    return bool(key) and len(key.split()) <= NGRAM_MAX and len(keys.part(key).encode()) <= NAME_KEY_BYTES_MAX


def name_marks(page: Page) -> dict[str, tuple[str, str]]:
    """sk -> (way, key) of the page's name marker rows: its title key ("t") and alias keys ("a"),
    those `nameable`."""
    out: dict[str, tuple[str, str]] = {}
    title = match_key(page.title)
    if nameable(title):
        out[f"{NAME_MARK}t#{keys.part(title)}"] = ("t", title)
    for alias in page.aliases:
        norm = match_key(alias)
        if nameable(norm):
            out[f"{NAME_MARK}a#{keys.part(norm)}"] = ("a", norm)
    return out


def parse_mark(sk: str) -> tuple[str, str] | None:
    """(way, key) of a name marker row's sort key; None for any other row."""
    if not sk.startswith(NAME_MARK):
        return None
    way, _, escaped = sk[len(NAME_MARK) :].partition("#")
    return (way, unquote(escaped)) if way in NAME_SETS and escaped else None


def name_updates(
    table: str, tenant: str, slug: str, adds: list[tuple[str, str]], removes: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """The `Update` actions that add the slug to (and take it out of) the name items' sets, one
    action per name item (a transaction touches an item once)."""
    per_key: dict[str, dict[str, set[str]]] = {}
    for op, pairs in (("ADD", adds), ("DELETE", removes)):
        for way, key in pairs:
            per_key.setdefault(key, {}).setdefault(op, set()).add(NAME_SETS[way])
    actions: list[dict[str, Any]] = []
    for key, ops in per_key.items():
        clauses = [f"{op} " + ", ".join(f"#{a} :s" for a in sorted(attrs)) for op, attrs in sorted(ops.items())]
        used = {a for attrs in ops.values() for a in attrs}
        actions.append(
            {
                "Update": {
                    "TableName": table,
                    "Key": {"pk": {"S": name_pk(tenant, key)}, "sk": {"S": NAME_SK}},
                    "UpdateExpression": "SET #tenant = :t, #typ = :typ " + " ".join(clauses),
                    "ExpressionAttributeNames": {"#tenant": "tenant", "#typ": "typ", **{f"#{a}": a for a in used}},
                    "ExpressionAttributeValues": {":s": {"SS": [slug]}, ":t": {"S": tenant}, ":typ": {"S": "name"}},
                }
            }
        )
    return actions


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
        "us": us_position(page.updated_at, page.slug),
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
    for sk in name_marks(page):
        rows[sk] = {"pk": pk, "sk": sk, "typ": "name_mark"}
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
            # the linking page's head, so entity's referenced_by reads no page (D35); "" for no type
            "src_title": page.title,
            "src_ptype": page.type or "",
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


class PageTable(ChangeTable):
    """One role over the pages table: the shared queries and the change counter."""

    TABLE = PAGES

    def _batch_items(self, tenant: str, slugs: Sequence[str], projection: str) -> builtins.list[dict[str, Any]]:
        """The page rows of `slugs` (BatchGetItem, 100 keys a request, concurrently), in `slugs` order."""
        wanted = list(dict.fromkeys(s for s in slugs if s))
        found: dict[str, dict[str, Any]] = {}

        def fetch(group: Sequence[str]) -> builtins.list[dict[str, Any]]:
            ask: dict[str, Any] = {"Keys": [{"pk": {"S": page_pk(tenant, s)}, "sk": {"S": PAGE_SK}} for s in group]}
            if projection:
                ask.update(ProjectionExpression=projection, ExpressionAttributeNames=HEAD_NAMES)
            request: dict[str, Any] = {self.table: ask}
            items: builtins.list[dict[str, Any]] = []
            while request:
                out = call(self._db.batch_get_item, RequestItems=request)
                items.extend(out.get("Responses", {}).get(self.table, []))
                request = out.get("UnprocessedKeys") or {}
            return items

        for items in parallel([functools.partial(fetch, g) for g in chunks(wanted, 100)]):
            for item in keys.owned_items(items, tenant, table="pages"):
                found[item["slug"]] = item
        return [found[s] for s in wanted if s in found]

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
        req = self._index_request(index, cond, values, ScanIndexForward=forward)
        if sort is not None:
            req["ExpressionAttributeNames"] = {"#s": sort[0]}
        if limit is not None:
            req["Limit"] = limit
        return self._query(tenant, req)

    @staticmethod
    def _visible(item: dict[str, Any], world_only: bool) -> bool:
        return not world_only or item.get("visibility", "world") == "world"

    def _counter_key(self, tenant: str) -> dict[str, Any]:
        return {"pk": {"S": keys.reserved(tenant, keys.CHANGE)}, "sk": {"S": CHANGE_SK}}

    def _by_slug(
        self, tenant: str, *, world_only: bool, limit: int, after: str | None = None, type: str | None = None
    ) -> builtins.list[PageHead]:
        out: builtins.list[PageHead] = []
        if limit <= 0:
            return out
        # Without a type filter, a page of the answer needs few index items (a tombstone or, for a
        # remote caller, a private page is skipped): ask for that many a request, not DynamoDB's
        # 1 MB page of whole page rows (the bare-token rule of `entity` asks for two slugs).
        page_size = None if type is not None else limit + _SLUG_SLACK
        it = self._gsi(
            tenant, "by_slug", "tp", keys.tenant(tenant), sort=("slug", ">", after) if after else None, limit=page_size
        )
        for item in it:
            if item.get("sk", PAGE_SK) != PAGE_SK:
                continue  # a tombstone (it carries tp + slug for by_change)
            if not self._visible(item, world_only) or (type is not None and item.get("ptype") != type):
                continue
            out.append(item_to_head(item))
            if len(out) >= limit:
                break
        return out


def core_key(tenant: str) -> dict[str, Any]:
    """The tenant's core item key (reserved: no page's escaped slug can spell it)."""
    return {"pk": {"S": keys.reserved(tenant, CORE_PART)}, "sk": {"S": CORE_SK}}


def core_update(table: str, tenant: str, slug: str, *, add: bool) -> dict[str, Any]:
    """The `Update` action that adds the slug to (or takes it out of) the tenant's core item."""
    return {
        "Update": {
            "TableName": table,
            "Key": core_key(tenant),
            "UpdateExpression": f"SET #tenant = :t, #typ = :typ {'ADD' if add else 'DELETE'} #slugs :s",
            "ExpressionAttributeNames": {"#tenant": "tenant", "#typ": "typ", "#slugs": "slugs"},
            "ExpressionAttributeValues": {":s": {"SS": [slug]}, ":t": {"S": tenant}, ":typ": {"S": "core"}},
        }
    }
