"""remember — save ONE fact with mandatory provenance (docs/protocol.md: remember; D2, D5–D7, D11, D17).

Public API: `RememberParams`, `RememberResult`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC`.
`run` is its steps, in `fleetmem.memory.remember_steps`; the dedup/supersession decision lives in
`fleetmem.memory.fact_dedup`, the notices in `fleetmem.memory.remember_notices`.

Validation order (each failure stops): fact not blank -> fact <= 2,000 chars -> provenance
present -> provenance not blank (`provenance_required`) -> provenance <= 500 chars -> kind ->
visibility -> ttl (invisible-only is refused; "" never expires) -> entity <= 300 chars ->
supersedes not blank -> (after resolution) the entity's slug within the slug limits (D16) ->
supersedes names an active fact the caller can see. Nothing is written before every check passed.
Blank is `params.is_blank`: no visible character, so zero-width or other invisible characters
alone are as empty as "".

Entity: resolved by `entities.canonicalize_entity` (the resolution `entity()` and recall use; D6,
D15). When nothing resolves, the fact is filed under the slugified name and, if no page and no
fact visible to the caller uses that slug yet, a `new_entity` notice names up to 3 near-miss pages
with a fix that re-runs the call with the first one.

Born expired: a `valid_until` already past stores the fact expired (history), without dedup or
supersession (`status: inserted` + an `already_expired` notice).

Dedup/supersession: the new fact is compared with up to 5 nearest ACTIVE facts on the same entity
(same tenant, same visibility; a remote caller writing a private fact only meets its own private
facts, so nothing reveals another writer's private data). Identical normalized text is always a
duplicate. With an embedder, the nearest neighbours (cosine >= 0.95) go through
`fleetmem.memory.sameness.decide`: a restatement (the distinguishing tokens — numbers, dates,
identifiers, quoted strings, proper nouns — agree) of the same kind supersedes, of another kind is
a duplicate (id = the existing fact, nothing written); a genuine update of the same attribute
supersedes; anything else is a second fact.
Without an embedder (or when it is unavailable) only exact-text dedup runs and the response says
`degraded_dedup: true` (D7).

Concurrency (D20): the store runs the decision and its write as one step (`FactStore.put_decided`):
SQLite inside its cross-process write lock; DynamoDB conditional on the entity's decision record,
deciding again when another process's decision won.

Explicit replacement (`supersedes`): the caller names the fact the new one replaces by its
`fact_id`. It must be an active fact of the caller's tenant that the caller can see (for a remote
caller: a world fact); otherwise the answer is forget's `not_found` (a foreign or private id looks
missing), or `not_found` saying the fact is no longer active. The named fact is expired with
`superseded_by` = the new fact (`status: superseded`) and no automatic matching runs: the caller
said what the fact replaces. A retry with the same `idempotency_key` replays the first answer (D2).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from fleetmem.errors import Notice, Outcome
from fleetmem.memory import indexing
from fleetmem.memory import remember_steps as steps
from fleetmem.memory.receipts import ReceiptFields
from fleetmem.memory.registry import write_tool
from fleetmem.memory.remember_notices import already_expired_notice, new_entity_notice, probable_update_notice
from fleetmem.memory.remember_params import RememberParams
from fleetmem.models import Caller, Fact
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import (
    PROTOCOL_VERSION,
    RememberStatus,
    SearchState,
)
from fleetmem.timefmt import iso

TOOL = "remember"


class RememberResult(ReceiptFields):  # D22: the receipt fields (optional)
    id: str = Field(description="Opaque fact id (the EXISTING fact's id when status is duplicate).")
    status: RememberStatus = Field(description="Branch on this.")
    status_text: str
    entity_slug: str | None
    valid_until: str | None
    protocol_version: int
    search_state: SearchState = Field(
        description="current: search already reflects the write; pending: indexing is async."
    )
    degraded_dedup: bool | None = None
    idempotent_replay: bool | None = None


def run(deps: Deps, caller: Caller, params: RememberParams, ctx: CallContext) -> Outcome:
    ask = steps.parse(deps, params)
    reads = steps.resolve(deps, caller, params, ask)
    draft = steps.draft_fact(deps, caller, ask, reads)
    notices: list[Notice | None] = []
    if reads.target is not None:
        notices.append(new_entity_notice(deps, caller, params, reads.target, reads.pool.facts))
    if ask.born_expired:
        notices.append(already_expired_notice(ask.valid_until))  # type: ignore[arg-type]
    decision = steps.decide_and_write(deps, caller, params, ask, reads, draft)
    degraded = reads.vec is None
    if decision.status == "duplicate":
        return _duplicate(deps, ctx, decision, degraded=degraded, notices=notices)
    indexed = steps.index_saved(deps, caller, decision)
    if decision.status == "inserted" and decision.probable is not None:
        notices.append(probable_update_notice(params, decision.probable))
    fact, existing = decision.fact, decision.existing
    status_text = f"Saved fact #{fact.seq}" + (f" (supersedes #{existing.seq})" if existing else "")
    if ask.born_expired:
        status_text += " (already expired)"
    return _response(fact, decision.status, status_text, current=indexed, degraded=degraded, notices=notices)


def _duplicate(
    deps: Deps, ctx: CallContext, decision: steps.Decision, *, degraded: bool, notices: list[Notice | None]
) -> Outcome:
    """The answer when the fact was already saved: the existing fact's id, nothing written."""
    existing = decision.existing
    assert existing is not None
    current = bool(deps.search.write_through)
    if ctx.keyed:  # perhaps the retry of a call killed between storing and indexing it
        current = indexing.index_fact(deps, existing)
    return _response(
        existing,
        "duplicate",
        f"Duplicate of fact #{existing.seq}",
        current=current,
        degraded=degraded,
        notices=notices,
    )


def _response(
    fact: Fact,
    status: RememberStatus,
    status_text: str,
    *,
    current: bool,
    degraded: bool,
    notices: list[Notice | None] | None = None,
) -> Outcome:
    """remember's body; `fact` is the saved fact, or the existing one for a duplicate."""
    body: dict[str, Any] = {
        "id": fact.fact_id,
        "status": status,
        "status_text": status_text,
        "entity_slug": fact.entity_slug,
        "valid_until": iso(fact.valid_until),
        "protocol_version": PROTOCOL_VERSION,
        "search_state": "current" if current else "pending",
    }
    if degraded:
        body["degraded_dedup"] = True
    return Outcome(
        RememberResult.model_validate(body).model_dump(exclude_unset=True),
        [n for n in notices or () if n is not None],
    )


DESCRIPTION = (
    'MEMORY VERB (v1): Save ONE fact with mandatory provenance, e.g. remember(fact="Alice prefers '
    'async standups", provenance="user said in chat 2026-06-12", entity="people/alice"). '
    "Set `entity` when the fact is about a person/company/project. Near-duplicates are detected: "
    "branch on `status` (inserted | duplicate | superseded); a newer fact on the same entity and kind "
    "that restates or updates an older one supersedes it, while facts whose names, numbers, dates or "
    "ids differ stay separate; when you know the fact a new value replaces, pass its fact_id as "
    '`supersedes`. `ttl` takes "30d"/"12h"/"45m" (minutes) or an '
    'ISO date — not "P30D". Saved facts are readable by every agent on this brain unless '
    'visibility is "private".'
)

SPEC = write_tool(
    TOOL,
    DESCRIPTION,
    RememberParams,
    RememberResult,
    run,
    surface="verbs",
    annotations={"readOnlyHint": False, "idempotentHint": True, "destructiveHint": False},
    idempotency=True,
)
