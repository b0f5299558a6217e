"""The reference-era delta: a stateless call from a bare `since` (+ `since_slug`), as reference
clients make it — one position on one timeline. Pages (updated_at, slug) and facts (created_at,
seq) are merged in time order (facts first within a millisecond) and delivered as a prefix of that
order within the budget, so `next_cursor.since`/`slug` — the last delivered item — never passes an
undelivered page or fact, and every call with something pending moves it forward.

Public API: `ReferenceRead`, `reference_read(deps, tenant, *, now, since, slug, budget_tokens,
world_only, skipped, fact_item, threads_of) -> ReferenceRead`. The prefix is the one the text
shows (`delta_budget.pack_delta`): the position never passes an item the text left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetmem.memory.delta_budget import DeltaPack, pack_delta
from fleetmem.memory.delta_positions import FACT_TIE, fact_tie
from fleetmem.models import Fact, PageHead
from fleetmem.ports import Deps
from fleetmem.protocol import DELTA_FACT_LIMIT, DELTA_PAGE_LIMIT
from fleetmem.timefmt import iso, to_ms


@dataclass(frozen=True)
class ReferenceRead:
    """What one timeline read delivered: the packed pages and facts, whether more is pending, the
    next position (`since`/`slug`) and its change floors (`page_seq`, `fact_seq`: None only for an
    arm the deadline skipped), and the pack (text, threads shown, budget fields)."""

    pages: list[dict[str, Any]]
    facts: list[dict[str, Any]]
    taken: bool
    has_more: bool
    since: datetime
    slug: str
    page_seq: int | None
    fact_seq: int | None
    pack: DeltaPack


def reference_read(
    deps: Deps,
    tenant: str,
    *,
    now: datetime,
    since: datetime,
    slug: str,
    budget_tokens: int | None,
    world_only: bool,
    skipped: bool,
    fact_item: Callable[[Fact], dict[str, Any]],
    threads_of: Callable[[], tuple[list[dict[str, Any]], bool]],
) -> ReferenceRead:
    """Read, merge and pack one timeline after (`since`, `slug`); `skipped`: the deadline passed
    before the facts arm, so facts are not read and their position may not move. `fact_item`
    renders a fact as the verb lists it; `threads_of()` reads the thread events (after the
    timeline) and says whether the deadline cut them short."""
    tie = fact_tie(slug)
    heads, rows = deps.gather(
        lambda: deps.page_feed.updated_since(
            tenant, since=since, slug=slug, world_only=world_only, limit=DELTA_PAGE_LIMIT + 1, now=now
        ),
        (lambda: [])
        if skipped
        else lambda: deps.fact_feed.created_after(
            tenant, after=since, after_seq=tie, now=now, world_only=world_only, limit=DELTA_FACT_LIMIT + 1
        ),
    )
    page_overflow, fact_overflow = len(heads) > DELTA_PAGE_LIMIT, len(rows) > DELTA_FACT_LIMIT
    order, window = _timeline(heads, rows)
    items = [_page_item(heads[e[3]]) if e[1] == 1 else fact_item(rows[e[3]]) for e in window]
    threads, threads_cut = threads_of()
    pack = pack_delta(
        iso(since) or "",
        items,
        threads,
        budget=budget_tokens,
        overflow=page_overflow or fact_overflow or len(window) < len(order) or skipped or threads_cut,
    )
    taken = pack.items
    delivered = window[: len(taken)]
    next_since, next_slug = since, slug
    if delivered and not skipped:  # skipped facts are unknown: the position may not pass them
        next_since, next_slug = _position_after(delivered[-1], heads, rows)
    page_seq, fact_seq = _floors(deps, tenant, next_since, next_slug, skipped, (page_overflow, fact_overflow))
    return ReferenceRead(
        pages=[i for i in taken if "fact_id" not in i],
        facts=[i for i in taken if "fact_id" in i],
        taken=bool(taken),
        has_more=pack.has_more,
        since=next_since,
        slug=next_slug,
        page_seq=page_seq,
        fact_seq=fact_seq,
        pack=pack,
    )


#: A timeline entry: (time to the ms, arm (0 fact, 1 page), tie-break, index in its arm's rows).
Entry = tuple[datetime, int, Any, int]


def _timeline(heads: list[PageHead], rows: list[Fact]) -> tuple[list[Entry], list[Entry]]:
    """Both arms in time order, facts (arm 0) before pages (arm 1) within a millisecond, and the
    window of that order that may be delivered: past the first item an arm did not list (its 51st)
    the other arm may not be followed, since an unlisted item of the first could come before it."""
    order = sorted(
        [(to_ms(h.updated_at), 1, h.slug, i) for i, h in enumerate(heads)]
        + [(to_ms(f.created_at), 0, f.seq, j) for j, f in enumerate(rows)],
        key=lambda e: (e[0], e[1], e[2]),
    )
    window = []
    for entry in order:
        if (entry[1] == 1 and entry[3] >= DELTA_PAGE_LIMIT) or (entry[1] == 0 and entry[3] >= DELTA_FACT_LIMIT):
            break
        window.append(entry)
    return order, window


def _position_after(last: Entry, heads: list[PageHead], rows: list[Fact]) -> tuple[datetime, str]:
    """The keyset position of the last delivered item ("#f<seq>" inside a millisecond of facts)."""
    _, arm, _, idx = last
    if arm == 1:
        return heads[idx].updated_at, heads[idx].slug
    fact = rows[idx]
    same_ms = idx + 1 < len(rows) and to_ms(rows[idx + 1].created_at) == to_ms(fact.created_at)
    return fact.created_at, f"{FACT_TIE}{fact.seq}" if same_ms else ""


def _page_item(head: PageHead) -> dict[str, Any]:
    return {"slug": head.slug, "title": head.title, "type": head.type, "updated_at": iso(head.updated_at)}


def _floors(
    deps: Deps, tenant: str, next_since: datetime, next_slug: str, skipped: bool, overflow: tuple[bool, bool]
) -> tuple[int, int | None]:
    """The change floors of the new position (`walk`: the arm overflowed its listing)."""
    page_overflow, fact_overflow = overflow
    # Each arm's exact position is the change floor of the new position: read over what lies after
    # it when the arm listed everything there (at most 50 rows), else by walking the change order
    # to the first item after it (a catch-up's position is early in that order). Null only for an
    # arm the deadline skipped.
    page_seq, fact_seq = deps.gather(
        lambda: deps.page_feed.change_floor(tenant, since=next_since, slug=next_slug, walk=page_overflow),
        (lambda: None)
        if skipped
        else lambda: deps.fact_feed.change_floor(
            tenant, after=next_since, after_seq=fact_tie(next_slug), walk=fact_overflow
        ),
    )
    return page_seq, fact_seq
