"""`context_pack(entities?, budget_tokens?, since?, session_id?, include_private?)` — a budget-packed
bundle of the core block + entity cards + open threads + hot facts for session boundaries
(docs/protocol.md: context_pack).

Public API: `ContextPackParams`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC` (registered).

- `entities`: comma-separated string, or an array of names (D32; an element is one name, never split);
  trimmed, empties dropped, capped at 8; echoed after capping as the `entities` list either way.
  Left out (or null): no cards, and the hot facts are the tenant's (below).
  Each resolves as `entity` resolves it and gets the card `entity` gives (`cards.entity_card`: a
  page's card, or the fact-only card of an entity that has facts but no page). Entities that do
  not resolve are silently omitted (an all-miss pack is an empty success).
- `since` (ISO 8601, else invalid_params) keeps only open threads dated strictly after it.
- core (D32, `memory.core`): the pages marked `core: true`, read beside the other arms
  (`deps.gather`), as `core{text, revision, chars_used, chars_limit, pages, truncated}` and first
  in `text`; absent when core memory is off (`Policy.core_chars` 0) or the caller sees none.
- facts arm ("hot memory"): with `entities` left out, the tenant's facts of the session when
  `session_id` is given, else of the last 24 hours, newest first, at most 10. Otherwise facts about
  the asked (resolved) entities only — those of the session
  when `session_id` is given, else those of the last 24 hours — newest first, at most 10. No
  entity resolved: no facts. Fact items have recall's shape (`fact`, `kind`, ...). Cards are the
  reference's flat cards (`cards.flat_card`).
- Visibility: world-only on every arm unless the caller is trusted-local (remote=False) AND passed
  include_private; then all arms widen together.
- Budget: spent on `text`, frame included (D16): the core block reserved first (cut, with
  `core.truncated`, when it alone exceeds the budget), then the longest prefix of the cards, then the facts,
  whose rendered block costs at most `budget_tokens` (`budget.fit_prefix`); the JSON lists exactly
  that prefix, so the arrays and the text agree. `budget_used` = the cost of the text,
  `dropped_count` = the cards and facts it left out. `open_threads` = the packed cards' threads
  flattened (each with its slug).
- Redaction (D25): for a remote caller, cards, facts' `fact` and `provenance`, and so `text`, hold
  `<REDACTED:pattern>` for credentials; the budget is spent on the redacted text.
- D10: when `ctx.deadline_at` (time.monotonic) passes, the pack built so far is returned with
  `degraded_reason`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from fleetmem.errors import Outcome
from fleetmem.memory import budget, common
from fleetmem.memory.cards import entity_card, flat_card
from fleetmem.memory.core import CORE_PAGES_MAX, CoreBlock, core_block
from fleetmem.memory.entities import parse_entity_list, resolve_entity
from fleetmem.memory.params import DROP, Budget, Hint, Params, SinceText
from fleetmem.memory.redaction import shown_facts
from fleetmem.memory.registry import read_tool
from fleetmem.memory.render import render_context_pack
from fleetmem.memory.verbs.recall import fact_item
from fleetmem.models import BudgetFields, Caller, Fact, PackCard, PackFact, SlugThread
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import (
    CONTEXT_PACK_MAX_ENTITIES,
    HOT_FACTS_HOURS,
    HOT_FACTS_LIMIT,
    PROTOCOL_VERSION,
    SESSION_ID_MAX,
)

TOOL = "context_pack"

#: `entities` as the reference takes it (D32): one comma-separated string, or an array of names;
#: advertised as either, so a strict-typing client may send both.
EntitiesArg = Annotated[
    str | list[str] | None,
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}),
    Hint(accepts="a comma-separated string or an array of strings", fix=DROP),
]


class ContextPackParams(Params):
    entities: EntitiesArg = Field(
        default=None,
        description="Comma-separated entity names or slugs, or an array of them (at most 8 are used), e.g. "
        '"acme-example, people/alice-example". Omit it for the core block and hot facts alone.',
    )
    budget_tokens: Budget = Field(
        default=None, description="Token budget (integer >= 1): the core block first, then cards, then facts."
    )
    since: SinceText = Field(default=None, description="ISO 8601 date/datetime: only open threads dated after it.")
    session_id: str | None = Field(
        default=None, description="Hot facts are the asked entities' facts from this session when given."
    )
    include_private: bool = Field(
        default=False, description="Trusted local callers only: include private pages and facts."
    )


class CoreResult(BaseModel):
    """D32: the core block (pages marked `core: true`), at the head of `text`."""

    model_config = ConfigDict(extra="forbid")
    text: str
    revision: str
    chars_used: int
    chars_limit: int
    pages: list[str]
    truncated: bool


class ContextPackResult(BudgetFields):
    protocol_version: int
    entities: list[str]
    cards: list[PackCard]
    open_threads: list[SlugThread]
    facts: list[PackFact]
    text: str
    degraded_reason: str | None = None
    core: CoreResult | None = None


def deadline_passed(ctx: CallContext) -> bool:
    return ctx.deadline_at is not None and time.monotonic() >= ctx.deadline_at


def entity_names(raw: str | list[str] | None) -> list[str] | None:
    """The names asked, trimmed, empties dropped, at most 8; None when `entities` was left out."""
    if raw is None:
        return None
    if isinstance(raw, str):
        return parse_entity_list(raw, CONTEXT_PACK_MAX_ENTITIES)
    return [name for name in (n.strip() for n in raw) if name][:CONTEXT_PACK_MAX_ENTITIES]


@dataclass
class _Arms:
    """What the cards and facts arms found (before the budget)."""

    cards: list[dict[str, Any]] = field(default_factory=list)
    rows: list[Fact] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)


def _entity_arms(deps: Deps, caller: Caller, entities: list[str], scope: _Scope, ctx: CallContext) -> _Arms:
    arms = _Arms()
    entity_facts: list[Fact] = []
    seen: set[str] = set()
    for i, name in enumerate(entities):
        if deadline_passed(ctx):
            arms.degraded.append(f"server deadline reached after {i} of {len(entities)} entities")
            break
        res = resolve_entity(deps, caller.tenant, name, world_only=scope.world_only)
        hit = entity_card(
            deps,
            caller.tenant,
            name,
            res,
            world_only=scope.world_only,
            now=scope.now,
            redacted=caller.remote,
            since=scope.since,
        )
        if hit is None or hit.slug in seen:
            continue
        seen.add(hit.slug)
        arms.cards.append(flat_card(hit.card))
        entity_facts += hit.inputs.facts
    if arms.degraded or deadline_passed(ctx):
        arms.degraded.append("facts arm skipped" if arms.degraded else "server deadline reached before the facts arm")
        return arms
    # Hot facts are the asked entities' own (read with their cards): this session's, else the last 24 hours'.
    after = scope.now - timedelta(hours=HOT_FACTS_HOURS)
    arms.rows = [
        f for f in entity_facts if (f.session_id == scope.session_id if scope.session_id else f.created_at > after)
    ]
    return arms


def _hot_facts(deps: Deps, caller: Caller, scope: _Scope) -> _Arms:
    """`entities` left out (D32): the hot facts alone, this session's, else the tenant's last 24 hours'."""
    opts: dict[str, Any] = {"now": scope.now, "world_only": scope.world_only, "limit": HOT_FACTS_LIMIT}
    if scope.session_id:
        rows = deps.fact_listing.by_session(caller.tenant, scope.session_id, **opts)
    else:
        rows = deps.fact_listing.recent(caller.tenant, after=scope.now - timedelta(hours=HOT_FACTS_HOURS), **opts)
    visible = [f for f in rows if f.is_active(scope.now) and (not scope.world_only or f.visibility == "world")]
    return _Arms(rows=visible)


def _core(deps: Deps, caller: Caller, world_only: bool) -> CoreBlock | None:
    """D32: the core block; no read at all when core memory is off (`core_chars` 0)."""
    limit = deps.policy.core_chars
    if limit <= 0:
        return None
    pages = deps.pages.core(caller.tenant, world_only=world_only, limit=CORE_PAGES_MAX)
    return core_block(pages, world_only=world_only, redacted=caller.remote, chars_limit=limit)


@dataclass(frozen=True)
class _Scope:
    now: datetime
    since: datetime | None
    world_only: bool
    session_id: str | None


def run(deps: Deps, caller: Caller, params: ContextPackParams, ctx: CallContext) -> Outcome:
    now = deps.clock.now()
    budget_tokens = common.check_budget(TOOL, params)
    since = common.parse_since(TOOL, params, "since", now)
    world_only = common.world_only(caller, params.include_private)
    asked = entity_names(params.entities)
    entities = asked or []
    session_id = (params.session_id or "").strip()[:SESSION_ID_MAX] or None
    scope = _Scope(now, since, world_only, session_id)

    # the core read runs beside the entity reads (a network backend: no extra sequential round trip)
    core, arms = deps.gather(
        lambda: _core(deps, caller, world_only),
        lambda: _hot_facts(deps, caller, scope) if asked is None else _entity_arms(deps, caller, entities, scope, ctx),
    )
    rows = sorted(arms.rows, key=lambda f: (f.created_at, f.seq), reverse=True)[:HOT_FACTS_LIMIT]
    # D25: the facts as this caller reads them (redacted for a remote caller), in the JSON and in the
    # text alike, so the budget is spent on what the caller receives. Cards come so from entity_card.
    return _packed(entities, core, arms.cards, [fact_item(f) for f in shown_facts(caller, rows)], budget_tokens, arms)


def _packed(
    entities: list[str],
    core: CoreBlock | None,
    cards: list[dict[str, Any]],
    facts: list[dict[str, Any]],
    budget_tokens: int | None,
    arms: _Arms,
) -> Outcome:
    """The budget is spent on the text, frame included: the core block is reserved first (cut to
    fit when it alone exceeds the budget, D32), then the pack lists exactly the prefix of cards,
    then facts, that its text shows."""
    total = len(cards) + len(facts)

    def render(shown: int, block: CoreBlock | None) -> str:
        core_text = block.text if block is not None else None
        return render_context_pack(
            entities, cards[:shown], facts[: max(0, shown - len(cards))], left_out=total - shown, core=core_text
        )

    if core is not None and budget_tokens is not None:
        core = _core_within(core, budget_tokens, lambda b: render(0, b))
    shown, text = budget.fit_prefix(lambda n: render(n, core), total, budget_tokens)
    packed_cards, packed_facts = cards[:shown], facts[: max(0, shown - len(cards))]
    threads = [{"slug": card["slug"], **thread} for card in packed_cards for thread in card["open_threads"]]
    body: dict[str, Any] = {
        "protocol_version": PROTOCOL_VERSION,
        "entities": entities,
        "cards": packed_cards,
        "open_threads": threads,
        "facts": packed_facts,
        "text": text,
    }
    if arms.degraded:
        body["degraded_reason"] = "; ".join(arms.degraded)
    if core is not None:
        body["core"] = core.body()
    body.update(budget.text_fields(budget_tokens, text, total - shown))
    return Outcome(body=body)


def _core_within(core: CoreBlock, budget_tokens: int, alone: Callable[[CoreBlock], str]) -> CoreBlock:
    """The core block cut so the pack's text with it and nothing else costs at most the budget."""
    over = budget.cost(alone(core)) - budget_tokens
    if over <= 0:
        return core
    chars = max(0, len(core.text) - 4 * over)
    while chars > 0 and budget.cost(alone(core.fit(chars))) > budget_tokens:
        chars -= 1 + (chars // 64)
    return core.fit(max(0, chars))


DESCRIPTION = (
    "MEMORY VERB (v1): context_pack(entities?, budget_tokens?) returns one budget-packed bundle for "
    "the thread's standing entities: the owner's core memory + entity cards + open threads + hot facts, "
    "plus a ready-to-inject "
    "`text` block. Call it at SESSION START to warm context and right AFTER COMPACTION to restore "
    "what the summary dropped — not per message (use entity for that). Zero LLM, sub-second. "
    '`entities` is a comma-separated string (or an array of names), e.g. {"entities": "acme-example, '
    'alice-example", "budget_tokens": 4000}; {} loads the core memory and hot facts alone. '
    "World-visible data only unless a trusted local caller passes "
    "include_private."
)

SPEC = read_tool(TOOL, DESCRIPTION, ContextPackParams, ContextPackResult, run, surface="verbs")
