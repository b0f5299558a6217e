"""What a delta item costs against the budget, and how the first pending item is cut to fit
(D14: every call with something pending delivers something).

Public API: `truncate_page(page, budget_tokens)`, `truncate_fact(fact, budget_tokens)`,
`page_cost(p)`, `fact_cost(f)`, `item_cost(item)`, `RETRACTION_COST`.
"""

from __future__ import annotations

from fleetmem.memory import budget

#: A retraction carries a handle and a reason, no content: it costs one token, so it always fits
#: and a follower never keeps a retracted fact or a deleted page for want of budget.
RETRACTION_COST = 1


def truncate_page(page: dict, budget_tokens: int) -> dict:
    """Cut the title (then the slug) so `title + " " + slug` costs at most the budget."""
    room = 4 * budget_tokens - 1  # characters for title + slug around the one space
    slug = page["slug"][:room]
    title = page["title"][: max(0, room - len(slug))]
    return {**page, "title": title, "slug": slug, "truncated": True}


def truncate_fact(fact: dict, budget_tokens: int) -> dict:
    room = 4 * budget_tokens
    return {**fact, "fact": fact["fact"][: room - 1] + "…", "truncated": True}


def page_cost(p: dict) -> int:
    return budget.cost(f"{p['title']} {p['slug']}")


def fact_cost(f: dict) -> int:
    return budget.cost(f["fact"])


def item_cost(item: dict) -> int:
    if "reason" in item:
        return RETRACTION_COST
    return fact_cost(item) if "fact_id" in item else page_cost(item)
