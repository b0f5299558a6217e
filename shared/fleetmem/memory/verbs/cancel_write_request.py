"""`cancel_write_request(request_id)` — cancel one of the caller's writes that has not committed
(full surface, write scope; D22).

Public API: `CancelWriteRequestParams`, `CancelWriteRequestResult`, `run`, `SPEC` (registered).
A running (or recovering) request the caller owns becomes `cancelled` (`cancelled: true`); a terminal
one (committed, cancelled) is left as it is and reported (`cancelled: false`, its receipt's state).
fleetmem writes synchronously: a write that is still executing when it is cancelled may commit
anyway, and then its receipt says `committed`. A cancelled id no longer holds its write: a later
call with it runs anew. Missing, expired, foreign and other clients' ids answer `not_found`.
"""

from __future__ import annotations

from pydantic import Field

from fleetmem.errors import Outcome
from fleetmem.memory.params import Params
from fleetmem.memory.receipts import WriteRequest, receipt
from fleetmem.memory.registry import REMOVES_IDEMPOTENT, write_tool
from fleetmem.memory.verbs.get_write_request import REQUEST_ID_FIELD, find_receipt
from fleetmem.models import Caller, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION

TOOL = "cancel_write_request"


class CancelWriteRequestParams(Params):
    request_id: str = REQUEST_ID_FIELD


class CancelWriteRequestResult(Wire):
    request_id: str
    cancelled: bool = Field(description="true: cancelled now; false: it had already ended (see write_request.state).")
    write_request: WriteRequest
    protocol_version: int


def run(deps: Deps, caller: Caller, params: CancelWriteRequestParams, ctx: CallContext) -> Outcome:
    record = find_receipt(deps, caller, params.request_id, TOOL)
    now = deps.clock.now()
    cancelled = record.state == "running" and record.result is None
    if cancelled:
        deps.idempotency.cancel(caller.tenant, caller.client_id, record.key, at=now)
        record = find_receipt(deps, caller, record.key, TOOL)
        cancelled = record.state == "cancelled"
    body = {
        "request_id": record.key,
        "cancelled": cancelled,
        "write_request": receipt(record, now=now),
        "protocol_version": PROTOCOL_VERSION,
    }
    return Outcome(CancelWriteRequestResult.model_validate(body).model_dump(exclude_unset=True))


DESCRIPTION = (
    'Cancel one of your writes that has not committed, by its request_id, e.g. {"request_id": "3b2f..."}. '
    "A committed write is not undone (cancelled: false, its receipt says committed): use forget or "
    "delete_page for that. Unknown or foreign id -> not_found."
)

SPEC = write_tool(
    TOOL, DESCRIPTION, CancelWriteRequestParams, CancelWriteRequestResult, run, annotations=REMOVES_IDEMPOTENT
)
