"""The page ports, by role: `PageStore` (writes, reads by slug, resolution reads), `PageFeed` (what
delta reads), `PageListing` (slug order, backlinks, counts), `PageScan` (packs). Conventions:
`fleetmem.ports`."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NotRequired, Protocol, TypedDict, Unpack, runtime_checkable

from fleetmem.models import Backlink, Page, PageHead, PageMatch, PageTombstone
from fleetmem.ports.options import Options


@dataclass(frozen=True)
class PageTallies:
    """memory_stats' page counts: every page, and pages by the UTC day of their last write."""

    pages: int
    per_day: dict[str, int]


#: `PageListing.referring`: the newest linking pages kept per canonical type, and per answer
REFERRING_PER_GROUP = 10
REFERRING_ROWS = 50


def canonical_type(page_type: str | None) -> str:
    """The group a linking page counts in (entity's `referenced_by`): its type, "page" without one."""
    return page_type or "page"


@dataclass(frozen=True)
class Referring:
    """`PageListing.referring`: what `backlinks` answers (`links`, newest first up to its limit, and
    `link_count`, the NON-mention links), plus the distinct pages linking here by any link kind (the
    slug itself left out): `count` of them, `totals` per `canonical_type` (groups ordered by their
    newest page) and `heads`, the pages shown: newest write first (then slug, descending), at most
    `REFERRING_PER_GROUP` per canonical type and `REFERRING_ROWS` in all."""

    links: builtins.list[Backlink]
    link_count: int
    count: int
    totals: dict[str, int]
    heads: builtins.list[PageHead]

    @classmethod
    def of_heads(cls, links: builtins.list[Backlink], link_count: int, heads: Sequence[PageHead]) -> Referring:
        """From the heads of EVERY linking page (a store that cannot group them itself)."""
        totals: dict[str, int] = {}
        shown: builtins.list[PageHead] = []
        for head in sorted(heads, key=lambda h: (h.updated_at, h.slug), reverse=True):
            group = canonical_type(head.type)
            totals[group] = totals.get(group, 0) + 1
            if totals[group] <= REFERRING_PER_GROUP and len(shown) < REFERRING_ROWS:
                shown.append(head)
        return cls(links=links, link_count=link_count, count=len(heads), totals=totals, heads=shown)


@dataclass(frozen=True)
class BareCandidates:
    """`PageStore.bare_candidates`: `suffix[s]`, the matches `lookup(suffix=s, limit=limit)` gives
    (slug order); `prefix[p]`, the page whose slug is `p` (if any) and the first two pages after
    `p` in slug order, as `PageListing.list(after=p, limit=2)` gives them. Private pages left out
    when `world_only`."""

    suffix: dict[str, builtins.list[PageMatch]]
    prefix: dict[str, builtins.list[PageHead]]


@dataclass(frozen=True)
class PageLeadSource:
    """`PageStore.leads`: what `entity{names}`' light row of a page is made of (no links, timeline
    or frontmatter)."""

    slug: str
    title: str
    type: str | None
    visibility: str
    aliases: tuple[str, ...]
    body: str

    @classmethod
    def of(cls, page: Page) -> PageLeadSource:
        return cls(page.slug, page.title, page.type, page.visibility, tuple(page.aliases), page.body)


#: the most name keys `PageStore.names` looks up in one call (the bound on a write's inference read)
NAME_KEYS_MAX = 100


# -- each method's keyword options, written once (`fleetmem.ports.options`) ------------------------


class PageLookupOptions(TypedDict):
    aliases: Sequence[str]
    titles: Sequence[str]
    slugs: Sequence[str]
    suffix: str
    world_only: bool
    limit: NotRequired[int]


@dataclass(frozen=True)
class PageLookup(Options):
    """`PageStore.lookup`'s options: the keys asked for, each way a page can match."""

    aliases: Sequence[str]
    titles: Sequence[str]
    slugs: Sequence[str]
    suffix: str
    world_only: bool
    limit: int = 10


class PageSinceOptions(TypedDict):
    since: datetime
    slug: str
    world_only: bool
    limit: int
    now: NotRequired[datetime | None]


@dataclass(frozen=True)
class PageSince(Options):
    """`PageFeed.updated_since`'s options: the (updated_at, slug) position after which."""

    since: datetime
    slug: str
    world_only: bool
    limit: int
    now: datetime | None = None


class PageListOptions(TypedDict):
    world_only: bool
    limit: int
    after: NotRequired[str | None]
    type: NotRequired[str | None]


@dataclass(frozen=True)
class PageList(Options):
    """`PageListing.list`'s options."""

    world_only: bool
    limit: int
    after: str | None = None
    type: str | None = None


class PageStore(Protocol):
    """A tenant's pages by slug: the writes, reads by slug, and the resolution reads (`lookup`, `keyword`)."""

    def get(self, tenant: str, slug: str) -> Page | None: ...

    def put(self, page: Page, *, expected_updated_at: datetime | Literal[""] | None = None) -> None:
        """Create or replace a page with its aliases, links and timeline (all derived rows replaced).
        `expected_updated_at` makes the write conditional, checked in the same atomic step as the
        write: a time = the stored page's `updated_at` (to the millisecond) must equal it; "" = no
        page may be stored under the slug. Raises Conflict (nothing written) when the condition
        fails. None (the default) writes unconditionally."""
        ...

    def delete(self, tenant: str, slug: str, *, at: datetime | None = None) -> bool:
        """Remove the page and its derived rows, leaving a tombstone deleted at `at` (default now)."""
        ...

    def heads(self, tenant: str, slugs: Sequence[str]) -> builtins.list[PageHead]:
        """Batch head lookup; missing slugs skipped."""
        ...

    def many(self, tenant: str, slugs: Sequence[str]) -> builtins.list[Page]:
        """Batch `get` (entity's `names`, D35): the pages of `slugs`, in their order; missing ones skipped."""
        ...

    def leads(self, tenant: str, slugs: Sequence[str]) -> builtins.list[PageLeadSource]:
        """`many`'s pages as `entity{names}`' light rows read them (`PageLeadSource`): the same
        reads, without building links, timeline and frontmatter."""
        ...

    def lookup(self, tenant: str, **opts: Unpack[PageLookupOptions]) -> builtins.list[PageMatch]:
        """Resolution candidates, one per (page, way) it matched:
        `alias`: a stored alias key (`slugs.match_key` of the alias; `normalize_alias` for pages
        written before it) is one of `aliases`;
        `title`: the stored title key (`match_key` of the title; `str.lower()` before) is one of `titles`;
        `slug`: slug is one of `slugs`;
        `suffix`: slug ends with "/" + `suffix` (skipped when `suffix` is empty).
        The domain ranks them; the store need not sort. At most `limit` pages per alias or title
        key asked (the first by slug where the store can choose; DynamoDB's keys of more than
        four words, read through an index, the first the index gives) and per suffix; every slug
        asked. So a key is answered alike alone and among many (`entity{names}`, D35)."""
        ...

    def bare_candidates(
        self, tenant: str, *, suffixes: Sequence[str], prefixes: Sequence[str], world_only: bool, limit: int = 10
    ) -> BareCandidates:
        """Entity `names` (D35): for many names at once, what one name's slug-suffix lookup
        (`lookup(suffix=...)`) and bare-token rule (`heads([prefix])` and `PageListing.list(after=prefix,
        limit=2)`) read, in one statement (SQLite) or one concurrent round (DynamoDB). See `BareCandidates`."""
        ...

    def keyword_many(
        self, tenant: str, texts: Sequence[str], *, world_only: bool, limit: int = 3
    ) -> builtins.list[builtins.list[PageHead]]:
        """`keyword` of each of `texts` (in their order), in one statement or one concurrent round."""
        ...

    def keyword(self, tenant: str, text: str, *, world_only: bool, limit: int = 3) -> builtins.list[PageHead]:
        """Near-misses for an entity miss: pages whose title/slug/aliases share words with `text`,
        or have a word starting with a word of `text` of 3+ characters ("pri" -> "priya")."""
        ...

    def names(self, tenant: str, name_keys: Sequence[str], *, world_only: bool) -> builtins.list[tuple[str, PageMatch]]:
        """Entity inference's one batched read (D24): (key, match) for every page whose stored alias
        key (`via="alias"`) or title key (`via="title"`) is one of `name_keys` (`slugs.match_key` forms), for
        at most `NAME_KEYS_MAX` keys (more are ignored). The domain decides; the store need not sort."""
        ...

    def core(self, tenant: str, *, world_only: bool, limit: int) -> builtins.list[Page]:
        """D32: the pages marked `core: true` in their frontmatter (`memory.core.is_core`), whole,
        by slug ascending, at most `limit`; private ones left out when `world_only`. One indexed
        read (SQLite: a partial index; DynamoDB: the tenant's core item, then the pages it lists
        only when it lists some)."""
        ...


class PageFeed(Protocol):
    """What delta reads about pages: change numbers, tombstones and updates after a position."""

    def changed_after(
        self, tenant: str, *, seq: int, world_only: bool, limit: int, now: datetime | None = None
    ) -> builtins.list[tuple[int, PageHead]]:
        """D14: (change_seq, head) of pages whose change_seq > seq, ascending. Every
        `put` assigns the page the tenant's next page change_seq inside its own write, in commit
        order, so a reader that has seen N has seen every write below N."""
        ...

    def deleted_after(
        self, tenant: str, *, seq: int, world_only: bool, limit: int
    ) -> builtins.list[tuple[int, PageTombstone]]:
        """(change_seq, tombstone) of deleted pages whose change_seq > seq, ascending: `delete`
        leaves a tombstone carrying the tenant's next page change_seq (the page numbers' own
        sequence, so pages and tombstones interleave in commit order); a later `put` of the slug
        removes it."""
        ...

    def change_floor(self, tenant: str, *, since: datetime | None, slug: str = "", walk: bool = False) -> int:
        """D14: the change position a (since, slug) keyset position resumes from: min(current
        counter, smallest change_seq of a page with (updated_at, slug) > (since, slug), minus 1);
        `since=None`: the counter (everything committed so far). `walk=True` finds that smallest
        number by walking the change order up to the first page after the position (cheap when
        the position is early; the default reads every page after it)."""
        ...

    def updated_since(self, tenant: str, **opts: Unpack[PageSinceOptions]) -> builtins.list[PageHead]:
        """Keyset page: (updated_at, slug) > (since, slug) ascending, byte order on slug. With `now`,
        a store whose time index is eventually consistent stops at its settle horizon."""
        ...


class PageListing(Protocol):
    """Pages by slug order, their backlinks and counts (list_pages, get_page, memory_stats)."""

    def list(self, tenant: str, **opts: Unpack[PageListOptions]) -> builtins.list[PageHead]:
        """Pages ordered by slug ascending, strictly after `after` (keyset paging)."""
        ...

    def backlinks(
        self, tenant: str, slug: str, *, world_only: bool, limit: int = 10
    ) -> tuple[builtins.list[Backlink], int]:
        """Incoming links from other pages (mentions included in the list, newest source first is
        not required), plus the count of incoming NON-mention links."""
        ...

    def referring(self, tenant: str, slug: str, *, world_only: bool, limit: int = 10) -> Referring:
        """`backlinks` and the pages linking here, counted per canonical type, with the newest
        of each group (entity's `referenced_by`, D35; see `Referring`); `world_only` leaves out
        private linking pages. Cost: bounded by the rows shown, not by every linking page's head."""
        ...

    def tallies(self, tenant: str, *, world_only: bool, since: datetime) -> PageTallies:
        """memory_stats: how many pages, and pages by the UTC day of `updated_at` from `since`'s day."""
        ...


@runtime_checkable
class PageScan(Protocol):
    """Whole-tenant page reads for memory packs (`fleetmem.pack`): every page, whole, in a stable
    order, in bounded batches. `after` is the opaque position the previous batch returned."""

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[list[Page], str | None]: ...
