"""remember's steps (`fleetmem.memory.verbs.remember.run` calls them in order): parse the arguments,
resolve the entity and read what the decision needs, decide and write under the entity's gate, then
index what was saved. The decision itself (dedup, supersession) is `fleetmem.memory.fact_dedup`; the
notices are `fleetmem.memory.remember_notices`.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from fleetmem.errors import Conflict, Fix, Unavailable, VerbError
from fleetmem.memory import indexing, replacement
from fleetmem.memory.common import given_args, normalize_text, too_long
from fleetmem.memory.entities import EntityTarget, canonicalize_entity, require_slug
from fleetmem.memory.entity_inference import NO_ENTITY, InferenceWarning, infer_entity
from fleetmem.memory.fact_dedup import (
    CANDIDATE_SCAN,
    claim_key,
    decision_pool,
    match,
    restated,
    unlinked_copy,
)
from fleetmem.memory.slugs import slug_size_problem, slugify
from fleetmem.memory.ttl import parse_ttl
from fleetmem.memory.vectors import pack
from fleetmem.memory.write_source import check_revision
from fleetmem.memory.writegate import FACT_WRITES
from fleetmem.models import AuditEvent, Caller, Fact
from fleetmem.ports import DecisionPool, Deps, FactWrite, Withdrawal
from fleetmem.protocol import (
    FACT_MAX,
    SESSION_ID_MAX,
    TITLE_MAX,
    ContentOrigin,
    FactKind,
    RememberStatus,
    Visibility,
)

if TYPE_CHECKING:
    from fleetmem.memory.remember_params import RememberParams

TOOL = "remember"


@dataclass(frozen=True)
class Ask:
    """remember's arguments once every check that needs no store passed (the parse step)."""

    text: str
    provenance: str
    kind: FactKind
    visibility: Visibility
    valid_until: datetime | None
    replaced_id: str | None
    session_id: str | None
    now: datetime
    content_origin: ContentOrigin | None = None  # D24

    @property
    def born_expired(self) -> bool:
        return self.valid_until is not None and self.valid_until <= self.now


def parse(deps: Deps, params: RememberParams, *, meta_session_id: str | None = None) -> Ask:
    """The arguments checked; the session is the `session_id` argument, else the transport's
    `_meta.session_id` (`meta_session_id`)."""
    text, provenance, kind, visibility, valid_until = _validate(deps, params)
    _check_entity(params)
    check_revision(TOOL, params)  # D27
    replaced_id = replacement.replaced_id(params)
    now = deps.clock.now()
    session = params.session_id or meta_session_id
    session_id = session[:SESSION_ID_MAX] if session else None
    return Ask(text, provenance, kind, visibility, valid_until, replaced_id, session_id, now, params.content_origin)


@dataclass(frozen=True)
class Reads:
    """What the resolve step read: the entity, the fact's vector, its sequence number, the fact
    `supersedes` names, and the decision pool with the gate's version from before it was read."""

    target: EntityTarget | None
    entity_slug: str | None
    vec: list[float] | None
    seq: int
    pool: DecisionPool
    seen: int
    named: Fact | None
    unlinked: Fact | None = None
    withdrawn: list[Withdrawal] = field(default_factory=list)
    #: D24: the entity was inferred from the text (`entity_inferred: "mention"`), or why none was
    inferred: bool = False
    warning: InferenceWarning | None = None


def resolve(deps: Deps, caller: Caller, params: RememberParams, ask: Ask) -> Reads:
    """One round of independent reads. The dedup pool is read for the entity's likely canonical
    slug at the same time as the canonicalization itself (re-read only when they differ), and
    the sequence number is allocated up front (a duplicate leaves a gap, never a reuse)."""
    text, now, replaced_id = ask.text, ask.now, ask.replaced_id

    def embed() -> list[float] | None:
        if deps.embedder is None:
            return None
        try:
            return deps.embedder.embed([text])[0]
        except Unavailable:
            return None

    guess = _slug_guess(params.entity)
    if guess is not None and slug_size_problem(guess):
        guess = ""  # never read with an over-long key; the resolved slug is read below
    seen = FACT_WRITES.version(caller.tenant, guess)  # before the pool is read
    claim = claim_key(text)
    (target, inferred, warning), vec, seq, pool, named, unattributed, withdrawn = deps.gather(
        lambda: _entity_target(deps, caller, params, text),
        embed,
        lambda: deps.facts.next_seq(caller.tenant),
        lambda: decision_pool(deps, caller.tenant, guess, now) if guess != "" else None,
        lambda: deps.facts.get(caller.tenant, replaced_id) if replaced_id is not None else None,
        lambda: decision_pool(deps, caller.tenant, None, now) if guess else None,
        lambda: replacement.withdrawn(deps, caller, claim, guess, ask.visibility) if guess != "" else None,
    )
    _check_slug(params, target)
    entity_slug = (target.slug or None) if target is not None else None
    if entity_slug != guess:
        seen = FACT_WRITES.version(caller.tenant, entity_slug)
        pool = decision_pool(deps, caller.tenant, entity_slug, now)
        withdrawn = replacement.withdrawn(deps, caller, claim, entity_slug, ask.visibility)
    assert pool is not None and withdrawn is not None  # read for the resolved slug ("" never names one)
    if withdrawn and not params.restore_withdrawn:
        raise replacement.fact_withdrawn(params, withdrawn[0])
    if replaced_id is not None:
        named = replacement.replaced(caller, replaced_id, named, ask, entity_slug, pool.facts)
    if entity_slug is not None and unattributed is None:
        unattributed = decision_pool(deps, caller.tenant, None, now)
    unlinked = None
    if entity_slug is not None and unattributed is not None and not ask.born_expired and not inferred:
        unlinked = unlinked_copy(caller, text, ask.visibility, now, unattributed.facts)
    return Reads(target, entity_slug, vec, seq, pool, seen, named, unlinked, withdrawn, inferred, warning)


def draft_fact(deps: Deps, caller: Caller, ask: Ask, reads: Reads) -> Fact:
    """The fact to save, before the decision gives it an id (and what it supersedes)."""
    vec = reads.vec
    return Fact(
        tenant=caller.tenant,
        fact_id="pending",
        seq=0,
        text=ask.text,
        kind=ask.kind,
        entity_slug=reads.entity_slug,
        provenance=ask.provenance,
        visibility=ask.visibility,
        session_id=ask.session_id,
        content_origin=ask.content_origin,
        client_id=caller.client_id,
        created_at=ask.now,
        valid_until=ask.valid_until,
        vector=pack(vec) if vec is not None else None,
        vector_model=deps.embedder.model_id if (vec is not None and deps.embedder) else None,
    )


@dataclass
class Decision:
    """The decision on the entity's current pool, run by the store (D20) as often as a write loses
    a race, and what its last run decided: the status, the saved fact (the draft until one is
    saved), the fact it replaces, the fact it probably updates (a notice, never a merge) and, with
    `supersedes`, an active fact already saying the new text."""

    deps: Deps
    caller: Caller
    draft: Fact
    seq: int
    vec: list[float] | None
    named: Fact | None
    born_expired: bool
    status: RememberStatus = "inserted"
    fact: Fact = field(init=False)
    existing: Fact | None = None
    probable: Fact | None = None
    twin: Fact | None = None
    unlinked: Fact | None = None

    def __post_init__(self) -> None:
        self.fact = self.draft

    def __call__(self, current: DecisionPool) -> FactWrite | None:
        """The decision on the entity's current pool; None: a duplicate."""
        self.probable = self.twin = None
        if self.named is not None:
            # the caller said what the fact replaces: no automatic matching
            self.existing, self.status = self.named, "superseded"
            if normalize_text(self.named.text) == normalize_text(self.draft.text):
                self.status = "duplicate"  # the target already says it: nothing to write
            self.twin = restated(self.caller, self.draft, self.named, current.facts)
        elif self.born_expired:
            # stored as history: it neither deduplicates against nor supersedes a live fact
            self.existing, self.status = None, "inserted"
        else:
            self.existing, self.status, self.probable = match(
                self.deps, self.caller, self.draft, self.vec, current.facts
            )
            if self.status != "duplicate" and self.unlinked is not None:
                # D23: the same claim saved without an entity is linked by superseding that copy
                self.existing, self.status, self.probable = self.unlinked, "superseded", None
        if self.status == "duplicate":
            return None
        self.fact = _saved(self.deps, self.caller, self.draft, self.seq, self.existing)
        supersede = self.existing if self.status == "superseded" else None
        return FactWrite(self.fact, supersede=supersede, audit=_trail(self.caller, self.fact, self.existing))


def decide_and_write(
    deps: Deps, caller: Caller, params: RememberParams, ask: Ask, reads: Reads, draft: Fact
) -> Decision:
    """One remember per entity at a time in this process (`writegate`): each decides against the
    facts the previous one left, and the pool read before serves unless a write on this entity
    went through since. Across processes the store makes the decision and its write one step
    (D20); where it cannot lock, a write another process's decision made stale decides again."""
    now, entity_slug = ask.now, reads.entity_slug
    vec = None if reads.inferred else reads.vec  # D24: an inferred link dedups on exact text only
    decide = Decision(deps, caller, draft, reads.seq, vec, reads.named, ask.born_expired)
    decide.unlinked = reads.unlinked
    decided_on: DecisionPool | None = reads.pool
    with FACT_WRITES.hold(caller.tenant, entity_slug) as version:
        if version != reads.seen:
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
                named = decide.named
                if named is not None:  # replaced or forgotten in between?
                    fresh = deps.facts.get(caller.tenant, named.fact_id)
                    decide.named = replacement.replaced(caller, named.fact_id, fresh, ask, entity_slug, [])
                if decide.unlinked is not None:  # linked or forgotten in between?
                    copy = deps.facts.get(caller.tenant, decide.unlinked.fact_id)
                    decide.unlinked = copy if copy is not None and copy.is_active(now) else None
                decided_on = None
    return decide


def index_saved(deps: Deps, caller: Caller, decision: Decision) -> bool:
    """The saved fact into the search index, the fact it replaced (and a restated twin) out of it;
    True when search already reflects the write."""
    fact, existing, twin = decision.fact, decision.existing, decision.twin
    indexed = indexing.index_fact(deps, fact)
    if existing is not None:
        indexed = indexing.unindex_facts(deps, caller.tenant, [existing.fact_id]) and indexed
    if twin is not None:
        indexed = _retire_twin(deps, caller, twin, fact) and indexed
    return indexed


def _entity_target(
    deps: Deps, caller: Caller, params: RememberParams, text: str
) -> tuple[EntityTarget | None, bool, InferenceWarning | None]:
    """(target, inferred, warning): the named entity resolved, else (D24) the one entity page the
    text names when `infer_entity` (else the unattributed save's warning)."""
    if params.entity is not None and params.entity.strip():
        return _canonical_entity(deps, caller, params.entity), False, None
    if not params.infer_entity:
        return None, False, NO_ENTITY
    found = infer_entity(deps, caller, text)
    if found.page is None:
        return None, False, found.warning
    return EntityTarget(slug=found.page.slug, page=found.page, via="mention"), True, None


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
            instead="pass a shorter name, or the slug of an existing page (look it up with entity(name)).",
        )


def _validate(deps: Deps, params: RememberParams) -> tuple[str, str, FactKind, Visibility, datetime | None]:
    """The parts of the documented order the parameter types cannot check: the fact's size (D16), the ttl grammar."""
    text = params.fact.strip()
    if len(text) > FACT_MAX:
        raise _too_long(
            f"fact is longer than {FACT_MAX} characters ({len(text)}).",
            problem=f"The fact is {len(text)} characters long; a fact holds at most {FACT_MAX}.",
            instead=f"split it into several facts of at most {FACT_MAX} characters each, or keep the long "
            "text as a page and remember one short sentence that names the page.",
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


def reinstate(deps: Deps, caller: Caller, params: RememberParams, reads: Reads) -> None:
    """D23: `restore_withdrawn` lifts the withdrawals the claim was refused on, once it is saved."""
    if params.restore_withdrawn and reads.withdrawn:
        deps.facts.reinstate(caller.tenant, reads.withdrawn)


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
