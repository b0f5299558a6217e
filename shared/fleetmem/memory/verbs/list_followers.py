"""`list_followers(limit?)` — this tenant's live delta sessions and what they have not received yet
(full surface, read, read-only).

Public API: `ListFollowersParams`, `ListFollowersResult`, `Follower`, `PENDING_CAP`, `run`, `SPEC`.

One row per live session cursor (woken within SESSION_IDLE_DAYS), most recently woken first, at
most `limit` (default 100, 1..200): `{client_id, session_id, since, position (slug or ""),
last_wake (touched_at), expires_at (touched_at + SESSION_IDLE_DAYS), pending_pages, pending_facts,
pending_capped}`. Pending counts are the changes after the cursor's position that its next wake
would deliver — pages changed or deleted after its page position, facts written or retracted after
its fact position and TTL expiries after its expiry position — read with the same change listings
delta reads, each counted up to `PENDING_CAP` (`pending_capped` true when a count stopped there).
Sessions that share a position share the reads. Remote callers count world pages and facts only.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from pydantic import Field

from fleetmem.errors import Outcome
from fleetmem.memory.delta_positions import expiry_key, fact_tie, merge_changes
from fleetmem.memory.params import Limit, Params
from fleetmem.memory.registry import read_tool
from fleetmem.models import Caller, Cursor, Wire
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION, SESSION_IDLE_DAYS
from fleetmem.timefmt import iso

TOOL = "list_followers"
DEFAULT_LIMIT = 100
MAX_LIMIT = 200
#: Pending changes counted per arm and session; past it a count reads "at least".
PENDING_CAP = 1000
_IDLE = timedelta(days=SESSION_IDLE_DAYS)


class ListFollowersParams(Params):
    limit: Limit(DEFAULT_LIMIT, MAX_LIMIT) = Field(  # type: ignore[valid-type]
        default=None, description=f"Sessions to list (default {DEFAULT_LIMIT}, 1 to {MAX_LIMIT})."
    )


class Follower(Wire):
    client_id: str
    session_id: str
    since: str
    position: str
    last_wake: str
    expires_at: str
    pending_pages: int
    pending_facts: int
    pending_capped: bool


class ListFollowersResult(Wire):
    followers: list[Follower]
    protocol_version: int


#: (page position, fact position, expiry position) of a cursor: where its next wake reads from.
Position = tuple[int, int, str | None, datetime]


def _position(deps: Deps, tenant: str, c: Cursor) -> tuple[Callable[[], int], Callable[[], int]]:
    """The cursor's change positions, derived from since/slug where it has none (as delta does)."""
    page_seq, fact_seq = c.page_seq, c.fact_seq
    page = (
        (lambda: page_seq)
        if page_seq is not None
        else (lambda: deps.page_feed.change_floor(tenant, since=c.since, slug=c.slug))
    )
    fact = (
        (lambda: fact_seq)
        if fact_seq is not None
        else (lambda: deps.fact_feed.change_floor(tenant, after=c.since, after_seq=fact_tie(c.slug)))
    )
    return page, fact


def _reads(deps: Deps, tenant: str, position: Position, *, now: datetime, world_only: bool) -> list[Callable[[], Any]]:
    """The four change listings a wake from `position` reads, each asked for PENDING_CAP + 1."""
    page_pos, fact_pos, expiry, since = position
    expiry_at, expiry_seq = (since, None) if expiry is None else expiry_key(expiry, raw=True)
    top = PENDING_CAP + 1
    return [
        lambda: deps.page_feed.changed_after(tenant, seq=page_pos, world_only=world_only, limit=top, now=now),
        lambda: deps.page_feed.deleted_after(tenant, seq=page_pos, world_only=world_only, limit=top),
        lambda: deps.fact_feed.changed_after(
            tenant, seq=fact_pos, now=now, world_only=world_only, limit=top, retracted=True
        ),
        lambda: deps.fact_feed.expired_between(
            tenant, after=expiry_at, after_seq=expiry_seq, until=now, world_only=world_only, limit=top
        ),
    ]


def _counts(pages: list[Any], tombs: list[Any], facts: list[Any], expiring: list[Any]) -> tuple[int, int, bool]:
    """(pending pages, pending facts, capped) from the four listings."""
    page_changes, page_over = merge_changes(pages, tombs, PENDING_CAP)
    fact_count = len(facts) + len(expiring)
    return len(page_changes), min(fact_count, PENDING_CAP), page_over or fact_count > PENDING_CAP


def run(deps: Deps, caller: Caller, params: ListFollowersParams, ctx: CallContext) -> Outcome:
    now = deps.clock.now()
    tenant = caller.tenant
    world_only = caller.remote
    cursors = deps.cursors.for_tenant(tenant, now=now, limit=params.limit or DEFAULT_LIMIT)
    seqs = deps.gather(*[f for c in cursors for f in _position(deps, tenant, c)])
    positions: list[Position] = [(seqs[2 * i], seqs[2 * i + 1], c.expiry, c.since) for i, c in enumerate(cursors)]
    distinct = list(dict.fromkeys(positions))
    # every listing of every distinct position in one concurrent round on network backends
    listed = deps.gather(*[read for p in distinct for read in _reads(deps, tenant, p, now=now, world_only=world_only)])
    pending = {p: _counts(*listed[4 * i : 4 * i + 4]) for i, p in enumerate(distinct)}
    rows = []
    for c, p in zip(cursors, positions, strict=True):
        pages, facts, capped = pending[p]
        rows.append(
            {
                "client_id": c.client_id,
                "session_id": c.session_id,
                "since": iso(c.since),
                "position": c.slug,
                "last_wake": iso(c.touched_at),
                "expires_at": iso(c.touched_at + _IDLE),
                "pending_pages": pages,
                "pending_facts": facts,
                "pending_capped": capped,
            }
        )
    body = ListFollowersResult.model_validate({"followers": rows, "protocol_version": PROTOCOL_VERSION})
    return Outcome(body=body.model_dump())


DESCRIPTION = (
    "List this brain's live delta sessions (heartbeats, followers), most recently woken first: client, "
    "session, position, last wake, when it expires, and how many page and fact changes its next wake "
    f'would deliver (counted up to {PENDING_CAP}). Example: {{"limit": 50}}.'
)

SPEC = read_tool(TOOL, DESCRIPTION, ListFollowersParams, ListFollowersResult, run)
