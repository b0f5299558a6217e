"""purge_fact (admin, D12) — hard-delete a fact and its search index entry for deletion requests.

Public API: `PurgeFactParams`, `PurgeFactResult`, `run(deps, caller, params, ctx) -> Outcome`.

`forget` stays the audited expiry; purge removes the stored fact itself. An audit row "purge"
(who, when, reason) is kept, without the fact text. Unknown or foreign ids -> `not_found`.

`dry_run: true` checks the id and deletes nothing: `{id, purged: false, dry_run: true, ...}` when
the fact exists, `not_found` when it does not. The CLI runs it before asking for confirmation, so
an unknown id answers `not_found` instead of asking the user to approve deleting nothing.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from fleetmem.errors import Outcome
from fleetmem.memory import indexing
from fleetmem.memory.common import shown_to
from fleetmem.memory.params import Params
from fleetmem.memory.registry import REMOVES, write_tool
from fleetmem.memory.verbs.forget import not_found
from fleetmem.models import AuditEvent, Caller, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, PROVENANCE_MAX

TOOL = "purge_fact"


class PurgeFactParams(Params):
    model_config = ConfigDict(extra="ignore", json_schema_extra={"required": ["id"]})

    id: str = Field("", description='The fact\'s opaque string id, e.g. "f_01JD...".')
    reason: str | None = Field(None, description='Why it is purged, e.g. "deletion request 2026-06-12".')
    dry_run: bool = Field(
        False, description="true: only check that the fact exists (not_found when it does not); nothing is deleted."
    )


class PurgeFactResult(Wire):
    id: str
    purged: bool
    reason: str | None
    dry_run: bool
    protocol_version: int


def run(deps: Deps, caller: Caller, params: PurgeFactParams, ctx: CallContext) -> Outcome:
    fact_id = (params.id or "").strip()
    fact = shown_to(caller, deps.facts.get(caller.tenant, fact_id)) if fact_id else None
    if fact is None:
        raise not_found(TOOL, fact_id)
    reason = params.reason[:PROVENANCE_MAX] if params.reason else None
    if params.dry_run:
        checked = PurgeFactResult(
            id=fact_id, purged=False, reason=reason, dry_run=True, protocol_version=PROTOCOL_VERSION
        )
        return Outcome(checked.model_dump())
    purged = deps.facts.purge(caller.tenant, fact_id)
    # Written-through indexes drop the entry now; stream-fed ones (AWS) drop it when the purge's
    # REMOVE record reaches the indexer. Meanwhile it cannot surface: fact reads go to the store.
    indexing.unindex_facts(deps, caller.tenant, [fact_id])
    deps.audit.append(
        AuditEvent(
            tenant=caller.tenant,
            subject=fact_id,
            action="purge",
            actor=caller.client_id,
            at=deps.clock.now(),
            reason=reason,
            detail={"seq": fact.seq, "visibility": fact.visibility, "entity_slug": fact.entity_slug},
        )
    )
    result = PurgeFactResult(id=fact_id, purged=purged, reason=reason, dry_run=False, protocol_version=PROTOCOL_VERSION)
    return Outcome(result.model_dump())


DESCRIPTION = (
    "Admin: permanently delete a fact and its search entry (for deletion requests), e.g. "
    'purge_fact(id="f_01JD...", reason="user deletion request"). Irreversible; use forget to '
    "expire a fact with an audit trail instead."
)

SPEC = write_tool(TOOL, DESCRIPTION, PurgeFactParams, PurgeFactResult, run, annotations=REMOVES, scope="admin")
