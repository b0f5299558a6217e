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

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, StringConstraints, WithJsonSchema
from pydantic_core import PydanticCustomError

from fleetmem.errors import Notice, Outcome
from fleetmem.memory import indexing
from fleetmem.memory import remember_steps as steps
from fleetmem.memory.params import NO_FIX, Hint, Params, VisibilityArg, is_blank
from fleetmem.memory.registry import write_tool
from fleetmem.memory.remember_notices import already_expired_notice, new_entity_notice, probable_update_notice
from fleetmem.memory.verbs.forget import _id_as_text
from fleetmem.models import Caller, Fact, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import (
    FACT_KINDS,
    FACT_MAX,
    PROTOCOL_VERSION,
    PROVENANCE_MAX,
    TITLE_MAX,
    FactKind,
    RememberStatus,
    SearchState,
)
from fleetmem.timefmt import iso

TOOL = "remember"
_INVISIBLE = "it holds no visible character (only spaces, zero-width or other invisible characters)"


def _refuse_blank(value: Any, code: str, empty: str) -> None:
    """A text of no visible character (`params.is_blank`) is refused with `code`: "<empty>." for "",
    "<empty>: it holds no visible character (…)." for spaces or invisible characters."""
    if isinstance(value, str) and is_blank(value):
        raise PydanticCustomError(code, f"{empty}: {_INVISIBLE}." if value else f"{empty}.")


def _fact_text(value: Any) -> Any:
    _refuse_blank(value, "fm_fact_empty", "fact is empty")
    return value


def _provenance_gate(value: Any) -> Any:
    if value is None:
        raise PydanticCustomError("fm_provenance_missing", "provenance is missing.")
    _refuse_blank(value, "provenance_required", "provenance is blank")
    return value


def _ttl_given(value: Any) -> Any:
    # "" (or whitespace) means "never expires", as PROTOCOL_NOTES and the reference define it; a ttl
    # of invisible characters only ("\u200b") is no duration and no date.
    if isinstance(value, str) and value.strip() and is_blank(value):
        raise PydanticCustomError(
            "fm_ttl_empty",
            'ttl holds only invisible characters. Leave ttl out (or "", or null) for a fact that never '
            'expires, or send the duration you meant ("30d", "12h") or an ISO 8601 date.',
        )
    return value


def _fact_fix(raw: Any, now: datetime) -> Any:
    return str(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else NO_FIX


def _provenance_fix(raw: Any, now: datetime) -> str:
    if isinstance(raw, str) and not is_blank(raw):
        return raw[:PROVENANCE_MAX]
    if raw is not None and not isinstance(raw, str):
        return str(raw)
    # The corrected call attributes the fact to this conversation.
    return f"agent conversation {(iso(now) or '')[:10]}"


class RememberParams(Params):
    # Checked in the documented order (docs/protocol.md, remember): fact, provenance (absent ->
    # invalid_params, blank -> provenance_required, > 500 chars -> invalid_params), kind,
    # visibility, ttl (its grammar is read by `ttl.parse_ttl`). No docstring: it would become the
    # inputSchema's description.

    model_config = ConfigDict(extra="ignore", json_schema_extra={"required": ["fact", "provenance"]})

    fact: Annotated[
        str,
        AfterValidator(_fact_text),
        Hint(
            accepts="one non-empty sentence",
            cause="remember needs one non-empty sentence in `fact`.",
            fix=_fact_fix,
            remedy="call remember with the fact text and its provenance",
        ),
    ] = Field(
        "",
        validate_default=True,
        description="The ONE fact to save, as a short self-contained sentence (at most 2,000 characters; "
        'store longer text as a page with put_page). Example: "Alice prefers async standups over meetings".',
        json_schema_extra={"maxLength": FACT_MAX},
    )
    provenance: Annotated[
        str,
        BeforeValidator(_provenance_gate),
        StringConstraints(max_length=PROVENANCE_MAX),
        WithJsonSchema({"type": "string", "maxLength": PROVENANCE_MAX}),
        Hint(
            accepts=f"free text of 1 to {PROVENANCE_MAX} characters",
            cause=f"every fact must say where it came from (free text, up to {PROVENANCE_MAX} characters).",
            fix=_provenance_fix,
        ),
    ] = Field(
        None,  # absent is reported as missing, never used as a value
        validate_default=True,
        description="REQUIRED. Where the fact came from, free text up to 500 characters, stored verbatim. "
        'Examples: "user said in chat 2026-06-12", "import: notes.md".',
    )
    entity: str | None = Field(
        None,
        description="Slug or name of the person/company/project the fact is about, e.g. "
        '"people/alice-example" or "Acme". Set it whenever the fact is about a specific entity: '
        "entity-scoped recall only finds attributed facts. An exact alias, title or slug of an existing "
        "page files the fact under that page's slug.",
        json_schema_extra={"maxLength": TITLE_MAX},
    )
    kind: Annotated[
        FactKind | None,
        WithJsonSchema({"type": "string", "enum": list(FACT_KINDS)}),
        Hint(accepts=f"one of {', '.join(FACT_KINDS)}", fix="fact"),
    ] = Field(None, description='One of event, preference, commitment, belief, fact (default "fact").')
    visibility: VisibilityArg = Field(
        None,
        description='"world" (default: readable by every agent connected to this brain) or "private" '
        "(readable only by the owner's local CLI; remote agents cannot read or forget it).",
    )
    ttl: Annotated[
        str | None,
        AfterValidator(_ttl_given),
        WithJsonSchema({"type": ["string", "null"]}),
        Hint(
            accepts="a duration string or an ISO 8601 date",
            cause='ttl is text: a shorthand like "30d" / "12h" or an ISO 8601 date; left out (or null) the '
            "fact never expires.",
            # A bare number has no unit (seconds? days?) and an empty text no duration at all: no
            # corrected call keeps the meaning.
            fix=NO_FIX,
            remedy='pass ttl as text with its unit, e.g. "30d" for thirty days or "12h" for twelve hours, '
            "or leave ttl out for a fact that never expires",
        ),
    ] = Field(
        None,
        description='When the fact stops being true: a duration shorthand ("30d", "12h", "45m" = minutes, '
        '"2w") or an absolute ISO 8601 date/datetime. ISO durations like "P30D" are not accepted. '
        "Omit for never.",
    )
    session_id: str | None = Field(
        None, description="Your conversation/session id, so recall(session_id=...) can find this fact later."
    )
    idempotency_key: str | None = Field(
        None,
        description="Optional retry key: repeating the call with the same key and arguments within 24 h "
        "returns the first result instead of saving twice.",
    )
    supersedes: Annotated[
        str | None,
        WithJsonSchema({"type": "string"}),
        Hint(
            accepts="a string",
            cause="fact ids are opaque strings (remember's `id`, recall's `fact_id`).",
            fix=_id_as_text,
        ),
    ] = Field(
        None,
        description="Optional: the `fact_id` of the ACTIVE fact this one replaces (remember's `id` or "
        'recall\'s `facts[].fact_id`, e.g. "f_01JD..."). That fact is expired with `superseded_by` set '
        "to the new fact and the answer says `status: superseded`. Use it when a value changed "
        '("the deadline moved to 2027-02-01") and you know the fact that held the old value.',
    )


class RememberResult(Wire):
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
