"""`context_pack(entities, budget_tokens?, since?, session_id?, include_private?)` — a budget-packed
bundle of entity cards + open threads + hot facts for session boundaries (docs/protocol.md: context_pack).

Public API: `ContextPackParams`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC` (registered).

- `entities`: comma-separated string; trimmed, empties dropped, capped at 8; echoed after capping.
  Each resolves as `entity` resolves it and gets the card `entity` gives (`cards.entity_card`: a
  page's card, or the fact-only card of an entity that has facts but no page). Entities that do
  not resolve are silently omitted (an all-miss pack is an empty success).
- `since` (ISO 8601, else invalid_params) keeps only open threads dated strictly after it.
- facts arm ("hot memory"): facts about the asked (resolved) entities only — those of the session
  when `session_id` is given, else those of the last 24 hours — newest first, at most 10. No
  entity resolved: no facts. Fact items have recall's shape (`fact`, `kind`, ...). Cards are the
  reference's flat cards (`cards.flat_card`).
- Visibility: world-only on every arm unless the caller is trusted-local (remote=False) AND passed
  include_private; then all arms widen together.
- Budget: spent on `text`, frame included (D16): the longest prefix of the cards, then the facts,
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
from datetime import timedelta
from typing import Any

from pydantic import Field

from fleetmem.errors import Outcome
from fleetmem.memory import budget, common
from fleetmem.memory.cards import entity_card, flat_card
from fleetmem.memory.entities import parse_entity_list, resolve_entity
from fleetmem.memory.params import Budget, Params, SinceText
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


class ContextPackParams(Params):
    entities: str = Field(
        description="Comma-separated entity names or slugs (at most 8 are used), e.g. "
        '"acme-example, people/alice-example".',
    )
    budget_tokens: Budget = Field(
        default=None, description="Token budget (integer >= 1): cards pack first, then facts."
    )
    since: SinceText = Field(default=None, description="ISO 8601 date/datetime: only open threads dated after it.")
    session_id: str | None = Field(
        default=None, description="Hot facts are the asked entities' facts from this session when given."
    )
    include_private: bool = Field(
        default=False, description="Trusted local callers only: include private pages and facts."
    )


class ContextPackResult(BudgetFields):
    protocol_version: int
    entities: list[str]
    cards: list[PackCard]
    open_threads: list[SlugThread]
    facts: list[PackFact]
    text: str
    degraded_reason: str | None = None


def deadline_passed(ctx: CallContext) -> bool:
    return ctx.deadline_at is not None and time.monotonic() >= ctx.deadline_at


def run(deps: Deps, caller: Caller, params: ContextPackParams, ctx: CallContext) -> Outcome:
    now = deps.clock.now()
    budget_tokens = common.check_budget(TOOL, params)
    since = common.parse_since(TOOL, params, "since", now)
    world_only = common.world_only(caller, params.include_private)
    entities = parse_entity_list(params.entities, CONTEXT_PACK_MAX_ENTITIES)
    session_id = (params.session_id or "").strip()[:SESSION_ID_MAX] or None

    degraded: list[str] = []
    cards: list[dict[str, Any]] = []
    entity_facts: list[Fact] = []
    seen: set[str] = set()
    for i, name in enumerate(entities):
        if deadline_passed(ctx):
            degraded.append(f"server deadline reached after {i} of {len(entities)} entities")
            break
        res = resolve_entity(deps, caller.tenant, name, world_only=world_only)
        hit = entity_card(
            deps, caller.tenant, name, res, world_only=world_only, now=now, redacted=caller.remote, since=since
        )
        if hit is None or hit.slug in seen:
            continue
        seen.add(hit.slug)
        cards.append(flat_card(hit.card))
        entity_facts += hit.inputs.facts

    rows: list[Fact] = []
    if degraded or deadline_passed(ctx):
        if not degraded:
            degraded.append("server deadline reached before the facts arm")
        else:
            degraded.append("facts arm skipped")
    else:
        # Hot facts are the asked entities' own (read with their cards): this session's, else the
        # last 24 hours'.
        after = now - timedelta(hours=HOT_FACTS_HOURS)
        rows = [f for f in entity_facts if (f.session_id == session_id if session_id else f.created_at > after)]
    rows = sorted(rows, key=lambda f: (f.created_at, f.seq), reverse=True)[:HOT_FACTS_LIMIT]
    # D25: the facts as this caller reads them (redacted for a remote caller), in the JSON and in the
    # text alike, so the budget is spent on what the caller receives. Cards come so from entity_card.
    facts = [fact_item(f) for f in shown_facts(caller, rows)]

    # The budget is spent on the text, frame included: the pack lists exactly the prefix of cards,
    # then facts, that its text shows.
    total = len(cards) + len(facts)

    def render(shown: int) -> str:
        return render_context_pack(entities, cards[:shown], facts[: max(0, shown - len(cards))], left_out=total - shown)

    shown, text = budget.fit_prefix(render, total, budget_tokens)
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
    if degraded:
        body["degraded_reason"] = "; ".join(degraded)
    body.update(budget.text_fields(budget_tokens, text, total - shown))
    return Outcome(body=body)


DESCRIPTION = (
    "MEMORY VERB (v1): context_pack(entities, budget_tokens?) returns one budget-packed bundle for "
    "the thread's standing entities: entity cards + open threads + hot facts, plus a ready-to-inject "
    "`text` block. Call it at SESSION START to warm context and right AFTER COMPACTION to restore "
    "what the summary dropped — not per message (use entity for that). Zero LLM, sub-second. "
    '`entities` is ONE comma-separated string, e.g. {"entities": "acme-example, alice-example", '
    '"budget_tokens": 4000}. World-visible data only unless a trusted local caller passes '
    "include_private."
)

SPEC = read_tool(TOOL, DESCRIPTION, ContextPackParams, ContextPackResult, run, surface="verbs")
