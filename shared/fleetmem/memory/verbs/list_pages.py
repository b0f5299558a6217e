"""`list_pages(limit?, cursor?, type?, with_counts?)` — page through the brain's pages by slug (full
surface, read).

Public API: `ListPagesParams`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC` (registered).
`limit` default 50, an integer 1..200 (outside it is refused with the nearest bound as the fix);
`cursor` is the opaque `next_cursor` of the previous call (the last slug listed, encoded by
`encode_cursor`); one that does not decode is refused with a fix that starts over without it, so a
bad cursor never reads as the end. `type` filters on the page type. Response `{pages[{slug, title, type,
updated_at}], next_cursor (null on the last page), protocol_version}`. `with_counts: true` adds to
each row `facts` (the entity's active facts) and `facts_changed_at` (when one of its facts was last
written, forgotten, superseded or lapsed; null with none), read for the whole page at once
(`FactListing.entity_tallies`). Remote callers never see private pages, and their counts and times
leave private facts out.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from fleetmem.errors import Outcome
from fleetmem.memory import cursors
from fleetmem.memory.cursors import CURSOR_DESCRIPTION, CursorArg
from fleetmem.memory.params import Limit, Params
from fleetmem.memory.registry import read_tool
from fleetmem.models import Caller, PageItem, Wire
from fleetmem.ports import CallContext, Deps, EntityFacts
from fleetmem.protocol import PROTOCOL_VERSION
from fleetmem.timefmt import iso

TOOL = "list_pages"
DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def encode_cursor(slug: str) -> str:
    """The opaque `next_cursor` for "after this slug"."""
    return cursors.encode({"after": slug})


def decode_cursor(cursor: str) -> str | None:
    """The slug a cursor of `encode_cursor` names, or None when it is not one."""
    after = (cursors.decode(cursor) or {}).get("after")
    return after if isinstance(after, str) and after else None


class ListPagesParams(Params):
    limit: Limit(DEFAULT_LIMIT, MAX_LIMIT) = Field(  # type: ignore[valid-type]
        default=None, description=f"Pages per call (default {DEFAULT_LIMIT}, 1 to {MAX_LIMIT})."
    )
    cursor: CursorArg(TOOL, "the first page", decode_cursor) = Field(  # type: ignore[valid-type]
        default=None, description=CURSOR_DESCRIPTION
    )
    type: str | None = Field(default=None, description='Only pages of this type, e.g. "person".')
    with_counts: bool = Field(
        default=False,
        description="Also give each page's active fact count (`facts`) and when one of its facts last "
        "changed (`facts_changed_at`).",
    )


class ListedPage(PageItem):
    """A listed page; with `with_counts`, its facts too (absent otherwise)."""

    facts: int | None = None
    facts_changed_at: str | None = None


class ListPagesResult(Wire):
    pages: list[ListedPage]
    next_cursor: str | None  # null: the end
    protocol_version: int


def run(deps: Deps, caller: Caller, params: ListPagesParams, ctx: CallContext) -> Outcome:
    limit = params.limit or DEFAULT_LIMIT
    after = decode_cursor(params.cursor) if params.cursor else None
    heads = deps.page_listing.list(
        caller.tenant,
        world_only=caller.remote,
        limit=limit + 1,
        after=after,
        type=(params.type or None),
    )
    shown = heads[:limit]
    rows: list[dict[str, Any]] = [
        {"slug": h.slug, "title": h.title, "type": h.type, "updated_at": iso(h.updated_at)} for h in shown
    ]
    if params.with_counts and shown:
        tallies = deps.fact_listing.entity_tallies(
            caller.tenant, [h.slug for h in shown], now=deps.clock.now(), world_only=caller.remote
        )
        for row in rows:
            found = tallies.get(row["slug"]) or EntityFacts()
            row |= {"facts": found.active, "facts_changed_at": iso(found.changed_at)}
    return Outcome(
        body=ListPagesResult.model_validate(
            {
                "pages": rows,
                "next_cursor": encode_cursor(shown[-1].slug) if len(heads) > limit else None,
                "protocol_version": PROTOCOL_VERSION,
            }
        ).model_dump(exclude_unset=True)
    )


DESCRIPTION = (
    "List pages by slug, 50 per call by default (limit up to 200), optionally of one type. Pass the "
    "returned next_cursor as cursor to continue; next_cursor null means the end. with_counts=true adds "
    "each page's active fact count and when its facts last changed. Example: "
    '{"type": "person", "limit": 100}.'
)

SPEC = read_tool(TOOL, DESCRIPTION, ListPagesParams, ListPagesResult, run)
