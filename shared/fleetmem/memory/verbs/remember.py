"""remember — save ONE fact with mandatory provenance (docs/protocol.md: remember; D2, D5–D7, D11, D17).

Public API: `RememberParams`, `RememberResult`, `RememberAnswer` (the single or the batch answer: the
result model), `run(deps, caller, params, ctx) -> Outcome`, `SPEC`. A call with `items` (D26) is run
by `fleetmem.transport.batch`, one single remember per item.
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

Explicit replacement (`replaces`, alias `supersedes`; D23): the caller names the fact the new one
replaces by its `fact_id`. It must be a fact of the caller's tenant that the caller can see (for a
remote caller: a world fact) with the same visibility, else forget's `not_found` (a foreign or
private id looks missing); an inactive or mismatched one is `invalid_params` whose message starts
with target_withdrawn / target_superseded / target_expired / replaces_entity_mismatch /
replaces_duplicate. Identical text is `status: duplicate`. Every superseded answer carries
`superseded_fact_id`; `replaced_by_caller: true` only for a named target. A claim saved with an
entity supersedes its active unattributed copy (the auto-link). A withdrawn claim (forgotten) is
refused up front with `fact_withdrawn` unless `restore_withdrawn` is true. The named fact is expired with
`superseded_by` = the new fact (`status: superseded`) and no automatic matching runs: the caller
said what the fact replaces. A retry with the same `idempotency_key` replays the first answer (D2).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, RootModel

from fleetmem.errors import Notice, Outcome
from fleetmem.memory import indexing
from fleetmem.memory import remember_steps as steps
from fleetmem.memory.entity_inference import InferenceWarning
from fleetmem.memory.receipts import ReceiptFields
from fleetmem.memory.registry import either_schema, write_tool
from fleetmem.memory.remember_batch_result import RememberBatchResult
from fleetmem.memory.remember_notices import already_expired_notice, new_entity_notice, probable_update_notice
from fleetmem.memory.remember_params import RememberParams
from fleetmem.memory.write_source import check_source
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
    superseded_fact_id: str | None = Field(None, description="On every superseded answer: the fact replaced.")
    replaced_by_caller: bool | None = Field(None, description="true when `replaces`/`supersedes` named it.")
    # D24: how the entity was found when `entity` was left out, or why the save is unattributed
    entity_inferred: Literal["mention"] | None = None
    warnings: list[InferenceWarning] | None = None
    hint: str | None = None


class RememberAnswer(RootModel[RememberResult | RememberBatchResult]):
    """remember's success body: the single answer (`fact`), or the batch answer (`items`, D26)."""

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Still an object schema (MCP's `outputSchema` is one): the `anyOf` of the two answers, with
        every property either may hold listed."""
        return either_schema(super().model_json_schema(*args, **kwargs))


def run(deps: Deps, caller: Caller, params: RememberParams, ctx: CallContext) -> Outcome:
    check_source(TOOL, params, caller)  # D27
    ask = steps.parse(deps, params, meta_session_id=ctx.meta_session_id)
    reads = steps.resolve(deps, caller, params, ask)
    draft = steps.draft_fact(deps, caller, ask, reads)
    notices: list[Notice | None] = []
    if reads.target is not None:
        notices.append(new_entity_notice(deps, caller, params, reads.target, reads.pool.facts))
    if ask.born_expired:
        notices.append(already_expired_notice(ask.valid_until))  # type: ignore[arg-type]
    decision = steps.decide_and_write(deps, caller, params, ask, reads, draft)
    degraded = reads.vec is None
    steps.reinstate(deps, caller, params, reads)
    if decision.status == "duplicate":
        return _inference_fields(_duplicate(deps, ctx, decision, degraded=degraded, notices=notices), reads)
    indexed = steps.index_saved(deps, caller, decision)
    if decision.status == "inserted" and decision.probable is not None:
        notices.append(probable_update_notice(params, decision.probable))
    fact, existing = decision.fact, decision.existing
    status_text = f"Saved fact #{fact.seq}" + (f" (supersedes #{existing.seq})" if existing else "")
    if existing is not None and decision.named is None and existing is decision.unlinked:
        status_text += ": it links the same claim saved without an entity; nothing to forget"
    if ask.born_expired:
        status_text += " (already expired)"
    extra: dict[str, Any] = {}
    if existing is not None:
        extra["superseded_fact_id"] = existing.fact_id
        if decision.named is not None:
            extra["replaced_by_caller"] = True
    answer = _response(
        fact, decision.status, status_text, current=indexed, degraded=degraded, notices=notices, extra=extra
    )
    return _inference_fields(answer, reads)


#: D24: what an unattributed save says (`hint` names the `entity` input)
UNATTRIBUTED_HINT = (
    "Saved without an entity: pass `entity` (the slug or name of the person, company or project the "
    "fact is about) so that recall(entity=...) finds it."
)


def _inference_fields(answer: Outcome, reads: steps.Reads) -> Outcome:
    """D24: `entity_inferred` on a linked save, `warnings` + `hint` on an unattributed one."""
    extra: dict[str, Any] = {}
    if reads.inferred:
        extra["entity_inferred"] = "mention"
    elif reads.warning is not None and answer.body.get("entity_slug") is None:
        extra = {"warnings": [reads.warning], "hint": UNATTRIBUTED_HINT}
    if not extra:
        return answer
    body = RememberResult.model_validate({**answer.body, **extra}).model_dump(exclude_unset=True)
    return Outcome(body, list(answer.notices))


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
    extra: dict[str, Any] | None = None,
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
    body.update(extra or {})
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
    RememberAnswer,
    run,
    surface="verbs",
    annotations={"readOnlyHint": False, "idempotentHint": True, "destructiveHint": False},
    idempotency=True,
)
