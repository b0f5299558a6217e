"""`list_pages(limit?, cursor?, type?)` — page through the brain's pages by slug (full surface, read).

Public API: `ListPagesParams`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC` (registered).
`limit` default 50, clamped to 1..200; `cursor` is the opaque `next_cursor` of the previous call (the
last slug listed); `type` filters on the page type. Response `{pages[{slug, title, type,
updated_at}], next_cursor (null on the last page), protocol_version}`. Remote callers never see
private pages.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from fleetmem.errors import Outcome
from fleetmem.memory import common
from fleetmem.memory.registry import ToolSpec, register
from fleetmem.models import Caller, PageItem, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION
from fleetmem.timefmt import iso

TOOL = "list_pages"
DEFAULT_LIMIT = 50
MAX_LIMIT = 200


class ListPagesParams(common.Params):
    model_config = ConfigDict(extra="ignore")

    limit: common.Limit(DEFAULT_LIMIT, MAX_LIMIT) = Field(  # type: ignore[valid-type]
        default=None, description=f"Pages per call (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})."
    )
    cursor: str | None = Field(default=None, description="next_cursor from the previous call.")
    type: str | None = Field(default=None, description='Only pages of this type, e.g. "person".')


class ListPagesResult(Wire):
    pages: list[PageItem]
    next_cursor: str | None  # null: the end
    protocol_version: int


def run(deps: Deps, caller: Caller, params: ListPagesParams, ctx: CallContext) -> Outcome:
    limit = common.clamp_limit(TOOL, params, default=DEFAULT_LIMIT, lo=1, hi=MAX_LIMIT)
    heads = deps.pages.list(
        caller.tenant, world_only=caller.remote, limit=limit + 1, after=(params.cursor or None),
        type=(params.type or None),
    )
    shown = heads[:limit]
    return Outcome(body=ListPagesResult.model_validate({
        "pages": [
            {"slug": h.slug, "title": h.title, "type": h.type, "updated_at": iso(h.updated_at)} for h in shown
        ],
        "next_cursor": shown[-1].slug if len(heads) > limit else None,
        "protocol_version": PROTOCOL_VERSION,
    }).model_dump())


SPEC = register(
    ToolSpec(
        name=TOOL,
        description=(
            "List pages by slug, 50 per call by default (limit up to 200), optionally of one type. Pass the "
            "returned next_cursor as cursor to continue; next_cursor null means the end. Example: "
            "{\"type\": \"person\", \"limit\": 100}."
        ),
        params=ListPagesParams,
        result=ListPagesResult,
        run=run,
        scope="read",
        surface="full",
        writes=False,
        annotations={"readOnlyHint": True},
    )
)
