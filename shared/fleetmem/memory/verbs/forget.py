"""forget — expire a fact by its opaque string id, with an audit row (docs/protocol.md, forget).

Public API: `ForgetParams`, `ForgetResult`, `run(deps, caller, params, ctx) -> Outcome`.

A numeric id is a caller mistake (`invalid_params`; the fix passes it as a string). Unknown,
malformed, other-tenant and — for remote callers — private ids all answer the same `not_found`.
Already-inactive facts (forgotten, superseded or past their TTL) succeed with `expired: false`.
The fact leaves the search index when the index is written through.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from fleetmem.errors import Fix, NotFound, Outcome, VerbError
from fleetmem.memory import indexing
from fleetmem.memory.common import normalize_text, shown_to
from fleetmem.memory.fact_dedup import CANDIDATE_SCAN, candidates_at, claim_key, decision_pool
from fleetmem.memory.params import FactIdArg, Params
from fleetmem.memory.receipts import ReceiptFields
from fleetmem.memory.registry import REMOVES_IDEMPOTENT, write_tool
from fleetmem.memory.vectors import cosines
from fleetmem.memory.write_source import check_source
from fleetmem.models import AuditEvent, Caller, Fact, Wire
from fleetmem.ports import CallContext, Deps, Withdrawal
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
    source_id: str | None = Field(
        None,
        description='Optional: the fact\'s source. This credential reaches one brain, its own source "default"; '
        "any other source is outside its grant (scope_denied).",
    )
    semantic_review: bool | None = Field(
        None,
        description="Optional, default true: false keeps the forgotten claim out of any rewording review "
        "(`similar_active.semantic_review` then says opted_out).",
    )


class SimilarCandidate(Wire):
    fact_id: str
    similarity: float


class SimilarActive(Wire):
    """D23: other active facts about the same entity that are similar (cosine >= 0.80 of the stored
    vectors, no model call): similar is not the same, the user decides."""

    state: Literal["checked", "not_checked_no_embedding", "not_checked_pending"]
    candidates: list[SimilarCandidate]
    semantic_review: Literal["scheduled", "off", "unavailable", "opted_out"]
    next: str


class ForgetResult(ReceiptFields):  # D22: the receipt fields (optional)
    id: str
    expired: bool = Field(description="true: expired now; false: it was already inactive (still success).")
    reason: str | None
    protocol_version: int
    similar_active: SimilarActive | None = None


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
    check_source(TOOL, params, caller)  # D27
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
    similar: dict[str, Any] | None = None
    if fact.is_active(now):
        _refuse_claim_linked(deps, caller, fact, now)
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
            withdraw = Withdrawal(claim_key(fact.text), fact.entity_slug, fact.visibility, fact_id, fact.client_id, now)
            # the entity's other active facts (similar_active) are read beside the expiry: one round
            expired, pool = deps.gather(
                lambda: deps.facts.expire(
                    caller.tenant,
                    fact_id,
                    at=now,
                    reason=reason,
                    actor=caller.client_id,
                    audit=trail,
                    withdraw=withdraw,
                ),
                lambda: decision_pool(deps, caller.tenant, fact.entity_slug, now).facts,
            )
        except NotFound:
            raise not_found(TOOL, fact_id) from None
        similar = _similar_active(deps, caller, fact, pool, now, review=params.semantic_review is not False)
    # Inactive either way now: an expired fact must not be found by search.
    indexing.unindex_facts(deps, caller.tenant, [fact_id])
    body: dict[str, Any] = {"id": fact_id, "expired": expired, "reason": reason, "protocol_version": PROTOCOL_VERSION}
    if similar is not None:
        body["similar_active"] = similar
    return Outcome(ForgetResult.model_validate(body).model_dump(exclude_unset=True))


#: D23: the lowest cosine at which forget names another active fact as similar, and how many
SIMILAR_MIN = 0.80
SIMILAR_MAX = 5


def _refuse_claim_linked(deps: Deps, caller: Caller, fact: Fact, now: datetime) -> None:
    """`claim_linked:` — forgetting an unattributed fact whose claim is also active on entity-linked
    facts (the newest `CANDIDATE_SCAN` active facts the caller can see) would withdraw it for
    every entity: refused, nothing changes."""
    if fact.entity_slug is not None:
        return
    norm = normalize_text(fact.text)
    recent = deps.fact_listing.recent(caller.tenant, now=now, world_only=caller.remote, limit=CANDIDATE_SCAN)
    linked = [
        f.fact_id
        for f in candidates_at(caller, fact.visibility, now, recent)
        if f.entity_slug is not None and f.fact_id != fact.fact_id and normalize_text(f.text) == norm
    ]
    if not linked:
        return
    raise VerbError(
        "invalid_params",
        f"claim_linked: the same claim is active on entity-linked facts {', '.join(linked[:5])}.",
        f"forget did not expire {fact.fact_id!r}. Cause: forgetting an unattributed fact withdraws its claim "
        f"for every entity, and facts {', '.join(linked[:5])} say the same about an entity. Fix: forget "
        "the entity-linked facts first if the claim is wrong everywhere (then this one), or leave them.",
        why="Forgetting the unattributed copy would withdraw a claim other facts still hold.",
        detail={"reason": "claim_linked", "fact_ids": linked[:SIMILAR_MAX]},
        fix=Fix(
            why="Forget the entity-linked copy first if the claim is wrong for that entity too.",
            mcp={"tool": TOOL, "arguments": {"id": linked[0]}},
            actor="user",
            asks_user=True,
        ),
        klass="caller",
    )


def _similar_active(
    deps: Deps, caller: Caller, fact: Fact, pool: list[Fact], now: datetime, *, review: bool
) -> dict[str, Any]:
    """D23: `similar_active` from the stored vectors of the entity's other active facts;
    `semantic_review` is "opted_out" when the caller said false, else "off" (fleetmem runs no
    rewording review, D27)."""
    review_state = "off" if review else "opted_out"
    model = fact.vector_model
    if fact.vector is None or model is None:
        state = "not_checked_pending" if deps.embedder is not None else "not_checked_no_embedding"
        return {"state": state, "candidates": [], "semantic_review": review_state, "next": _SIMILAR_NEXT[state]}
    others = [
        f
        for f in candidates_at(caller, fact.visibility, now, pool)
        if f.fact_id != fact.fact_id and f.entity_slug == fact.entity_slug and f.vector and f.vector_model == model
    ]
    similarities = cosines(fact.vector, [f.vector for f in others if f.vector])
    scored = sorted(((round(sim, 4), f.fact_id) for sim, f in zip(similarities, others, strict=True)), reverse=True)
    found = [{"fact_id": i, "similarity": sim} for sim, i in scored if sim >= SIMILAR_MIN][:SIMILAR_MAX]
    return {
        "state": "checked",
        "candidates": found,
        "semantic_review": review_state,
        "next": _SIMILAR_NEXT["checked" if found else "none"],
    }


_SIMILAR_NEXT = {
    "checked": "Similar is not the same: ask the user before forgetting any candidate (forget with its fact_id).",
    "none": "No other active fact about this entity is similar; nothing else to do.",
    "not_checked_pending": "This fact had no stored vector yet, so similar facts were not looked for.",
    "not_checked_no_embedding": "No embedder is configured, so similar facts were not looked for.",
}


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
