"""remember — save ONE fact with mandatory provenance (docs/protocol.md: remember; D2, D5–D7, D11, D17).

Public API: `RememberParams`, `RememberResult`, `run(deps, caller, params, ctx) -> Outcome`. The
dedup/supersession decision lives in `fleetmem.memory.fact_dedup`.

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

import random
import time
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, StringConstraints, WithJsonSchema
from pydantic_core import PydanticCustomError

from fleetmem.errors import Conflict, Fix, Notice, Outcome, Unavailable, VerbError
from fleetmem.memory import indexing
from fleetmem.memory.common import fix_call, given_args, invalid, too_long
from fleetmem.memory.entities import EntityTarget, canonicalize_entity, near_misses, require_slug
from fleetmem.memory.fact_dedup import CANDIDATE_SCAN, decision_pool, match, restated
from fleetmem.memory.params import NO_FIX, Hint, Params, VisibilityArg, is_blank
from fleetmem.memory.registry import ToolSpec, register
from fleetmem.memory.slugs import slug_size_problem, slugify
from fleetmem.memory.ttl import parse_ttl
from fleetmem.memory.vectors import pack
from fleetmem.memory.verbs.forget import _id_as_text, not_found
from fleetmem.memory.writegate import FACT_WRITES
from fleetmem.models import AuditEvent, Caller, Fact, Wire
from fleetmem.ports import CallContext, DecisionPool, Deps, FactWrite
from fleetmem.protocol import (
    FACT_KINDS,
    FACT_MAX,
    PROTOCOL_VERSION,
    PROVENANCE_MAX,
    SESSION_ID_MAX,
    SUGGESTIONS_MAX,
    TITLE_MAX,
    FactKind,
    RememberStatus,
    SearchState,
    Visibility,
)
from fleetmem.timefmt import iso

TOOL = "remember"


def _fact_text(value: Any) -> Any:
    if isinstance(value, str) and is_blank(value):
        raise PydanticCustomError(
            "fm_fact_empty",
            "fact is empty: it holds no visible character (only spaces, zero-width or other invisible characters)."
            if value
            else "fact is empty.",
        )
    return value


def _provenance_gate(value: Any) -> Any:
    if value is None:
        raise PydanticCustomError("fm_provenance_missing", "provenance is missing.")
    if isinstance(value, str) and is_blank(value):
        raise PydanticCustomError(
            "provenance_required",
            "provenance is blank: it holds no visible character (only spaces, zero-width or other "
            "invisible characters)."
            if value
            else "provenance is blank.",
        )
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


def _canonical_entity(deps: Deps, caller: Caller, name: str | None) -> EntityTarget | None:
    if name is None or not name.strip():
        return None
    # Remote writers never resolve through private pages (an alias must not reveal their slugs).
    return canonicalize_entity(deps, caller.tenant, name.strip(), world_only=caller.remote)


def _slug_guess(name: str | None) -> str | None:
    """The slug `canonicalize_entity` returns in the common case (a slug or a plain name)."""
    if name is None or not name.strip():
        return None
    return slugify(name.strip()) or None


_TOO_LONG_CAUSE = "remember keeps facts and names short so one item cannot crowd every budgeted read."


def _too_long(message: str, *, problem: str, instead: str) -> VerbError:
    return too_long(
        message,
        problem=problem,
        cause=_TOO_LONG_CAUSE,
        instead=instead,
        detail={"limits": {"fact": FACT_MAX, "entity": TITLE_MAX}},
    )


def _check_entity(params: RememberParams) -> None:
    name = (params.entity or "").strip()
    if len(name) > TITLE_MAX:
        raise _too_long(
            f"entity is longer than {TITLE_MAX} characters ({len(name)}).",
            problem=f"The entity name is {len(name)} characters long; names, aliases and slugs are at "
            f"most {TITLE_MAX}.",
            instead="pass the entity's name or page slug (look it up with entity(name)), and put "
            "descriptive text in the fact itself.",
        )


def _check_slug(params: RememberParams, target: EntityTarget | None) -> None:
    if target is not None:
        require_slug(TOOL, params.entity or "", target)
    if target is None or target.page is not None or not target.slug:
        return
    problem = slug_size_problem(target.slug)
    if problem:
        raise _too_long(
            f"entity {(params.entity or '').strip()[:60]!r}… makes a slug that is too long: {problem}.",
            problem=f"No page matches the entity name and the slug made from it is too long ({problem}).",
            instead="pass a shorter name, or the slug of an existing page (look it up with entity(name)); "
            "create a page for a new entity with put_page.",
        )


def _validate(deps: Deps, params: RememberParams) -> tuple[str, str, FactKind, Visibility, datetime | None]:
    """The parts of the documented order the parameter types cannot check: the fact's size (D16), the ttl grammar."""
    text = params.fact.strip()
    if len(text) > FACT_MAX:
        raise _too_long(
            f"fact is longer than {FACT_MAX} characters ({len(text)}).",
            problem=f"The fact is {len(text)} characters long; a fact holds at most {FACT_MAX}.",
            instead="store long text as a page with put_page (slug, content) and remember one short "
            "sentence that names the page, or split it into several facts of at most "
            f"{FACT_MAX} characters each.",
        )
    valid_until = parse_ttl(params.ttl, deps.clock.now())  # a bad ttl raises its own invalid_params
    return params.fact.strip(), params.provenance, params.kind or "fact", params.visibility or "world", valid_until


#: decide-and-write rounds before a write that keeps losing races to other processes gives up
_WRITE_ATTEMPTS = 32


def _back_off() -> None:
    """A pause of a few milliseconds at most before deciding again: enough that writers in several
    processes meeting on one entity do not collide in step, short enough that a writer that lost
    does not fall behind fresh ones (every round has a winner, so a loser only needs its turn)."""
    time.sleep(random.uniform(0, 0.005))


def _saved(deps: Deps, caller: Caller, draft: Fact, seq: int, existing: Fact | None) -> Fact:
    return draft.model_copy(
        update={
            "fact_id": deps.ids.new_id("f_"),
            "seq": seq,
            "supersedes": existing.fact_id if existing is not None else None,
        }
    )


def _trail(caller: Caller, fact: Fact, existing: Fact | None) -> list[AuditEvent]:
    def event(subject: str, action: Literal["write", "supersede"], detail: dict[str, Any]) -> AuditEvent:
        return AuditEvent(
            tenant=caller.tenant,
            subject=subject,
            action=action,
            actor=caller.client_id,
            at=fact.created_at,
            provenance=fact.provenance,
            detail=detail,
        )

    trail = [event(fact.fact_id, "write", {"seq": fact.seq, **({"supersedes": existing.fact_id} if existing else {})})]
    if existing is not None:
        trail.append(event(existing.fact_id, "supersede", {"superseded_by": fact.fact_id}))
    return trail


def _lost_race(params: RememberParams) -> VerbError:
    return VerbError(
        "unavailable",
        "Another write changed this entity's facts at the same moment.",
        "The fact was not saved because concurrent writes kept changing the fact it would replace. "
        "Cause: writers in other processes raced. Fix: send the same remember call again.",
        fix=Fix(
            why="A retry re-reads the entity's facts and applies the same rule.",
            mcp={"tool": TOOL, "arguments": given_args(params)},
            actor="provider",
            retry_after_seconds=1,
        ),
        klass="retryable",
        retryable=True,
    )


def _replaced_id(params: RememberParams) -> str | None:
    if params.supersedes is None:
        return None
    fact_id = params.supersedes.strip()
    if not fact_id:
        raise invalid(
            TOOL,
            params,
            "supersedes is empty.",
            problem="`supersedes` names no fact.",
            cause="it takes the `fact_id` of the fact the new one replaces; omit it to save a fact on its own.",
            field="supersedes",
            drop=True,
        )
    return fact_id


def _replaced(caller: Caller, fact_id: str, fact: Fact | None, now: datetime) -> Fact:
    """The fact `supersedes` names, if the caller may replace it (else forget's `not_found`)."""
    if fact is None or fact.tenant != caller.tenant or (caller.remote and fact.visibility == "private"):
        raise not_found(TOOL, fact_id)
    if not fact.is_active(now):
        state = (
            "superseded by another fact"
            if fact.superseded_by
            else "forgotten"
            if fact.expired_at is not None
            else "past its valid_until"
        )
        recall_args: dict[str, Any] = {"limit": 10, **({"entity": fact.entity_slug} if fact.entity_slug else {})}
        raise VerbError(
            "not_found",
            f"No active fact with id {fact_id!r}: it was already {state}.",
            f"remember found fact {fact_id!r}, but it is no longer active, so it cannot be replaced. Cause: "
            f"it was {state}. Fix: recall the current facts and pass the active one's `fact_id` as "
            "`supersedes`, or omit `supersedes` to save the fact on its own.",
            why="supersedes replaces an active fact; an inactive one is history already.",
            fix=Fix(
                why="recall lists the active facts with their fact_id values.",
                mcp={"tool": "recall", "arguments": recall_args},
                verify={"mcp": {"tool": "recall", "arguments": recall_args}},
            ),
            klass="caller",
        )
    return fact


def run(deps: Deps, caller: Caller, params: RememberParams, ctx: CallContext) -> Outcome:
    text, provenance, kind, visibility, valid_until = _validate(deps, params)
    _check_entity(params)
    replaced_id = _replaced_id(params)
    now = deps.clock.now()
    session_id = params.session_id[:SESSION_ID_MAX] if params.session_id else None

    def embed() -> list[float] | None:
        if deps.embedder is None:
            return None
        try:
            return deps.embedder.embed([text])[0]
        except Unavailable:
            return None

    # One round of independent reads. The dedup pool is read for the entity's likely canonical
    # slug at the same time as the canonicalization itself (re-read only when they differ), and
    # the sequence number is allocated up front (a duplicate leaves a gap, never a reuse).
    guess = _slug_guess(params.entity)
    if guess is not None and slug_size_problem(guess):
        guess = ""  # never read with an over-long key; the resolved slug is read below
    seen = FACT_WRITES.version(caller.tenant, guess)  # before the pool is read
    target, vec, seq, pool, named = deps.gather(
        lambda: _canonical_entity(deps, caller, params.entity),
        embed,
        lambda: deps.facts.next_seq(caller.tenant),
        lambda: decision_pool(deps, caller.tenant, guess, now) if guess != "" else None,
        lambda: deps.facts.get(caller.tenant, replaced_id) if replaced_id is not None else None,
    )
    _check_slug(params, target)
    if replaced_id is not None:
        named = _replaced(caller, replaced_id, named, now)
    entity_slug = (target.slug or None) if target is not None else None
    if entity_slug != guess:
        seen = FACT_WRITES.version(caller.tenant, entity_slug)
        pool = decision_pool(deps, caller.tenant, entity_slug, now)
    assert pool is not None  # read for the resolved slug (a guess of "" never names one)
    degraded = vec is None
    notices = [_new_entity_notice(deps, caller, params, target, pool.facts)] if target is not None else []

    draft = Fact(
        tenant=caller.tenant,
        fact_id="pending",
        seq=0,
        text=text,
        kind=kind,
        entity_slug=entity_slug,
        provenance=provenance,
        visibility=visibility,
        session_id=session_id,
        client_id=caller.client_id,
        created_at=now,
        valid_until=valid_until,
        vector=pack(vec) if vec is not None else None,
        vector_model=deps.embedder.model_id if (vec is not None and deps.embedder) else None,
    )
    born_expired = valid_until is not None and valid_until <= now
    if born_expired:
        notices.append(_already_expired_notice(valid_until))  # type: ignore[arg-type]
    write_through = bool(deps.search.write_through)

    existing: Fact | None = None
    status = "inserted"
    fact = draft
    probable: Fact | None = None  # the fact the new one probably updates (a notice, never a merge)
    twin: Fact | None = None  # with `supersedes`: an active fact already saying the new text

    def decide(current: DecisionPool) -> FactWrite | None:
        """The decision on the entity's current pool (run by the store, D20); None: a duplicate."""
        nonlocal existing, status, fact, probable, twin
        probable = twin = None
        if named is not None:
            # the caller said what the fact replaces: no automatic matching
            existing, status = named, "superseded"
            twin = restated(caller, draft, named, current.facts)
        elif born_expired:
            # stored as history: it neither deduplicates against nor supersedes a live fact
            existing, status = None, "inserted"
        else:
            existing, status, probable = match(deps, caller, draft, vec, current.facts)
        if status == "duplicate":
            return None
        fact = _saved(deps, caller, draft, seq, existing)
        supersede = existing if status == "superseded" else None
        return FactWrite(fact, supersede=supersede, audit=_trail(caller, fact, existing))

    # One remember per entity at a time in this process (`writegate`): each decides against the
    # facts the previous one left, and the pool read above serves unless a write on this entity
    # went through since. Across processes the store makes the decision and its write one step
    # (D20); where it cannot lock, a write another process's decision made stale decides again.
    decided_on: DecisionPool | None = pool
    with FACT_WRITES.hold(caller.tenant, entity_slug) as version:
        if version != seen:
            decided_on = None
        for attempt in range(_WRITE_ATTEMPTS):
            try:
                deps.fact_decisions.put_decided(
                    caller.tenant, entity_slug, decide, now=now, limit=CANDIDATE_SCAN, pool=decided_on
                )
                break
            except Conflict:
                if attempt == _WRITE_ATTEMPTS - 1:
                    raise _lost_race(params) from None
                _back_off()
                if named is not None:  # replaced or forgotten in between?
                    named = _replaced(caller, named.fact_id, deps.facts.get(caller.tenant, named.fact_id), now)
                decided_on = None
    if status == "duplicate":
        assert existing is not None
        current = write_through
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
    indexed = indexing.index_fact(deps, fact)
    if existing is not None:
        indexed = indexing.unindex_facts(deps, caller.tenant, [existing.fact_id]) and indexed
    if twin is not None:
        indexed = _retire_twin(deps, caller, twin, fact) and indexed
    if status == "inserted" and probable is not None:
        notices.append(_probable_update_notice(params, probable))

    status_text = f"Saved fact #{fact.seq}" + (f" (supersedes #{existing.seq})" if existing else "")
    if born_expired:
        status_text += " (already expired)"
    return _response(fact, status, status_text, current=indexed, degraded=degraded, notices=notices)


def _retire_twin(deps: Deps, caller: Caller, twin: Fact, fact: Fact) -> bool:
    """The `probable_update` fix run: the fact saved by the first call says the same text as the one
    that now supersedes the old value, so it is expired (reason: restated by the new fact) instead of
    staying active twice."""
    reason = f"restated by {fact.fact_id}"
    trail = AuditEvent(
        tenant=caller.tenant,
        subject=twin.fact_id,
        action="expire",
        actor=caller.client_id,
        at=fact.created_at,
        reason=reason,
        provenance=fact.provenance,
    )
    deps.facts.expire(
        caller.tenant, twin.fact_id, at=fact.created_at, reason=reason, actor=caller.client_id, audit=trail
    )
    return indexing.unindex_facts(deps, caller.tenant, [twin.fact_id])


def _probable_update_notice(params: RememberParams, old: Fact) -> Notice:
    """`probable_update`: the new fact was saved beside an active fact it probably updates (same
    subject and attribute, another value; `sameness.probable_update`). Nothing was superseded; the
    fix is the same call with `supersedes` naming the older fact."""
    args = given_args(params)
    args.pop("idempotency_key", None)  # a new call: the old key would replay the first result
    args["supersedes"] = old.fact_id
    return Notice(
        code="probable_update",
        kind="info",
        why=f"This fact probably gives a new value to what fact #{old.seq} ({old.fact_id}) says: "
        f"{_quote(old.text)}. Both are active now. If the new value replaces the old one, run the fix: the "
        "same remember call with `supersedes`, which expires the older fact (superseded_by the new one) "
        "and keeps the new text once. If both are true, do nothing.",
        fix=fix_call(TOOL, args, f"Replace fact {old.fact_id} with this one."),
    )


def _quote(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _new_entity_notice(
    deps: Deps, caller: Caller, params: RememberParams, target: EntityTarget, pool: list[Fact]
) -> Notice | None:
    """`new_entity` when the fact starts a slug: no page resolved and no fact the caller can see
    is filed under it yet. Suggestions: the pages that tied at an exact rank, then near-misses."""
    if target.page is not None or not target.slug:
        return None
    if any(
        f.entity_slug == target.slug
        and (not caller.remote or f.visibility == "world" or f.client_id == caller.client_id)
        for f in pool
    ):
        return None
    name = (params.entity or "").strip()
    picks = [{"slug": h.slug, "title": h.title} for h in target.ambiguous[:SUGGESTIONS_MAX]]
    if len(picks) < SUGGESTIONS_MAX:
        taken = (*(p["slug"] for p in picks), target.slug)
        more = near_misses(deps, caller.tenant, name, world_only=caller.remote, exclude=taken)
        picks += [{"slug": m["slug"], "title": m["title"]} for m in more][: SUGGESTIONS_MAX - len(picks)]
    why = f"No page matches entity {name!r}, so the fact was filed under the new slug {target.slug!r}."
    if target.ambiguous:
        why += " The name matches several pages exactly, so none was chosen."
    if not picks:
        why += " No similar page exists; create one with put_page to give the entity a card."
        return Notice(code="new_entity", kind="info", why=why)
    listed = "; ".join(f"{p['slug']} ({p['title']})" for p in picks)
    best = picks[0]["slug"]
    why += (
        f" Similar pages: {listed}. If you meant {best}, forget the fact just saved and run the fix, "
        "which saves it again under that page's slug."
    )
    args = given_args(params)
    args.pop("idempotency_key", None)  # a new call: the old key would replay the first result
    args["entity"] = best
    return Notice(
        code="new_entity",
        kind="info",
        why=why,
        fix=fix_call(TOOL, args, f"The same fact filed under {best}, the closest existing page."),
    )


def _already_expired_notice(valid_until: datetime) -> Notice:
    return Notice(
        code="already_expired",
        kind="info",
        why=f"valid_until {iso(valid_until)} is already past, so the fact was stored expired: it replaced "
        "or merged with no other fact, and recall shows it only with include_expired: true. Omit ttl "
        "or give a future date to save a current fact.",
    )


def _response(
    fact: Fact,
    status: str,
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


SPEC = register(
    ToolSpec(
        name=TOOL,
        description=(
            'MEMORY VERB (v1): Save ONE fact with mandatory provenance, e.g. remember(fact="Alice prefers '
            'async standups", provenance="user said in chat 2026-06-12", entity="people/alice"). '
            "Set `entity` when the fact is about a person/company/project. Near-duplicates are detected: "
            "branch on `status` (inserted | duplicate | superseded); a newer fact on the same entity and kind "
            "that restates or updates an older one supersedes it, while facts whose names, numbers, dates or "
            "ids differ stay separate; when you know the fact a new value replaces, pass its fact_id as "
            '`supersedes`. `ttl` takes "30d"/"12h"/"45m" (minutes) or an '
            'ISO date — not "P30D". Saved facts are readable by every agent on this brain unless '
            'visibility is "private".'
        ),
        params=RememberParams,
        result=RememberResult,
        run=run,
        scope="write",
        surface="verbs",
        writes=True,
        annotations={"readOnlyHint": False, "idempotentHint": True, "destructiveHint": False},
        idempotency=True,
    )
)
