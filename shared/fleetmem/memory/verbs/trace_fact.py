"""trace_fact (admin) — a fact's audit trail plus its supersession lineage.

Public API: `TraceFactParams`, `TraceFactResult`, `run(deps, caller, params, ctx) -> Outcome`.

The lineage walks `supersedes` back to the oldest ancestor and `superseded_by` forward to the
newest fact (bounded), and lists every audit event of every fact in it, oldest first:
`{fact_id, action, actor, at, reason, provenance}`. Unknown or foreign ids -> `not_found`.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import ConfigDict, Field

from fleetmem.errors import Outcome
from fleetmem.memory.common import shown_to
from fleetmem.memory.params import Params
from fleetmem.memory.redaction import redact_opt, shown_facts
from fleetmem.memory.registry import read_tool
from fleetmem.memory.verbs.forget import not_found
from fleetmem.memory.verbs.recall import fact_model
from fleetmem.models import Caller, Fact, FactItem, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION
from fleetmem.timefmt import iso

TOOL = "trace_fact"
MAX_LINEAGE = 50


class TraceFactParams(Params):
    model_config = ConfigDict(extra="ignore", json_schema_extra={"required": ["id"]})

    id: str = Field(
        "", description='The fact\'s opaque string id (remember `id` / recall `fact_id`), e.g. "f_01JD...".'
    )


class TraceEvent(Wire):
    fact_id: str
    action: str
    actor: str
    at: str
    reason: str | None
    provenance: str | None


class LineageFact(FactItem):
    """A recall fact item with its full expiry state."""

    expired_at: str | None
    expired_reason: str | None
    expired_by: str | None
    supersedes: str | None
    superseded_by: str | None


class TraceFactResult(Wire):
    id: str
    fact: LineageFact
    lineage: list[LineageFact] = Field(description="Facts oldest -> newest, with expiry state.")
    events: list[TraceEvent]
    protocol_version: int


def _lineage(deps: Deps, tenant: str, fact: Fact) -> list[Fact]:
    seen = {fact.fact_id}
    back = _follow(deps, tenant, fact, lambda f: f.supersedes, seen)
    forward = _follow(deps, tenant, fact, lambda f: f.superseded_by, seen)
    return [*reversed(back), fact, *forward]


def _follow(deps: Deps, tenant: str, fact: Fact, link: Callable[[Fact], str | None], seen: set[str]) -> list[Fact]:
    """The facts `link` leads to from `fact`, one after another: at most MAX_LINEAGE, up to a
    missing one or one already `seen` (which gains each fact taken)."""
    out: list[Fact] = []
    cur = fact
    while (next_id := link(cur)) and len(out) < MAX_LINEAGE:
        nxt = deps.facts.get(tenant, next_id)
        if nxt is None or nxt.fact_id in seen:
            break
        seen.add(nxt.fact_id)
        out.append(nxt)
        cur = nxt
    return out


def _lineage_item(f: Fact) -> LineageFact:
    return LineageFact(
        **fact_model(f).wire(),
        expired_at=iso(f.expired_at),
        expired_reason=f.expired_reason,
        expired_by=f.expired_by,
        supersedes=f.supersedes,
        superseded_by=f.superseded_by,
    )


def run(deps: Deps, caller: Caller, params: TraceFactParams, ctx: CallContext) -> Outcome:
    fact_id = (params.id or "").strip()
    fact = shown_to(caller, deps.facts.get(caller.tenant, fact_id)) if fact_id else None
    if fact is None:
        raise not_found(TOOL, fact_id)
    # a remote caller's lineage leaves out the private facts in it, as every other read does
    chain = [f for f in _lineage(deps, caller.tenant, fact) if shown_to(caller, f) is not None]
    events = [
        TraceEvent(
            fact_id=f.fact_id,
            action=e.action,
            actor=e.actor,
            at=iso(e.at),
            reason=e.reason,
            provenance=redact_opt(e.provenance) if caller.remote else e.provenance,
        )
        for f in chain
        for e in deps.audit.for_subject(caller.tenant, f.fact_id)
    ]
    # Same-instant events (a supersession happens in the new fact's write) list the write first.
    events.sort(key=lambda e: (e.at or "", e.action != "write"))
    # D25: a remote caller reads the facts' text and provenance redacted
    (fact,), chain = shown_facts(caller, [fact]), shown_facts(caller, chain)
    result = TraceFactResult(
        id=fact.fact_id,
        fact=_lineage_item(fact),
        lineage=[_lineage_item(f) for f in chain],
        events=events,
        protocol_version=PROTOCOL_VERSION,
    )
    return Outcome(result.wire())


DESCRIPTION = (
    "Admin: show a fact's audit trail (writes, supersessions, expiries with who/when/why) and its "
    'supersession lineage, e.g. trace_fact(id="f_01JD..."). Read-only.'
)

SPEC = read_tool(TOOL, DESCRIPTION, TraceFactParams, TraceFactResult, run, scope="admin")
