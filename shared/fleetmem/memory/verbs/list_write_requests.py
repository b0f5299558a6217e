"""`list_write_requests(limit?, state?, cursor?)` — the caller's recent write receipts, newest first
(full surface, write scope; D22).

Public API: `ListWriteRequestsParams`, `ListWriteRequestsResult`, `run`, `SPEC` (registered). Only
the calling client's own receipts of the last 24 h; `limit` 1..100 (default 20); `state` one of
running, recovering, committed, cancelled; `cursor` is the previous page's `next_cursor`. Response
`{write_requests[WriteRequest], next_cursor, protocol_version}`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, WithJsonSchema

from fleetmem.errors import Outcome
from fleetmem.memory import cursors
from fleetmem.memory.cursors import CURSOR_DESCRIPTION, CursorArg
from fleetmem.memory.params import DROP, Hint, Limit, Params
from fleetmem.memory.receipts import WriteRequest, read_state, receipt
from fleetmem.memory.registry import read_tool
from fleetmem.models import Caller, IdempotencyRecord, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, WRITE_REQUESTS_PAGE_DEFAULT, WRITE_REQUESTS_PAGE_MAX
from fleetmem.timefmt import iso, parse_iso

TOOL = "list_write_requests"
STATES = ("running", "recovering", "committed", "cancelled")


def encode_cursor(record: IdempotencyRecord) -> str:
    return cursors.encode({"t": iso(record.created_at), "r": record.key})


def decode_cursor(cursor: str) -> tuple[datetime, str] | None:
    data = cursors.decode(cursor) or {}
    at, key = data.get("t"), data.get("r")
    if not isinstance(at, str) or not isinstance(key, str):
        return None
    try:
        return parse_iso(at), key
    except (ValueError, OverflowError):
        return None


class ListWriteRequestsParams(Params):
    limit: Limit(WRITE_REQUESTS_PAGE_DEFAULT, WRITE_REQUESTS_PAGE_MAX) = Field(  # type: ignore[valid-type]
        default=None,
        description=f"Receipts per call (default {WRITE_REQUESTS_PAGE_DEFAULT}, 1 to {WRITE_REQUESTS_PAGE_MAX}).",
    )
    state: Annotated[
        Literal["running", "recovering", "committed", "cancelled"] | None,
        WithJsonSchema({"type": "string", "enum": list(STATES)}),
        Hint(accepts=f"one of {', '.join(STATES)}", fix=DROP),
    ] = Field(default=None, description="Only receipts in this state.")
    cursor: CursorArg(TOOL, "the newest write", decode_cursor) = Field(  # type: ignore[valid-type]
        default=None, description=CURSOR_DESCRIPTION
    )


class ListWriteRequestsResult(Wire):
    write_requests: list[WriteRequest]
    next_cursor: str | None
    protocol_version: int


def run(deps: Deps, caller: Caller, params: ListWriteRequestsParams, ctx: CallContext) -> Outcome:
    now = deps.clock.now()
    limit = params.limit or WRITE_REQUESTS_PAGE_DEFAULT
    stored = "running" if params.state == "recovering" else params.state
    before = decode_cursor(params.cursor) if params.cursor else None
    rows = deps.idempotency.recent(
        caller.tenant, caller.client_id, now=now, limit=limit + 1, state=stored, before=before
    )
    page = rows[:limit]
    more = len(rows) > limit
    if params.state in ("running", "recovering"):
        page = [r for r in page if read_state(r, now=now) == params.state]
    body = {
        "write_requests": [receipt(r, now=now) for r in page],
        "next_cursor": encode_cursor(rows[limit - 1]) if more else None,
        "protocol_version": PROTOCOL_VERSION,
    }
    return Outcome(ListWriteRequestsResult.model_validate(body).model_dump(exclude_unset=True))


DESCRIPTION = (
    "List your recent writes' receipts (remember, forget, put_page, delete_page; last 24 h), newest "
    'first, e.g. {"limit": 10, "state": "running"}. Page with next_cursor. Each receipt names its '
    "request_id, state and a small outcome; read one with get_write_request."
)

SPEC = read_tool(TOOL, DESCRIPTION, ListWriteRequestsParams, ListWriteRequestsResult, run, scope="write")
