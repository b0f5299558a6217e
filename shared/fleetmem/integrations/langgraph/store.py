"""`FleetmemStore`: a LangGraph `BaseStore` whose items are pages of the caller's tenant.

The mapping (reversible, so every page under the root reads back as its item):

- slug = `<root>/<label>/.../<label>/<key>`: each namespace label and the key is one slug segment,
  kept as it is when it already is a canonical ASCII segment (`[a-z0-9]` runs joined by single
  `-`, at most 100 characters, not starting with `b32-`), else written `b32-` + its UTF-8 bytes in
  lowercase unpadded base32 ("User 1" -> "b32-kvzwk4racm"). The last segment is the key, the ones
  between the root and it the namespace. A slug over 200 characters is refused (ValueError).
- value -> the page: frontmatter `title` (the key), `type` (`page_type`, "store-item") and `value`
  (the item's JSON value, verbatim); the body is the value's text (every string, number and bool
  leaf as `path: value`, or only the `index` fields a put names; none for `index=False`), which is
  what recall searches. created_at / updated_at are the page's.
- get -> get_page; put -> put_page; put of None (delete) -> delete_page (a missing page is fine);
  search with `query` -> recall over the namespace prefix (its page snippets, best first), without
  a query -> list_pages of `page_type`; `filter` is applied to the values as LangGraph's own
  in-memory store applies it; list_namespaces -> list_pages of `page_type`.

TTLs are not supported (`supports_ttl` is False). Remote callers see world-visible pages only.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

import yaml
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from langgraph.store.base.embed import get_text_at_path
from langgraph.store.memory import _compare_values, _does_match

from fleetmem.client import Client, FleetmemError

ESCAPED = "b32-"
_PLAIN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
SLUG_MAX = 200
SEGMENT_MAX = 100
PAGE_TYPE = "store-item"
#: Pages fetched per list_pages call, and snippets asked of recall per search.
LIST_PAGE = 200
RECALL_LIMIT = 100


def encode(label: str) -> str:
    if _PLAIN.fullmatch(label) and not label.startswith(ESCAPED) and len(label) <= SEGMENT_MAX:
        return label
    if not label:
        raise ValueError("a store key or namespace label must not be empty")
    encoded = ESCAPED + base64.b32encode(label.encode("utf-8")).decode("ascii").lower().rstrip("=")
    if len(encoded) > SEGMENT_MAX:
        raise ValueError(f"{label[:40]!r}... is too long for a page slug segment (at most 60 bytes when escaped)")
    return encoded


def decode(segment: str) -> str:
    if not segment.startswith(ESCAPED):
        return segment
    data = segment[len(ESCAPED) :].upper()
    return base64.b32decode(data + "=" * (-len(data) % 8)).decode("utf-8")


def slug_of(root: str, namespace: tuple[str, ...], key: str) -> str:
    """The page slug of an item (see the module docstring)."""
    slug = "/".join([root, *(encode(label) for label in namespace), encode(key)])
    if len(slug) > SLUG_MAX:
        raise ValueError(f"the item's page slug would be {len(slug)} characters; at most {SLUG_MAX} fit")
    return slug


def key_of(root: str, slug: str) -> tuple[tuple[str, ...], str] | None:
    """(namespace, key) of a slug under `root`, or None for any other slug."""
    parts = slug.split("/")
    head = root.split("/")
    if parts[: len(head)] != head or len(parts) < len(head) + 2:
        return None
    labels = [decode(p) for p in parts[len(head) :]]
    return tuple(labels[:-1]), labels[-1]


def leaves(value: Any, path: str = "") -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from leaves(v, f"{path}[{i}]")
    elif value is not None:
        yield f"{path}: {value}" if path else str(value)


def body_of(value: dict[str, Any], index: Any) -> str:
    if index is False:
        return ""
    if isinstance(index, list):
        return "\n".join(text for path in index for text in get_text_at_path(value, path))
    return "\n".join(leaves(value))


def content_of(key: str, value: dict[str, Any], index: Any, page_type: str) -> str:
    meta = {"title": key, "type": page_type, "value": value}
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return f"---\n{front}---\n{body_of(value, index)}\n"


def value_of(content: str) -> dict[str, Any] | None:
    """The item value kept in a page's frontmatter, or None for a page that holds none."""
    if not content.startswith("---\n"):
        return None
    end = content.find("\n---", 4)
    meta = yaml.safe_load(content[4:end]) if end > 0 else None
    value = meta.get("value") if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else None


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class FleetmemStore(BaseStore):
    """`FleetmemStore(Client(url))`: items kept as pages under `root` (default "store")."""

    supports_ttl = False
    __slots__ = ("client", "page_type", "root")

    def __init__(self, client: Client, *, root: str = "store", page_type: str = PAGE_TYPE) -> None:
        if not all(_PLAIN.fullmatch(part) for part in root.split("/")):
            raise ValueError("root must be a canonical slug: lowercase [a-z0-9] runs joined by '-' and '/'")
        self.client = client
        self.root = root
        self.page_type = page_type

    # ------------------------------------------------------------------ the four operations

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op))
            else:
                raise ValueError(f"unknown store operation: {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        try:
            page = self.client.get_page(slug=slug_of(self.root, namespace, key))
        except FleetmemError as err:
            if err.code == "not_found":
                return None
            raise
        value = value_of(page.content)
        if value is None:
            return None
        return Item(
            value=value,
            key=key,
            namespace=namespace,
            created_at=when(page.created_at),
            updated_at=when(page.updated_at),
        )

    def _put(self, op: PutOp) -> None:
        slug = slug_of(self.root, op.namespace, op.key)
        if op.value is None:
            try:
                self.client.delete_page(slug=slug)
            except FleetmemError as err:
                if err.code != "not_found":
                    raise
            return
        self.client.put_page(slug=slug, content=content_of(op.key, op.value, op.index, self.page_type))

    # ------------------------------------------------------------------ reading many

    def _slugs(self) -> Iterator[str]:
        """Every store page's slug (list_pages of the store's page type, followed to the end)."""
        cursor: str | None = None
        while True:
            answer = self.client.list_pages(type=self.page_type, limit=LIST_PAGE, cursor=cursor)
            yield from (p.slug for p in answer.pages)
            cursor = answer.next_cursor
            if not cursor:
                return

    def _under(self, slugs: Iterable[str], prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
        seen: set[str] = set()
        for slug in slugs:
            place = key_of(self.root, slug)
            if place is not None and place[0][: len(prefix)] == prefix and slug not in seen:
                seen.add(slug)
                yield place

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.query:
            answer = self.client.recall(query=op.query, limit=RECALL_LIMIT)
            places = list(self._under((hit.slug for hit in answer.results), op.namespace_prefix))
        else:
            places = sorted(self._under(self._slugs(), op.namespace_prefix))
        found: list[SearchItem] = []
        wanted = op.offset + op.limit
        for rank, (namespace, key) in enumerate(places):
            item = self._get(namespace, key)
            if item is None or not all(_compare_values(item.value.get(k), v) for k, v in (op.filter or {}).items()):
                continue
            score = 1.0 / (1 + rank) if op.query else None
            found.append(SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score))
            if len(found) >= wanted:
                break
        return found[op.offset : wanted]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = {namespace for namespace, _key in self._under(self._slugs(), ())}
        if op.match_conditions:
            spaces = {ns for ns in spaces if all(_does_match(c, ns) for c in op.match_conditions)}
        if op.max_depth is not None:
            spaces = {ns[: op.max_depth] for ns in spaces}
        return sorted(spaces)[op.offset : op.offset + op.limit]
