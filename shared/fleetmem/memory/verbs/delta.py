"""`delta(since?, session_id?, since_slug?, entities?, budget_tokens?, include_private?)` — what changed
since a cursor, for heartbeats (docs/protocol.md: delta; D10, D14). At-least-once, never silent loss.

Public API: `DeltaParams`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC` (registered),
`cursor_client(caller) -> str`.

Rules:
- Input: `since` (ISO 8601, must parse; echoed normalized `…T…:…:….000Z`) and/or `session_id`
  (clipped to 200 chars); neither -> invalid_params. `since_slug` (with `since`) resumes a keyset
  position statelessly. An explicit `since` wins over the session's cursor.
- Session cursors are keyed (tenant, cursor_client(caller), session_id): a trusted-local caller
  uses its client id (the CLI's is "local"); a remote caller uses its authenticated client id, or
  the shared "remote" namespace when it has none — and never "local", which is reserved for the
  trusted lane. First wake (or a wake after 7 idle days): the cursor is created at now and the
  delta is empty (`since` = now, `has_more: false`).
- Pages: keyset (updated_at, slug) strictly after the effective cursor, ascending, 50 per call
  (51 fetched to detect overflow). Facts: created strictly after the effective `since`, newest
  first, at most 50. Threads: open-thread events (commitments, timeline entries) dated after the
  effective `since` for up to 8 `entities` (comma-separated, like context_pack).
- Budget: pages first (cost of `title + " " + slug`), then facts (cost of text); a prefix walk.
  `has_more` = page or fact fetch overflow, or anything dropped by the budget or the deadline.
- `next_cursor` = the last DELIVERED page's (updated_at, slug); none delivered -> the effective
  since/slug.
- Session advance (conditional write on the cursor version; on a lost race re-read and retry once;
  never backwards). Pages carry the cursor: pages delivered -> to the last delivered page; no page
  delivered and nothing held back -> now − 2 s (covers in-flight writes); no page delivered but
  something held back by the budget, the deadline or the page fetch limit -> no move and a
  `delta_incomplete` notice (kind degraded) whose fix says wait and retry the same call; from the
  3rd consecutive incomplete wake of a session the fix carries no call (`next: report`).
  Stateless callers always get the wait fix. Facts are listed newest first (the frozen order), so
  more than 50 new facts between two wakes sets has_more but the older surplus is not re-offered
  by the cursor; `recall(since=…)` reads them.
- Visibility: world-only unless trusted-local AND include_private (as context_pack).
- D10: past `ctx.deadline_at` the remaining arms are skipped, `degraded_reason` says so, the
  skipped arms count as dropped (has_more) and the session cursor does not move (no silent loss).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from fleetmem.errors import Conflict, Fix, Notice, Outcome, Unavailable, VerbError
from fleetmem.memory import budget, common
from fleetmem.memory.cards import fact_view, open_threads
from fleetmem.memory.common import Budget, Params, SinceText
from fleetmem.memory.entities import parse_entity_list, resolve_entity
from fleetmem.memory.registry import ToolSpec, register
from fleetmem.memory.render import render_delta
from fleetmem.models import BudgetFields, Caller, Cursor, PackFact, PageItem, SlugThread
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import (
    DELTA_FACT_LIMIT,
    DELTA_MAX_THREAD_ENTITIES,
    DELTA_PAGE_LIMIT,
    LOCAL_CLIENT,
    PROTOCOL_VERSION,
    REMOTE_CLIENT,
    SESSION_ID_MAX,
)
from fleetmem.timefmt import iso, to_ms

TOOL = "delta"
IN_FLIGHT_MARGIN = timedelta(seconds=2)
RETRY_AFTER_SECONDS = 30
INCOMPLETE_REPORT_STREAK = 3


class DeltaParams(Params):
    model_config = ConfigDict(extra="ignore")

    since: SinceText = Field(
        default=None,
        description="ISO 8601 date/datetime: changes strictly after it. Wins over the session cursor.",
    )
    since_slug: str | None = Field(
        default=None,
        description="With since: resume after this slug (pass back next_cursor.since + next_cursor.slug).",
    )
    session_id: str | None = Field(
        default=None,
        description="A stable id for this heartbeat loop: the server keeps and advances its cursor.",
    )
    entities: str | None = Field(
        default=None,
        description="Comma-separated entity names/slugs (up to 8) whose open-thread events to include.",
    )
    budget_tokens: Budget = Field(
        default=None, description="Token budget (integer >= 1): pages pack first, then facts."
    )
    include_private: bool = Field(
        default=False, description="Trusted local callers only: include private pages and facts."
    )


class DeltaPage(PageItem):
    truncated: bool | None = None  # D14: the first pending item alone exceeded the budget


class DeltaFact(PackFact):
    truncated: bool | None = None


class NextCursor(BaseModel):
    """Where to resume statelessly: `since` + `slug` of the last delivered page (extra cursor keys
    such as the facts' own position may ride along)."""

    model_config = ConfigDict(extra="allow")

    since: str | None
    slug: str


class DeltaResult(BudgetFields):
    protocol_version: int
    since: str | None
    pages: list[DeltaPage]
    facts: list[DeltaFact]
    threads: list[SlugThread]
    text: str
    has_more: bool
    next_cursor: NextCursor
    degraded_reason: str | None = None


def cursor_client(caller: Caller) -> str:
    if not caller.remote:
        return caller.client_id or LOCAL_CLIENT
    if not caller.client_id or caller.client_id == LOCAL_CLIENT:
        return REMOTE_CLIENT
    return caller.client_id


def _deadline_passed(ctx: CallContext) -> bool:
    return ctx.deadline_at is not None and time.monotonic() >= ctx.deadline_at


def _session_unavailable(exc: Unavailable) -> VerbError:
    why = "The session cursor store could not be read, so delta cannot tell what you already received."
    return VerbError(
        "unavailable",
        "The delta session state is unavailable right now.",
        "Problem: delta could not read the session cursor. Cause: the cursor store is throttled or "
        "down. Fix: wait and retry the same call; nothing was delivered or advanced.",
        why=why,
        detail={"reason": "session_state"},
        fix=Fix(
            why=why, actor="provider", retry_after_seconds=exc.retry_after_seconds or RETRY_AFTER_SECONDS
        ),
        klass="unavailable",
        retryable=True,
    )


def _missing_input_error(params: DeltaParams, now: datetime) -> VerbError:
    return common.invalid(
        TOOL, params, "delta needs `since` or `session_id`.",
        problem="delta was called with neither since nor session_id, so it has no starting point.",
        cause="delta reports what changed after a point in time: an explicit ISO 8601 `since`, or the "
        "cursor the server keeps for a `session_id` (pass a stable session_id on every heartbeat).",
        field="since", value=iso(now - timedelta(days=1)),
        why="Without since or session_id delta has no starting point; the fix asks for the last 24 hours.",
    )


def _store_cursor(
    deps: Deps, caller: Caller, client: str, session_id: str, now: datetime, current: Cursor | None,
    target: tuple[datetime, str] | None, *, incomplete: bool, hold: tuple[datetime, str] | None = None,
) -> Cursor | None:
    """Conditionally write the advanced cursor; on a lost race re-read and retry once.

    `target` None means "do not move" (a missing cursor is then created at `hold`, the position
    this wake read from). The position never moves backwards. Returns the stored cursor, or None
    when both attempts lost the race (delivery stays at-least-once: the cursor simply did not move).
    """
    for attempt in range(2):
        if current is None:
            since, slug = target or hold or (now, "")
            streak = 1 if incomplete else 0
            new = Cursor(
                tenant=caller.tenant, client_id=client, session_id=session_id, since=to_ms(since), slug=slug,
                touched_at=now, incomplete_streak=streak,
            )
            expected = None
        else:
            since, slug = current.since, current.slug
            if target is not None and (to_ms(target[0]), target[1]) > (current.since, current.slug):
                since, slug = to_ms(target[0]), target[1]
            streak = current.incomplete_streak + 1 if incomplete else 0
            new = current.model_copy(
                update={"since": since, "slug": slug, "touched_at": now, "incomplete_streak": streak}
            )
            expected = current.version
        try:
            return deps.cursors.put(new, expected_version=expected)
        except Conflict:
            if attempt:
                return None
            current = deps.cursors.get(caller.tenant, client, session_id, now=now)
    return None


def _empty_body(since: datetime, slug: str, budget_tokens: int | None) -> dict:
    body: dict = {
        "protocol_version": PROTOCOL_VERSION,
        "since": iso(since),
        "pages": [],
        "facts": [],
        "threads": [],
        "text": render_delta(iso(since) or "", [], [], [], has_more=False),
        "has_more": False,
        "next_cursor": {"since": iso(since), "slug": slug},
    }
    body.update(budget.Packer(budget_tokens).fields())
    return body


def _incomplete_notice(params: DeltaParams, streak: int | None) -> Notice:
    args = common.given_args(params)
    if streak is not None and streak >= INCOMPLETE_REPORT_STREAK:
        why = (
            f"delta delivered nothing on {streak} consecutive wakes of this session although changes are "
            "waiting: the budget is too small for the oldest pending page or fact. Tell the user; the "
            "session cursor stays where it is until a wake can deliver."
        )
        return Notice(
            code="delta_incomplete", kind="degraded", why=why, fix=Fix(why=why, actor="provider"),
            user_message="Memory updates are stuck: the heartbeat budget is too small for pending changes.",
        )
    why = (
        "delta dropped pending changes for the budget and delivered none, so the cursor did not move. "
        f"Retry the same call in {RETRY_AFTER_SECONDS} seconds (or with a larger budget_tokens); "
        "nothing is lost."
    )
    return Notice(
        code="delta_incomplete", kind="degraded", why=why,
        fix=Fix(why=why, actor="provider", retry_after_seconds=RETRY_AFTER_SECONDS,
                mcp={"tool": TOOL, "arguments": args}),
    )


def run(deps: Deps, caller: Caller, params: DeltaParams, ctx: CallContext) -> Outcome:
    now = deps.clock.now()
    explicit_since = common.parse_since(TOOL, params, "since", now)
    session_id = (params.session_id or "").strip()[:SESSION_ID_MAX] or None
    if explicit_since is None and session_id is None:
        raise _missing_input_error(params, now)
    budget_tokens = common.check_budget(TOOL, params)
    world_only = common.world_only(caller, params.include_private)
    client = cursor_client(caller)

    cursor: Cursor | None = None
    if session_id is not None:
        try:
            cursor = deps.cursors.get(caller.tenant, client, session_id, now=now)
            if cursor is None and explicit_since is None:
                # First wake (or the old cursor idled out): establish at now, deliver nothing. A
                # concurrent first wake that won the race set the same position.
                _store_cursor(deps, caller, client, session_id, now, None, (now, ""), incomplete=False)
                return Outcome(body=_empty_body(now, "", budget_tokens))
        except Unavailable as exc:
            raise _session_unavailable(exc) from None

    if explicit_since is not None:
        eff_since = explicit_since
        eff_slug = (params.since_slug or "").strip()
    else:
        assert cursor is not None
        eff_since, eff_slug = cursor.since, cursor.slug

    degraded: list[str] = []
    skipped_arms = _deadline_passed(ctx)
    if skipped_arms:
        degraded.append("server deadline reached before the facts arm; facts and threads skipped")
    # Pages and facts are independent reads: one concurrent round on network backends.
    fetched, rows = deps.gather(
        lambda: deps.pages.updated_since(
            caller.tenant, since=eff_since, slug=eff_slug, world_only=world_only, limit=DELTA_PAGE_LIMIT + 1
        ),
        (lambda: []) if skipped_arms else lambda: deps.facts.recent(
            caller.tenant, now=now, after=eff_since, world_only=world_only, limit=DELTA_FACT_LIMIT + 1
        ),
    )
    page_overflow = len(fetched) > DELTA_PAGE_LIMIT
    pages = [
        {"slug": h.slug, "title": h.title, "type": h.type, "updated_at": iso(h.updated_at)}
        for h in fetched[:DELTA_PAGE_LIMIT]
    ]
    page_times = {h.slug: h.updated_at for h in fetched}
    fact_overflow = len(rows) > DELTA_FACT_LIMIT
    facts: list[dict] = [fact_view(f) for f in rows[:DELTA_FACT_LIMIT]]

    threads: list[dict] = []
    names = parse_entity_list(params.entities, DELTA_MAX_THREAD_ENTITIES)
    seen: set[str] = set()
    for i, name in enumerate(names):
        if skipped_arms:
            break
        if _deadline_passed(ctx):
            degraded.append(f"server deadline reached after {i} of {len(names)} thread entities")
            skipped_arms = True
            break
        best = resolve_entity(deps, caller.tenant, name, world_only=world_only).best
        if best is None or best.head.slug in seen:
            continue
        seen.add(best.head.slug)
        page = deps.pages.get(caller.tenant, best.head.slug)
        if page is None or (world_only and page.visibility != "world"):
            continue
        events = open_threads(deps, caller.tenant, page, world_only=world_only, now=now, since=eff_since)
        threads += [{"slug": page.slug, **thread} for thread in events]

    packer = budget.Packer(budget_tokens)
    packed_pages = packer.take(pages, lambda p: budget.cost(f"{p['title']} {p['slug']}"))
    packed_facts = packer.take(facts, lambda f: budget.cost(f["text"]))
    dropped = packer.dropped > 0 or skipped_arms
    has_more = page_overflow or fact_overflow or dropped

    if packed_pages:
        last = packed_pages[-1]
        next_since, next_slug = page_times[last["slug"]], last["slug"]
    else:
        next_since, next_slug = eff_since, eff_slug

    notices: list[Notice] = []
    # Pages carry the cursor. With no page delivered, anything held back by the budget, the deadline
    # or the page fetch limit keeps the cursor in place (it would be skipped otherwise).
    incomplete = not packed_pages and (dropped or page_overflow)
    if session_id is not None:
        if skipped_arms:
            # The deadline cut the facts/threads arms: moving past delivered pages would skip them.
            target: tuple[datetime, str] | None = None
        elif packed_pages:
            target = (next_since, next_slug)
        elif not incomplete:
            target = (now - IN_FLIGHT_MARGIN, "")
        else:
            target = None
        try:
            stored = _store_cursor(
                deps, caller, client, session_id, now, cursor, target, incomplete=incomplete,
                hold=(eff_since, eff_slug),
            )
        except Unavailable as exc:
            raise _session_unavailable(exc) from None
        if incomplete:
            notices.append(_incomplete_notice(params, stored.incomplete_streak if stored else None))
    elif incomplete:
        notices.append(_incomplete_notice(params, None))

    body: dict = {
        "protocol_version": PROTOCOL_VERSION,
        "since": iso(eff_since),
        "pages": packed_pages,
        "facts": packed_facts,
        "threads": threads,
        "text": render_delta(iso(eff_since) or "", packed_pages, packed_facts, threads, has_more=has_more),
        "has_more": has_more,
        "next_cursor": {"since": iso(next_since), "slug": next_slug},
    }
    if degraded:
        body["degraded_reason"] = "; ".join(degraded)
    body.update(packer.fields())
    return Outcome(body=body, notices=notices)


SPEC = register(
    ToolSpec(
        name=TOOL,
        description=(
            "MEMORY VERB (v1): delta(session_id | since, budget_tokens?) returns what changed since your "
            "last wake: pages updated (oldest first), facts recorded, and open-thread events for `entities`, "
            "plus a ready-to-inject `text`. Call it on every HEARTBEAT / periodic wake with a stable "
            "session_id — the server keeps your cursor, delivery is at-least-once, and has_more=true means "
            "call again. The first wake of a session only sets the cursor (empty delta). Stateless: pass "
            "since (+ since_slug from next_cursor). Example: {\"session_id\": \"ops-bot-heartbeat\", "
            "\"budget_tokens\": 1500}. Zero LLM, sub-second."
        ),
        params=DeltaParams,
        result=DeltaResult,
        run=run,
        scope="read",
        surface="verbs",
        writes=False,
        annotations={"readOnlyHint": True},
    )
)
