"""`entity(name)` — one known person/company/project card; never errors for data reasons.

Public API: `EntityParams`, `EntityAnswer` (the result model: `EntityResult` for `name`,
`entity_names.EntityNamesResult` for `names`), `run(deps, caller, params, ctx) -> Outcome`, `SPEC`.
Response `{protocol_version, found, latency_ms, card?, suggestions[], coverage?}`; with `names` (1 to
50, D35) `{protocol_version, latency_ms, results[], found, missing}` (`entity_names`). `name` and
`names` together, neither (`entity{}`), no non-blank name or more than 50 names are `invalid_params`
with a fix. The card carries the entity verb's reference fields (`entity_refs`: `referenced_by_count`,
`referenced_by[]`, `recent_facts[]`, `coverage`); a miss carries `coverage` at the top level; a
coverage other than `complete` adds a `mention_index` notice. The name is resolved by
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
from typing import Annotated, Any, ClassVar

from pydantic import Field, RootModel

from fleetmem.errors import Fix, Outcome, VerbError, caller_error
from fleetmem.memory.cards import entity_card
from fleetmem.memory.entities import Candidate, near_misses, require_slug, resolve_entity
from fleetmem.memory.entity_names import NAMES_MAX, EntityNamesResult, lookup_names
from fleetmem.memory.entity_refs import coverage, mention_index_notice
from fleetmem.memory.params import NO_FIX, Hint, Params
from fleetmem.memory.registry import either_schema, read_tool
from fleetmem.models import Caller, Card, Coverage, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, SUGGESTIONS_MAX, CreateSafety

TOOL = "entity"


class EntityParams(Params):
    #: `fleetmem entity NAME`: `name` is no longer schema-required (`names` is its alternative)
    cli_positional: ClassVar[str] = "name"

    name: str | None = Field(
        default=None,
        description='The person, company or project: a name ("Alice Example"), an alias, or a page '
        'slug ("people/alice-example"). Give `name` or `names`, not both.',
    )
    names: Annotated[
        list[str] | None,
        Hint(
            accepts=f"a JSON array of 1 to {NAMES_MAX} names (strings)",
            cause=f"names is a list of 1 to {NAMES_MAX} names, each a string.",
            fix=NO_FIX,
            remedy='send names as an array of strings, e.g. {"names": ["Alice Example", "ACME"]}, or one name as '
            '{"name": "Alice Example"}',
        ),
    ] = Field(
        default=None,
        description=f"Instead of `name`: 1 to {NAMES_MAX} names, codes or aliases resolved in one call, each as "
        "`name` resolves it; the answer is one light row per distinct name ({name, found, slug, title, type, "
        "aka, lead} or {name, found: false, suggestions}) with integer `found`/`missing` counts.",
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
    coverage: Coverage | None = None  # on a miss: how complete the link index is (D35)


class EntityAnswer(RootModel[EntityResult | EntityNamesResult]):
    """entity's success body: one card (`name`), or the light rows of a batch (`names`, D35)."""

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return either_schema(super().model_json_schema(*args, **kwargs))


def _names_error(problem: str, cause: str, instead: str, reason: str) -> VerbError:
    return caller_error(
        f"entity: {problem}", problem=problem, cause=cause, instead=instead, field="names", reason=reason
    )


def _check_names(params: EntityParams) -> list[str] | None:
    """The batch's names, or None for a call with `name`; `entity{}` is the empty-name error."""
    if params.names is None:
        if params.name is None:
            raise _empty_name_error()
        return None
    if params.name is not None:
        raise _names_error(
            "entity was called with both name and names.",
            "name asks for one card, names for a batch of light rows: one call does one of them.",
            'call entity with name alone (one card) or names alone (rows), e.g. {"names": ["Alice Example"]}.',
            "name_and_names",
        )
    if not any(n.strip() for n in params.names) or len(params.names) > NAMES_MAX:
        raise _names_error(
            f"names holds {len(params.names)} entries."
            if len(params.names) > NAMES_MAX
            else "names holds no name that is not blank.",
            f"names takes 1 to {NAMES_MAX} non-blank names.",
            f"send at most {NAMES_MAX} names per call (split a longer list into several calls), "
            "and at least one that is not blank.",
            "names_count",
        )
    return params.names


def _empty_name_error() -> VerbError:
    why = "entity looks up one named person, company or project; an empty name names nothing."
    return VerbError(
        "invalid_params",
        "name must be a non-empty string.",
        "Problem: entity was called with an empty name. Cause: name (or names, for several) is required "
        "and must name a person, company or project. Fix: call entity again with the name or slug you mean, "
        'e.g. {"name": "Alice Example"}, or several as {"names": ["Alice Example", "ACME"]}.',
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
    names = _check_names(params)
    if names is not None:
        rows = {"protocol_version": PROTOCOL_VERSION, **lookup_names(deps, caller, names)}
        rows["latency_ms"] = max(1, math.ceil((time.perf_counter() - started) * 1000))
        return Outcome(body=rows)
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
    hit = entity_card(deps, tenant, name, res, world_only=world_only, now=now, redacted=caller.remote, references=True)
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
    if hit is None:
        body["coverage"] = coverage()
    cov = body["card"]["coverage"] if hit is not None else body["coverage"]
    return Outcome(body=body, notices=[mention_index_notice(cov)] if cov.get("degraded") else [])


DESCRIPTION = (
    "MEMORY VERB (v1): entity(name) returns the card of one known person, company or project: "
    "summary, aliases, open threads (commitments and recent events), typed edges, backlink and "
    "fact counts. Zero LLM, p99 < 100 ms: call it whenever a message names an entity, before "
    'answering about it. Example: {"name": "Alice Example"}. A miss is not an error: '
    "found=false with near-miss suggestions (create_safety says whether a page probably exists). "
    'Many names at once: {"names": ["Alice Example", "ACME"]} answers one light row per name '
    "(slug, title, type, aka, lead) with found/missing counts."
)

SPEC = read_tool(TOOL, DESCRIPTION, EntityParams, EntityAnswer, run, surface="verbs")
