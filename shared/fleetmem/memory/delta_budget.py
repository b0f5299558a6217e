"""delta's budget: a wake delivers exactly what its `text` shows (D14, D16).

Public API: `DeltaPack`, `pack_delta(since, items, threads, *, overflow, budget) -> DeltaPack`,
`truncate_fact(fact, chars)`, `truncate_page(page, room)`.

- `items` are the pending pages, facts and retractions in delivery order (the order the cursor
  passes them); `threads` the open-thread events. The budget is spent on the text itself,
  frame, headings and every line included: the wake keeps the longest prefix of items (then of
  threads) whose rendered block costs at most the budget (`budget.fit_prefix`), and lists exactly
  those items in its JSON, so the cursor never passes an item the text did not show.
- When not even the first pending item fits whole, a page or fact is cut to the room the block
  leaves (`truncated: true`, the same cut in the JSON and the text; a fact ends with "…", a page
  title too), so a wake with something pending delivers something. A retraction is never cut.
  When the frame leaves no room for even one character of it (budgets below about 80 tokens),
  the text is the cut item alone, without the frame: its words (a fact) or title and slug (a
  page), the same cut as the JSON's, so the session still progresses (D14) and the text still
  shows what the wake delivers (D16: at most the budget). Only an item that cannot be cut (a
  retraction) is then not delivered, and `needed` is the smallest budget that shows it whole (the
  caller's fix).
- Threads are not positions the cursor passes (they are read again from `since` on every wake):
  threads left out count in `dropped` but do not make the wake incomplete.
- `has_more` in the text is `overflow` (a fetch limit or the deadline held items back) or any
  item left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleetmem.memory import budget as budget_rule
from fleetmem.memory.render import delta_item_line, delta_section, delta_thread_line, render_delta_lines

ELLIPSIS = "…"


@dataclass(frozen=True)
class DeltaPack:
    items: list[dict[str, Any]]  # the delivered prefix of the pending items (the first may be cut)
    threads: list[dict[str, Any]]
    text: str
    dropped: int  # items and threads the text left out
    has_more: bool
    needed: int | None = None  # nothing fit: the smallest budget that shows the first item whole

    def fields(self, budget: int | None) -> dict[str, int]:
        return budget_rule.text_fields(budget, self.text, self.dropped)


def truncate_fact(fact: dict[str, Any], chars: int) -> dict[str, Any]:
    """The fact with its text cut to `chars` characters plus "…"."""
    return {**fact, "fact": fact["fact"][:chars] + ELLIPSIS, "truncated": True}


def truncate_page(page: dict[str, Any], room: int) -> dict[str, Any]:
    """The page with `title` and `slug` cut to `room` characters together: the title goes first
    (ending with "…"), then the slug."""
    slug = page["slug"][:room]
    keep = room - len(slug)
    title = page["title"][: keep - 1] + ELLIPSIS if keep >= 1 and len(page["title"]) > keep else page["title"][:keep]
    return {**page, "title": title, "slug": slug, "truncated": True}


def _content_len(item: dict[str, Any]) -> int:
    """The characters of an item that a cut can remove (0: it cannot be cut)."""
    section = delta_section(item)
    if section == 1:
        return len(" ".join(item["fact"].split()))
    if section == 0:
        return len(" ".join(item["title"].split())) + len(item["slug"])
    return 0


def _cut(item: dict[str, Any], room: int) -> dict[str, Any] | None:
    """`item` cut so its content takes at most `room` characters, or None when it cannot be."""
    section = delta_section(item)
    if section == 1 and room >= 2:
        return truncate_fact(item, room - len(ELLIPSIS))
    if section == 0 and room >= 1:
        return truncate_page(item, room)
    return None


def _bare(item: dict[str, Any], budget: int) -> tuple[dict[str, Any], str] | None:
    """Below the frame (D14: a session always progresses): the first item cut to the budget, its
    text the cut content alone (a fact's words, a page's title and slug), so the text still shows
    what the JSON delivers and costs at most the budget. None when the item cannot be cut (a
    retraction) or the budget holds not even one character and the marker."""

    def content(it: dict[str, Any]) -> str:
        if delta_section(it) == 1:
            return " ".join(it["fact"].split())
        return " ".join(part for part in (" ".join(it["title"].split()), it["slug"]) if part)

    if delta_section(item) != 2 and budget_rule.cost(whole := content(item)) <= budget:
        return item, whole
    room = 4 * budget
    while (cut := _cut(item, room)) is not None:
        text = content(cut)
        if text and budget_rule.cost(text) <= budget:
            return cut, text
        room -= 1
    return None


def pack_delta(
    since: str,
    items: Sequence[dict[str, Any]],
    threads: Sequence[dict[str, Any]],
    *,
    overflow: bool,
    budget: int | None,
) -> DeltaPack:
    items = list(items)
    lines = [(delta_section(i), delta_item_line(i)) for i in items]
    thread_lines = [delta_thread_line(t) for t in threads]
    n, total = len(items), len(items) + len(threads)

    def render(shown: int) -> str:
        return render_delta_lines(
            since,
            lines[:shown],
            thread_lines[: max(0, shown - n)],
            has_more=overflow or shown < n,
            left_out=total - shown,
        )

    shown, text = budget_rule.fit_prefix(render, total, budget)
    needed: int | None = None
    if shown == 0 and n and budget is not None:
        whole = render(1)
        room = 4 * budget - (len(whole) - _content_len(items[0]))
        while (first := _cut(items[0], room)) is not None:
            lines[0] = (delta_section(first), delta_item_line(first))
            candidate = render(1)
            if budget_rule.cost(candidate) <= budget:
                items[0], shown, text = first, 1, candidate
                break
            room -= 1  # whitespace folding or a cut slug: recheck one character shorter
        else:
            bare = _bare(items[0], budget)
            if bare is None:
                needed = budget_rule.cost(whole)
            else:
                items[0], text = bare
                shown = 1
    taken = min(shown, n)
    return DeltaPack(
        items=items[:taken],
        threads=list(threads[: max(0, shown - n)]),
        text=text,
        dropped=total - shown,
        has_more=overflow or taken < n,
        needed=needed,
    )
