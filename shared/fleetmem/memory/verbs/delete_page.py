"""`delete_page(slug)` — delete a page and its search chunks (full surface, write scope).

Public API: `DeletePageParams`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC` (registered).
Missing pages (and, for remote callers, private pages) -> `not_found`. Audit event "delete_page".
Response `{slug, deleted: true, search_state, protocol_version}` (`current` when a write-through
index dropped the chunks now, `pending` when the asynchronous indexer will).
"""

from __future__ import annotations

from pydantic import Field

from fleetmem.errors import Outcome
from fleetmem.memory.params import Params
from fleetmem.memory.receipts import ReceiptFields
from fleetmem.memory.registry import write_tool
from fleetmem.memory.verbs.get_page import page_not_found, visible_page
from fleetmem.memory.verbs.put_page import unindex_page
from fleetmem.models import AuditEvent, Caller
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, SearchState

TOOL = "delete_page"


class DeletePageParams(Params):
    slug: str = Field(description='Exact slug of the page to delete, e.g. "people/alice-example".')


class DeletePageResult(ReceiptFields):  # D22: the receipt fields (optional)
    slug: str
    deleted: bool
    search_state: SearchState
    protocol_version: int


def run(deps: Deps, caller: Caller, params: DeletePageParams, ctx: CallContext) -> Outcome:
    page = visible_page(deps, caller, params.slug or "")
    if page is None or not deps.pages.delete(caller.tenant, page.slug, at=deps.clock.now()):
        raise page_not_found(params.slug or "")
    deps.audit.append(
        AuditEvent(
            tenant=caller.tenant,
            subject=page.slug,
            action="delete_page",
            actor=caller.client_id,
            at=deps.clock.now(),
            detail={"title": page.title},
        )
    )
    unindexed = unindex_page(deps, caller.tenant, page.slug)
    result = DeletePageResult(
        slug=page.slug,
        deleted=True,
        search_state="current" if unindexed else "pending",
        protocol_version=PROTOCOL_VERSION,
    )
    return Outcome(body=result.model_dump(exclude_unset=True))  # the receipt fields are set by the pipeline


DESCRIPTION = (
    "Delete one page by exact slug (its aliases, links, timeline and search chunks go with it; "
    'facts about the entity stay). Example: {"slug": "people/alice-example"}. '
    "Unknown slug -> not_found."
)

SPEC = write_tool(
    TOOL,
    DESCRIPTION,
    DeletePageParams,
    DeletePageResult,
    run,
    annotations={"destructiveHint": True, "idempotentHint": False},
    idempotency=True,
)
