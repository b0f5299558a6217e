"""Which existing fact a new one repeats or replaces (D7, D17): the pool of active facts on its
entity, the candidates the caller may meet, and the decision — identical normalized text is a
duplicate; with an embedder the nearest neighbours go through `sameness.decide`.

Public API: `CANDIDATE_SCAN`, `decision_pool(deps, tenant, entity_slug, now) -> DecisionPool`,
`candidates(caller, fact, pool) -> list[Fact]`, `restated(caller, new, named, pool)`,
`match(deps, caller, new, vec, pool)` -> (existing, status, probable update); D23: `claim_key(text)`,
`candidates_at(caller, visibility, now, pool)`, `unlinked_copy(caller, text, visibility, now, pool)`.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from fleetmem.memory import sameness
from fleetmem.memory.common import normalize_text
from fleetmem.memory.vectors import cosines
from fleetmem.models import Caller, Fact
from fleetmem.ports import DecisionPool, Deps
from fleetmem.protocol import DEDUP_NEIGHBOURS, RememberStatus

CANDIDATE_SCAN = 500  # active facts of one entity loaded for the nearest-neighbour comparison


def decision_pool(deps: Deps, tenant: str, entity_slug: str | None, now: datetime) -> DecisionPool:
    """The active facts a new fact on `entity_slug` is compared with (all visibilities), with the
    store's token the write is conditional on (D20)."""
    return deps.fact_decisions.decision_pool(tenant, entity_slug, now=now, limit=CANDIDATE_SCAN)


def claim_key(text: str) -> str:
    """D23: a claim's key — the SHA-256 of its normalized text — for the withdrawn-claim records."""
    return hashlib.sha256(normalize_text(text).encode()).hexdigest()


def candidates(caller: Caller, fact: Fact, pool: list[Fact]) -> list[Fact]:
    return candidates_at(caller, fact.visibility, fact.created_at, pool)


def candidates_at(caller: Caller, visibility: str, now: datetime, pool: list[Fact]) -> list[Fact]:
    """The facts of `pool` active at `now`, with `visibility`, that the caller may meet."""
    out = []
    for f in pool:
        if not f.is_active(now) or f.visibility != visibility:
            continue
        if caller.remote and f.visibility == "private" and f.client_id != caller.client_id:
            continue
        out.append(f)
    return out


def unlinked_copy(caller: Caller, text: str, visibility: str, now: datetime, pool: list[Fact]) -> Fact | None:
    """D23: the active unattributed fact (from the unattributed pool) saying the same claim, which a
    fact saved with an entity links by superseding it."""
    norm = normalize_text(text)
    return next(
        (
            f
            for f in candidates_at(caller, visibility, now, pool)
            if f.entity_slug is None and normalize_text(f.text) == norm
        ),
        None,
    )


def restated(caller: Caller, new: Fact, named: Fact, pool: list[Fact]) -> Fact | None:
    """With `supersedes`: an active fact (not the named one) the caller may meet that already says
    the new text, e.g. the fact saved by the call a `probable_update` notice answered."""
    norm = normalize_text(new.text)
    return next(
        (f for f in candidates(caller, new, pool) if f.fact_id != named.fact_id and normalize_text(f.text) == norm),
        None,
    )


def match(
    deps: Deps, caller: Caller, new: Fact, vec: list[float] | None, pool: list[Fact]
) -> tuple[Fact | None, RememberStatus, Fact | None]:
    """-> (existing fact, "duplicate" | "superseded", None) or (None, "inserted", probable), where
    `probable` is the nearest fact the new one probably updates (`sameness.probable_update`): the
    caller is told, nothing is superseded."""
    met = candidates(caller, new, pool)
    norm = normalize_text(new.text)
    for f in met:
        if normalize_text(f.text) == norm:
            return f, "duplicate", None
    if vec is None or deps.embedder is None:
        return None, "inserted", None
    model = deps.embedder.model_id
    comparable = [f for f in met if f.vector and f.vector_model == model]
    similarities = cosines(vec, [f.vector for f in comparable if f.vector])
    scored = sorted(zip(similarities, comparable, strict=True), key=lambda sf: -sf[0])[:DEDUP_NEIGHBOURS]
    # Nearest first; the first neighbour that says the same thing decides (`sameness.decide`).
    attributed = new.entity_slug is not None
    for similarity, f in scored:
        decision = sameness.decide(new.text, new.kind, f.text, f.kind, similarity, attributed=attributed)
        if decision == "duplicate":
            return f, "duplicate", None
        if decision == "supersede":
            return f, "superseded", None
    probable = next(
        (
            f
            for similarity, f in scored
            if sameness.probable_update(new.text, new.kind, f.text, f.kind, similarity, attributed=attributed)
        ),
        None,
    )
    return None, "inserted", probable
