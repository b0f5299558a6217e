"""`get_write_request(request_id)` — read one of the caller's write receipts (full surface, write scope; D22).

Public API: `GetWriteRequestParams`, `GetWriteRequestResult`, `find_receipt`, `receipt_not_found`, `run`,
`SPEC` (registered). `request_id` is the id the write was sent with (a UUID, or the caller's own id,
mapped as the write mapped it). Response `{request_id, write_request, protocol_version}`: the
receipt (state, timestamps, a small outcome; never fact text, page content or credentials). An id
of another tenant or another client, an expired one and an unknown one all answer `not_found`.
"""

from __future__ import annotations

from pydantic import Field

from fleetmem.errors import Fix, Outcome, VerbError
from fleetmem.memory.params import Params
from fleetmem.memory.receipts import WriteRequest, receipt
from fleetmem.memory.registry import read_tool
from fleetmem.models import Caller, IdempotencyRecord, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, REQUEST_ID_MAX, request_uuid

TOOL = "get_write_request"

REQUEST_ID_FIELD = Field(
    description="The request_id the write was sent with (or the one its answer's write_request named).",
    min_length=1,
    max_length=REQUEST_ID_MAX,
)


class GetWriteRequestParams(Params):
    request_id: str = REQUEST_ID_FIELD


class GetWriteRequestResult(Wire):
    request_id: str
    write_request: WriteRequest
    protocol_version: int


def receipt_not_found(tool: str) -> VerbError:
    """One answer for a missing, expired, foreign or other client's request id."""
    return VerbError(
        "not_found",
        "No write request with that id exists for this client.",
        f"{tool} found no write with that request_id. Cause: receipts are kept 24 h and belong to the "
        "client that sent the write. Fix: list your recent writes and pass one of their request_id values.",
        why="The id is unknown to this client.",
        fix=Fix(
            why="list_write_requests lists this client's recent writes with their request_id values.",
            mcp={"tool": "list_write_requests", "arguments": {}},
        ),
        klass="caller",
    )


def find_receipt(deps: Deps, caller: Caller, raw: str, tool: str) -> IdempotencyRecord:
    """The caller's own record of request id `raw` (mapped as a write maps it), or `not_found`."""
    request_id, _ = request_uuid(raw.strip())
    record = deps.idempotency.get(caller.tenant, caller.client_id, request_id, now=deps.clock.now())
    if record is None:
        raise receipt_not_found(tool)
    return record


def run(deps: Deps, caller: Caller, params: GetWriteRequestParams, ctx: CallContext) -> Outcome:
    record = find_receipt(deps, caller, params.request_id, TOOL)
    body = {
        "request_id": record.key,
        "write_request": receipt(record, now=deps.clock.now()),
        "protocol_version": PROTOCOL_VERSION,
    }
    return Outcome(GetWriteRequestResult.model_validate(body).model_dump(exclude_unset=True))


DESCRIPTION = (
    "Read the durable receipt of one of your writes (remember, forget, put_page, delete_page) by its "
    'request_id, e.g. {"request_id": "3b2f...-..."}: `write_request.state` is committed, running, '
    "recovering or cancelled. Poll it when a write answered unavailable with write_error "
    '"write_pending", instead of writing again. Unknown or foreign id -> not_found.'
)

SPEC = read_tool(TOOL, DESCRIPTION, GetWriteRequestParams, GetWriteRequestResult, run, scope="write")
