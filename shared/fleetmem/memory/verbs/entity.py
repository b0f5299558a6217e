"""`entity(name)` — one known person/company/project card; never errors for data reasons.

Public API: `EntityParams`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC` (registered).
Response `{protocol_version, found, latency_ms, card?, suggestions[]}`. The name is resolved by
`entities.resolve_entity`, the resolution remember and recall use, so the card is the entity a
fact about this name is filed under:
- the name resolves to a page (alias, exact title, slug, or a bare token such as "Zora" for the
  only `people/zora-…` page): that page's card (`cards.build_card`, `page: true`);
- otherwise, when active facts visible to the caller are filed under the name's own slug: the
  fact-only card (`cards.fact_card`, `page: false`), with the pages that also match as suggestions;
- otherwise the best-ranked page (alias, title or slug tie broken by recency, or a slug suffix);
- a hit carries up to 3 runners-up (`create_safety: exists`); a miss carries `found: false` and up
  to 3 keyword near-misses (`entities.near_misses`).
A name with no letter or digit that no page has as title or alias is `invalid_params`
(`entities.require_slug`), like an empty name. `latency_ms` is the op-layer wall time rounded UP
to whole milliseconds (so it is at least 1).
Remote callers never resolve a private page (resolution runs world-only for them).
Near-misses count prefix matches too ("Pri" suggests "Priya Raman"). A name longer than 300
characters (the longest title; D16) cannot name a page: it is a miss (suggestions from its first
300 characters), never an error.
"""

from __future__ import annotations

import math
import time
from typing import Any

from pydantic import Field

from fleetmem.errors import Fix, Outcome, VerbError
from fleetmem.memory.cards import entity_card
from fleetmem.memory.entities import Candidate, near_misses, require_slug, resolve_entity
from fleetmem.memory.params import Params
from fleetmem.memory.registry import read_tool
from fleetmem.models import Caller, Card, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, SUGGESTIONS_MAX, CreateSafety

TOOL = "entity"


class EntityParams(Params):
    name: str = Field(
        description='The person, company or project: a name ("Alice Example"), an alias, or a page '
        'slug ("people/alice-example").',
    )


class EntitySuggestion(Wire):
    slug: str
    title: str
    type: str | None
    create_safety: CreateSafety


class EntityResult(Wire):
    protocol_version: int
    found: bool
    card: Card | None = None  # only when found
    suggestions: list[EntitySuggestion]  # runners-up when found, near-misses otherwise ([] if none)
    latency_ms: int


def _empty_name_error() -> VerbError:
    why = "entity looks up one named person, company or project; an empty name names nothing."
    return VerbError(
        "invalid_params",
        "name must be a non-empty string.",
        "Problem: entity was called with an empty name. Cause: name is required and must name a "
        "person, company or project. Fix: call entity again with the name or slug you mean, e.g. "
        '{"name": "Alice Example"}.',
        why=why,
        fix=Fix(
            why=why,
            actor="user",
            asks_user=True,
            user_message="Which person, company or project do you mean?",
        ),
        klass="caller",
    )


def _suggested(candidates: list[Candidate]) -> list[dict[str, Any]]:
    return [
        {"slug": c.head.slug, "title": c.head.title, "type": c.head.type, "create_safety": "exists"} for c in candidates
    ]


def run(deps: Deps, caller: Caller, params: EntityParams, ctx: CallContext) -> Outcome:
    started = time.perf_counter()
    name = (params.name or "").strip()
    if not name:
        raise _empty_name_error()
    world_only = caller.remote
    tenant = caller.tenant
    res = resolve_entity(deps, tenant, name, world_only=world_only)
    target = res.target
    require_slug(TOOL, name, target)
    body: dict[str, Any] = {"protocol_version": PROTOCOL_VERSION, "found": False}
    now = deps.clock.now()
    hit = entity_card(deps, tenant, name, res, world_only=world_only, now=now, redacted=caller.remote)
    if hit is not None:
        body["found"] = True
        body["card"] = hit.card
        # a fact-only card: the pages that also match are suggestions; a page card: its runners-up
        candidates = [c for c in [res.best, *res.runners_up] if c is not None] if hit.fact_only else res.runners_up
        suggestions = _suggested(candidates[:SUGGESTIONS_MAX])
    else:
        suggestions = near_misses(deps, tenant, name, world_only=world_only)
    body["suggestions"] = suggestions
    body["latency_ms"] = max(1, math.ceil((time.perf_counter() - started) * 1000))
    return Outcome(body=body)


DESCRIPTION = (
    "MEMORY VERB (v1): entity(name) returns the card of one known person, company or project: "
    "summary, aliases, open threads (commitments and recent events), typed edges, backlink and "
    "fact counts. Zero LLM, p99 < 100 ms: call it whenever a message names an entity, before "
    'answering about it. Example: {"name": "Alice Example"}. A miss is not an error: '
    "found=false with near-miss suggestions (create_safety says whether a page probably exists)."
)

SPEC = read_tool(TOOL, DESCRIPTION, EntityParams, EntityResult, run, surface="verbs")
