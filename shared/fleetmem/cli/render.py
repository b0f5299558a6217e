"""Successes of the tool subcommands for humans, read through each tool's result model; tools
without a dedicated view print as YAML."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fleetmem.cli.framework import yaml_text
from fleetmem.console import Output

if TYPE_CHECKING:  # the models are read when a body is rendered (`render_body` imports the verbs)
    from fleetmem.memory.verbs.context_pack import ContextPackResult
    from fleetmem.memory.verbs.delta import DeltaResult
    from fleetmem.memory.verbs.entity import EntityAnswer
    from fleetmem.memory.verbs.forget import ForgetResult
    from fleetmem.memory.verbs.get_page import GetPageResult
    from fleetmem.memory.verbs.recall import RecallResult
    from fleetmem.memory.verbs.remember import RememberAnswer
    from fleetmem.memory.verbs.synthesize import SynthesizeResult
    from fleetmem.models import BudgetFields


def _budget_line(result: BudgetFields) -> str | None:
    if result.budget_tokens is None:  # no budget asked: the response has no budget fields
        return None
    return f"budget: {result.budget_used}/{result.budget_tokens} tokens used, {result.dropped_count} dropped"


def _render_remember(answer: RememberAnswer, out: Output) -> None:
    from fleetmem.memory.remember_batch_result import BatchItemFailed
    from fleetmem.memory.verbs.remember import RememberResult

    r = answer.root
    if not isinstance(r, RememberResult):  # a batch (`items`): one line per item
        out.text(f"{r.saved} saved, {r.failed} failed")
        for item in r.items:
            said = f"{item.error.code}: {item.error.message}" if isinstance(item, BatchItemFailed) else f"id: {item.id}"
            out.text(f"  items[{item.index}] {item.status}   {said}")
        if r.next:
            out.text(r.next)
        return
    out.text(f"{r.status_text or r.status}")
    out.text(f"  id: {r.id}   entity: {r.entity_slug}   valid_until: {r.valid_until}")


def _render_recall(r: RecallResult, out: Output) -> None:
    out.text(f"{len(r.facts)} fact(s)")
    for f in r.facts:
        where = " · ".join(str(x) for x in (f.entity_slug, f.provenance) if x)
        out.text(f"  #{f.id} [{f.kind}] {f.fact}")
        out.text(f"      {where}  (fact_id {f.fact_id})")
    out.text(f"{len(r.results)} search result(s)")
    for hit in r.results:
        out.text(f"  {hit.slug} — {hit.title} [{hit.evidence}, {hit.create_safety}]")
        chunk = " ".join(hit.chunk.split())
        out.text(f"      {chunk[:200]}{'…' if len(chunk) > 200 else ''}")
    for line in (_budget_line(r), _packing_line(r), r.search_degraded and f"search degraded: {r.search_degraded}"):
        if line:
            out.text(line)


def _packing_line(r: RecallResult) -> str | None:
    p = r.budget_packing
    if p is None:  # no --budget-policy given
        return None
    how = "applied" if p.applied else "not applied"
    kept = f"facts kept {p.facts.kept}/{p.facts.candidates}, results kept {p.results.kept}/{p.results.candidates}"
    return f"packing: {p.policy} ({how}: {p.reason}); {kept}"


def _render_entity(answer: EntityAnswer, out: Output) -> None:
    from fleetmem.memory.verbs.entity import EntityResult

    r = answer.root
    if not isinstance(r, EntityResult):  # a batch (`names`): one line per name
        out.text(f"{r.found} found, {r.missing} missing")
        for row in r.results:
            if row.found:
                out.text(f"  {row.name}: {row.slug} — {row.title} ({row.type})")
                if row.lead:
                    out.text(f"      {row.lead}")
            else:
                maybe = ", ".join(s.slug for s in row.suggestions or [])
                out.text(f"  {row.name}: not found" + (f" (did you mean {maybe})" if maybe else ""))
        return
    if not r.found or r.card is None:
        out.text("No entity matched.")
        for s in r.suggestions:
            out.text(f"  did you mean {s.slug} ({s.title}) [{s.create_safety}]")
        return
    card, ent = r.card, r.card.entity
    out.text(f"{ent.title}  ({ent.slug}, {ent.type})")
    if card.aka:
        out.text(f"  aka: {', '.join(card.aka)}")
    if card.summary:
        out.text(f"  {card.summary}")
    for t in card.open_threads:
        out.text(f"  open: [{t.kind}] {t.text} {t.date or ''}".rstrip())
    for e in card.edges:
        out.text(f"  {'→' if e.direction == 'out' else '←'} {e.type} {e.slug}")
    out.text(f"  facts: {card.active_fact_count}   backlinks: {card.backlink_count}   ({r.latency_ms} ms)")
    for g in card.referenced_by or []:
        out.text(f"  referenced by {g.total} {g.canonical_type}: {', '.join(row.slug for row in g.rows)}")
    for s in r.suggestions:
        out.text(f"  also: {s.slug} ({s.title})")


def _render_pack(r: ContextPackResult | DeltaResult, out: Output) -> None:
    """context_pack and delta: the ready-to-inject text on stdout, the bookkeeping on stderr."""
    out.text(r.text)
    from fleetmem.memory.verbs.delta import DeltaResult

    extra = [_budget_line(r)]
    if isinstance(r, DeltaResult):
        extra.append(f"has_more: {r.has_more}   next_cursor: {json.dumps(r.next_cursor.model_dump())}")
    if r.degraded_reason:
        extra.append(f"degraded: {r.degraded_reason}")
    for line in extra:
        if line:
            Output.err(line)


def _render_forget(r: ForgetResult, out: Output) -> None:
    verb = "Expired" if r.expired else "Already expired (nothing changed):"
    out.text(f"{verb} {r.id}" + (f" — {r.reason}" if r.reason else ""))


def _render_page(r: GetPageResult, out: Output) -> None:
    # The page itself (frontmatter + body): `fleetmem get-page X > x.md` round-trips via put-page.
    out.text(r.content.rstrip("\n"))


def _render_synthesize(r: SynthesizeResult, out: Output) -> None:
    out.text(r.answer)
    out.text(yaml_text(r.model_dump(exclude={"answer", "protocol_version"}, exclude_unset=True)))


_RENDERERS: dict[str, Callable[[Any, Output], None]] = {
    "remember": _render_remember,
    "recall": _render_recall,
    "entity": _render_entity,
    "context_pack": _render_pack,
    "delta": _render_pack,
    "forget": _render_forget,
    "get_page": _render_page,
    "synthesize": _render_synthesize,
}


def render_body(tool: str, body: dict[str, Any], out: Output) -> None:
    """A success for humans, read through the tool's result model (the one statement of its shape);
    tools without a dedicated view, and any body that strays from its model, print as YAML."""
    from pydantic import ValidationError

    from fleetmem.memory.verbs import REGISTRY

    spec = REGISTRY.get(tool)
    renderer = _RENDERERS.get(tool)
    if spec is not None and renderer is not None:
        try:
            renderer(spec.validate_result(body), out)
            return
        except ValidationError:
            pass
    out.text(yaml_text({k: v for k, v in body.items() if k != "protocol_version"}))
