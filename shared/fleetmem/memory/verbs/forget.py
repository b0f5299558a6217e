"""forget — expire a fact by its opaque string id, with an audit row (docs/protocol.md, forget).

Public API: `ForgetParams`, `ForgetResult`, `run(deps, caller, params, ctx) -> Outcome`.

A numeric id is a caller mistake (`invalid_params`; the fix passes it as a string). Unknown,
malformed, other-tenant and — for remote callers — private ids all answer the same `not_found`.
Already-inactive facts (forgotten, superseded or past their TTL) succeed with `expired: false`.
The fact leaves the search index when the index is written through.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from fleetmem.errors import Fix, NotFound, Outcome, VerbError
from fleetmem.memory import indexing
from fleetmem.memory.common import shown_to
from fleetmem.memory.params import FactIdArg, Params
from fleetmem.memory.receipts import ReceiptFields
from fleetmem.memory.registry import REMOVES_IDEMPOTENT, write_tool
from fleetmem.models import AuditEvent, Caller
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, PROVENANCE_MAX

TOOL = "forget"


class ForgetParams(Params):
    model_config = ConfigDict(extra="ignore", json_schema_extra={"required": ["id"]})

    id: FactIdArg = Field(
        None,
        description="The fact's opaque STRING id: remember's `id` or recall's `facts[].fact_id` "
        '(e.g. "f_01JD..."). Never a page slug, never the numeric legacy `facts[].id`.',
    )
    reason: str | None = Field(None, description="Why the fact is being expired (kept in the audit trail).")


class ForgetResult(ReceiptFields):  # D22: the receipt fields (optional)
    id: str
    expired: bool = Field(description="true: expired now; false: it was already inactive (still success).")
    reason: str | None
    protocol_version: int


def not_found(tool: str, fact_id: str) -> VerbError:
    return VerbError(
        "not_found",
        "No fact with that id exists in this brain.",
        f"{tool} found no fact with id {fact_id!r}. Cause: fact ids come from remember's `id` or "
        'recall\'s `facts[].fact_id` (strings such as "f_01JD..."), never page slugs or the numeric '
        "`facts[].id`. Fix: recall the fact and pass its `fact_id`.",
        why="The id is unknown to this brain.",
        fix=Fix(
            why="recall lists facts with their fact_id values.",
            mcp={"tool": "recall", "arguments": {"limit": 10}},
            verify={"mcp": {"tool": "recall", "arguments": {"limit": 10}}},
        ),
        klass="caller",
    )


def run(deps: Deps, caller: Caller, params: ForgetParams, ctx: CallContext) -> Outcome:
    raw = params.id
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raise VerbError(
            "invalid_params",
            "id is missing.",
            "forget needs the fact's id. Cause: no id was given. Fix: recall the fact and pass its "
            "`fact_id` string as `id`.",
            fix=Fix(
                why="recall lists facts with their fact_id values.",
                mcp={"tool": "recall", "arguments": {"limit": 10}},
            ),
            klass="caller",
        )
    fact_id = raw.strip()
    reason = params.reason[:PROVENANCE_MAX] if params.reason else None
    fact = shown_to(caller, deps.facts.get(caller.tenant, fact_id))
    if fact is None:
        raise not_found(TOOL, fact_id)

    now = deps.clock.now()
    expired = False
    if fact.is_active(now):
        trail = AuditEvent(
            tenant=caller.tenant,
            subject=fact_id,
            action="expire",
            actor=caller.client_id,
            at=now,
            reason=reason,
            provenance=fact.provenance,
        )
        try:
            expired = deps.facts.expire(
                caller.tenant, fact_id, at=now, reason=reason, actor=caller.client_id, audit=trail
            )
        except NotFound:
            raise not_found(TOOL, fact_id) from None
    # Inactive either way now: an expired fact must not be found by search.
    indexing.unindex_facts(deps, caller.tenant, [fact_id])
    return Outcome(
        ForgetResult(id=fact_id, expired=expired, reason=reason, protocol_version=PROTOCOL_VERSION).model_dump(
            exclude_unset=True
        )
    )


DESCRIPTION = (
    "MEMORY VERB (v1): Expire a saved fact by its opaque STRING id — remember's `id` or recall's "
    '`facts[].fact_id`, e.g. forget(id="f_01JD...", reason="user corrected it"). Never pass a page '
    "slug or the numeric `facts[].id`. Idempotent: forgetting an already-expired fact returns "
    "`expired: false`. Facts are expired with an audit trail, not deleted."
)

SPEC = write_tool(
    TOOL,
    DESCRIPTION,
    ForgetParams,
    ForgetResult,
    run,
    annotations=REMOVES_IDEMPOTENT,
    surface="verbs",
    idempotency=True,
)
