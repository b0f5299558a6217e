"""`memory_stats()` — the size and health of the memory at a glance (full surface, read).

Public API: `MemoryStatsParams`, `MemoryStatsResult`, `search_health(deps) -> str | None`,
`run(deps, caller, params, ctx) -> Outcome`, `SPEC` (registered).

Response `{facts{active, superseded, forgotten, expired}, pages, entities, writes_per_day[{date,
facts, pages}], busiest_entities[{entity_slug, facts}], delta_sessions, search{degraded, reason},
protocol_version}`: facts by `status` now; `entities` the distinct entities with an active fact;
`writes_per_day` the last WINDOW_DAYS UTC days, oldest first, every day listed (facts by the day
they were saved, pages by the day of their last write); `busiest_entities` the TOP entities by
active facts (most first, then by slug); `delta_sessions` the tenant's live delta cursors;
`search.reason` why search runs degraded (no embedding model: keyword-only; the search index failing
fast), null while it is healthy. Remote callers count world facts and pages only.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fleetmem.errors import Outcome
from fleetmem.memory.params import Params
from fleetmem.memory.registry import read_tool
from fleetmem.models import Caller, Wire
from fleetmem.ports import CallContext, Deps, FactTallies, PageTallies, SearchHealth
from fleetmem.protocol import PROTOCOL_VERSION

TOOL = "memory_stats"
WINDOW_DAYS = 30
TOP = 10


class MemoryStatsParams(Params):
    pass


class FactCounts(Wire):
    active: int
    superseded: int
    forgotten: int
    expired: int


class DayWrites(Wire):
    date: str
    facts: int
    pages: int


class BusyEntity(Wire):
    entity_slug: str
    facts: int


class SearchState(Wire):
    degraded: bool
    reason: str | None


class MemoryStatsResult(Wire):
    facts: FactCounts
    pages: int
    entities: int
    writes_per_day: list[DayWrites]
    busiest_entities: list[BusyEntity]
    delta_sessions: int
    search: SearchState
    protocol_version: int


def search_health(deps: Deps) -> str | None:
    """Why searches run degraded now, or None: the index failing fast (its breaker is open) and a
    missing embedding model (keyword-only search), the reasons joined."""
    reasons = []
    if isinstance(deps.search, SearchHealth) and (problem := deps.search.health_problem()):
        reasons.append(problem)
    if deps.embedder is None:
        reasons.append(
            deps.diagnostics.embedder_problem or "no embedding model is configured, so search is keyword-only"
        )
    return "; ".join(reasons) or None


def run(deps: Deps, caller: Caller, params: MemoryStatsParams, ctx: CallContext) -> Outcome:
    now = deps.clock.now()
    first = now.astimezone(UTC).date() - timedelta(days=WINDOW_DAYS - 1)
    since = datetime(first.year, first.month, first.day, tzinfo=UTC)
    world = caller.remote
    tallies: list[Any] = deps.gather(
        lambda: deps.fact_listing.tallies(caller.tenant, now=now, world_only=world, since=since, top=TOP),
        lambda: deps.page_listing.tallies(caller.tenant, world_only=world, since=since),
        lambda: deps.cursors.count_live(caller.tenant, now=now),
    )
    facts: FactTallies = tallies[0]
    pages: PageTallies = tallies[1]
    sessions = int(tallies[2])
    days = [(first + timedelta(days=i)).isoformat() for i in range(WINDOW_DAYS)]
    reason = search_health(deps)
    result = MemoryStatsResult(
        facts=FactCounts(**{k: facts.status.get(k, 0) for k in ("active", "superseded", "forgotten", "expired")}),
        pages=pages.pages,
        entities=facts.entities,
        writes_per_day=[DayWrites(date=d, facts=facts.per_day.get(d, 0), pages=pages.per_day.get(d, 0)) for d in days],
        busiest_entities=[BusyEntity(entity_slug=s, facts=n) for s, n in facts.busiest],
        delta_sessions=sessions,
        search=SearchState(degraded=reason is not None, reason=reason),
        protocol_version=PROTOCOL_VERSION,
    )
    return Outcome(body=result.model_dump(mode="json"))


DESCRIPTION = (
    "Counts of the memory: facts by state, pages, entities, writes per day (last 30 days), the "
    "busiest entities, live delta sessions, and whether search is degraded. Takes no arguments."
)

SPEC = read_tool(TOOL, DESCRIPTION, MemoryStatsParams, MemoryStatsResult, run)
