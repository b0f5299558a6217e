"""delta's steps (`fleetmem.memory.verbs.delta.run` calls them in order): parse the call, read the
session's cursor (a first wake only sets it), the positions to read from, the changes after them,
what the budgeted text delivers, the session's advance, then the answer (`delta_answer`). A call
from a bare `since` reads one timeline instead (`reference_delta`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from fleetmem.errors import Notice, Outcome, Unavailable
from fleetmem.memory import common
from fleetmem.memory.cards import open_threads
from fleetmem.memory.delta_answer import (
    Answer,
    NextCursor,
    answer,
    empty_body,
    fact_retraction,
    first_wake_notice,
    incomplete_notice,
    missing_input_error,
    page_entry,
    parse_expiry,
)
from fleetmem.memory.delta_budget import DeltaPack, pack_delta
from fleetmem.memory.delta_cursor import CursorTarget, cursor_client, session_unavailable, store_cursor
from fleetmem.memory.delta_positions import expiry_key, fact_tie, merge_changes
from fleetmem.memory.delta_reference import reference_read
from fleetmem.memory.delta_resume import Resume, decode_cursor, next_points, start_points
from fleetmem.memory.entities import parse_entity_list, resolve_entity
from fleetmem.memory.redaction import redact, redact_fact
from fleetmem.memory.verbs.recall import fact_item
from fleetmem.models import Caller, Cursor, Fact, PageHead, PageTombstone
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import DELTA_FACT_LIMIT, DELTA_MAX_THREAD_ENTITIES, DELTA_PAGE_LIMIT, SESSION_ID_MAX
from fleetmem.timefmt import iso

if TYPE_CHECKING:
    from fleetmem.memory.delta_params import DeltaParams

TOOL = "delta"
IN_FLIGHT_MARGIN = timedelta(seconds=2)
DEADLINE_SKIPPED = "server deadline reached before the facts arm; facts and threads skipped"


@dataclass(frozen=True)
class Ask:
    """The call once parsed: who asks, from where (an explicit since, a session), within what budget."""

    params: DeltaParams
    caller: Caller
    now: datetime
    explicit_since: datetime | None
    session_id: str | None
    budget_tokens: int | None
    world_only: bool
    client: str
    resume: Resume | None = None  # D33: a decoded `cursor` (an explicit since replaces it)

    @property
    def tenant(self) -> str:
        return self.caller.tenant

    def item(self, fact: Fact) -> dict[str, Any]:
        """A fact item as this caller reads it (D25: redacted for a remote caller)."""
        return fact_item(redact_fact(fact) if self.caller.remote else fact)


def parse(deps: Deps, caller: Caller, params: DeltaParams) -> Ask:
    now = deps.clock.now()
    resume = decode_cursor(params, now)
    explicit_since = common.parse_since(TOOL, params, "since", now)
    if explicit_since is not None:
        resume = None
    elif resume is not None:
        explicit_since = resume.since
    session_id = (params.session_id or "").strip()[:SESSION_ID_MAX] or None
    if explicit_since is None and session_id is None:
        raise missing_input_error(params, now)
    budget_tokens = common.check_budget(TOOL, params)
    world_only = common.world_only(caller, params.include_private)
    return Ask(
        params, caller, now, explicit_since, session_id, budget_tokens, world_only, cursor_client(caller), resume
    )


def read_session(deps: Deps, ask: Ask) -> tuple[Cursor | None, Outcome | None]:
    """The session's cursor (None without a session_id), or the answer of a first wake: a session
    without a cursor (or whose cursor idled out) is established at now and at the current change
    counters, and delivers nothing. A concurrent first wake sets the same position."""
    tenant, client, session_id, now, caller = ask.tenant, ask.client, ask.session_id, ask.now, ask.caller
    if session_id is None:
        return None, None
    try:
        if ask.explicit_since is not None:
            return deps.cursors.get(tenant, client, session_id, now=now), None
        # The change counters are read with the cursor (one round on network backends):
        # a first wake needs them, and everything committed before it lies behind them.
        cursor, top_page, top_fact = deps.gather(
            lambda: deps.cursors.get(tenant, client, session_id, now=now),
            lambda: deps.page_feed.change_floor(tenant, since=None),
            lambda: deps.fact_feed.change_floor(tenant, after=None),
        )
        if cursor is not None:
            return cursor, None
        seqs = (top_page, top_fact)
        store_cursor(
            deps,
            caller,
            client,
            session_id,
            now,
            None,
            CursorTarget(),
            incomplete=False,
            hold=(now, ""),
            hold_seqs=seqs,
            hold_expiry=iso(now),
        )
        body = empty_body(now, "", seqs, ask.budget_tokens)
        return None, Outcome(body=body, notices=[first_wake_notice(ask.params, now)])
    except Unavailable as exc:
        raise session_unavailable(exc) from None


@dataclass(frozen=True)
class Start:
    """Where the call reads from: the keyset position (since, slug), the change positions when
    known, the TTL-expiry position (None: from since). An explicit `since` wins over the session."""

    since: datetime
    slug: str
    page_pos: int | None
    fact_pos: int | None
    expiry_pos: str | None


def start_from(ask: Ask, cursor: Cursor | None) -> Start:
    params, resume = ask.params, ask.resume
    if resume is not None:
        return Start(resume.since, resume.slug, resume.page_seq, resume.fact_seq, resume.expiry)
    if ask.explicit_since is not None:
        expiry_pos = parse_expiry(params) if params.since_expiry else None
        return Start(
            ask.explicit_since,
            (params.since_slug or "").strip(),
            params.since_page_seq,
            params.since_fact_seq,
            expiry_pos,
        )
    assert cursor is not None
    return Start(cursor.since, cursor.slug, cursor.page_seq, cursor.fact_seq, cursor.expiry)


@dataclass(frozen=True)
class Positions:
    """The exact positions the arms read after (`Start` with both change positions known)."""

    since: datetime
    slug: str
    page_pos: int
    fact_pos: int
    expiry_pos: str | None


def exact_positions(deps: Deps, ask: Ask, start: Start) -> Positions:
    """A position not known exactly is derived from the timestamp (D14: change_floor); both arms
    in one concurrent round on network backends."""
    tenant, eff_since, eff_slug = ask.tenant, start.since, start.slug
    known_page, known_fact = start.page_pos, start.fact_pos
    page_pos, fact_pos = known_page, known_fact
    if page_pos is None or fact_pos is None:
        page_pos, fact_pos = deps.gather(
            (lambda: known_page)
            if known_page is not None
            else lambda: deps.page_feed.change_floor(tenant, since=eff_since, slug=eff_slug),
            (lambda: known_fact)
            if known_fact is not None
            # inside a millisecond of facts ("#f<seq>"): after that fact
            else lambda: deps.fact_feed.change_floor(tenant, after=eff_since, after_seq=fact_tie(eff_slug)),
        )
    return Positions(eff_since, eff_slug, page_pos, fact_pos, start.expiry_pos)


@dataclass(frozen=True)
class Changes:
    """What the arms read after their positions (each one past its limit to see an overflow), the
    thread events, and what the deadline skipped."""

    heads: list[tuple[int, PageHead | PageTombstone]]
    page_overflow: bool
    facts: list[tuple[int, Fact]]
    fact_overflow: bool
    expired: list[Fact]
    expiry_overflow: bool
    expiry_at: datetime
    expiry_seq: int | None
    threads: list[dict[str, Any]]
    skipped: bool
    degraded: list[str]


def read_changes(deps: Deps, ask: Ask, ctx: CallContext, pos: Positions) -> Changes:
    """Pages and facts are independent reads: one concurrent round on network backends.
    Retractions ride their arm's change numbers: a deleted page leaves a tombstone numbered in
    the page sequence, a forgotten or superseded fact takes the next fact number."""
    tenant, now, world_only = ask.tenant, ask.now, ask.world_only
    page_pos, fact_pos = pos.page_pos, pos.fact_pos
    degraded: list[str] = []
    skipped_arms = _deadline_passed(ctx)
    if skipped_arms:
        degraded.append(DEADLINE_SKIPPED)
    expiry_at, expiry_seq = (pos.since, None) if pos.expiry_pos is None else expiry_key(pos.expiry_pos, raw=True)
    fetched, tombs, rows, expiring = deps.gather(
        lambda: deps.page_feed.changed_after(
            tenant, seq=page_pos, world_only=world_only, limit=DELTA_PAGE_LIMIT + 1, now=now
        ),
        lambda: deps.page_feed.deleted_after(tenant, seq=page_pos, world_only=world_only, limit=DELTA_PAGE_LIMIT + 1),
        (lambda: [])
        if skipped_arms
        else lambda: deps.fact_feed.changed_after(
            tenant, seq=fact_pos, now=now, world_only=world_only, limit=DELTA_FACT_LIMIT + 1, retracted=True
        ),
        # TTL expiries (read-time, D8: no write numbers them) by (valid_until, seq) after their position
        (lambda: [])
        if skipped_arms
        else lambda: deps.fact_feed.expired_between(
            tenant,
            after=expiry_at,
            after_seq=expiry_seq,
            until=now,
            world_only=world_only,
            limit=DELTA_FACT_LIMIT + 1,
        ),
    )
    heads, page_overflow = merge_changes(fetched, tombs, DELTA_PAGE_LIMIT)
    threads, cut = _threads(deps, ask, since=pos.since, ctx=ctx, skipped=skipped_arms)
    if cut:
        degraded.append(cut)
        skipped_arms = True
    return Changes(
        heads=heads,
        page_overflow=page_overflow,
        facts=rows[:DELTA_FACT_LIMIT],
        fact_overflow=len(rows) > DELTA_FACT_LIMIT,
        expired=expiring[:DELTA_FACT_LIMIT],
        expiry_overflow=len(expiring) > DELTA_FACT_LIMIT,
        expiry_at=expiry_at,
        expiry_seq=expiry_seq,
        threads=threads,
        skipped=skipped_arms,
        degraded=degraded,
    )


@dataclass(frozen=True)
class Delivery:
    """What the budgeted text shows, arm by arm (a prefix of each, in the order the positions pass
    them), and the positions that delivery moves to."""

    pack: DeltaPack
    page_arm: list[dict[str, Any]]
    fact_arm: list[dict[str, Any]]
    expiry_arm: list[dict[str, Any]]
    next_page_seq: int
    next_fact_seq: int
    next_expiry: str | None
    delivered_heads: list[PageHead]
    next_since: datetime
    next_slug: str

    @property
    def delivered(self) -> bool:
        return bool(self.page_arm or self.fact_arm or self.expiry_arm)


def deliver(ask: Ask, pos: Positions, changes: Changes) -> Delivery:
    """The budget is spent on the text: the wake delivers the prefix of its pending items (in the
    order the positions pass them) that the text shows, the first cut to fit if need be (D14)."""
    now, heads, kept_facts, expired = ask.now, changes.heads, changes.facts, changes.expired
    pages = [page_entry(h) for _, h in heads]
    facts = [ask.item(f) if f.is_active(now) else fact_retraction(f, now) for _, f in kept_facts]
    expiries = [{"kind": "fact", "id": f.fact_id, "reason": "expired", "at": iso(f.valid_until)} for f in expired]
    overflow = changes.page_overflow or changes.fact_overflow or changes.expiry_overflow or changes.skipped
    pack = pack_delta(
        iso(pos.since) or "", pages + facts + expiries, changes.threads, overflow=overflow, budget=ask.budget_tokens
    )
    page_arm = pack.items[: len(pages)]
    fact_arm = pack.items[len(pages) : len(pages) + len(facts)]
    expiry_arm = pack.items[len(pages) + len(facts) :]
    next_expiry: str | None
    if expiry_arm:
        last_expired = expired[len(expiry_arm) - 1]
        next_expiry = f"{iso(last_expired.valid_until)}#{last_expired.seq}"
    else:
        next_expiry = pos.expiry_pos if pos.expiry_pos is not None else iso(pos.since)
    delivered_heads = [h for _, h in heads[: len(page_arm)] if isinstance(h, PageHead)]
    if delivered_heads:
        next_since, next_slug = delivered_heads[-1].updated_at, delivered_heads[-1].slug
    else:
        next_since, next_slug = pos.since, pos.slug
    return Delivery(
        pack=pack,
        page_arm=page_arm,
        fact_arm=fact_arm,
        expiry_arm=expiry_arm,
        next_page_seq=heads[len(page_arm) - 1][0] if page_arm else pos.page_pos,
        next_fact_seq=kept_facts[len(fact_arm) - 1][0] if fact_arm else pos.fact_pos,
        next_expiry=next_expiry,
        delivered_heads=delivered_heads,
        next_since=next_since,
        next_slug=next_slug,
    )


def advance_session(
    deps: Deps, ask: Ask, pos: Positions, cursor: Cursor | None, changes: Changes, delivery: Delivery
) -> list[Notice]:
    """Each arm carries its own position; with nothing delivered, anything held back (only the
    deadline can hold back everything now) keeps the cursor in place and says so in a notice."""
    params, caller, client, session_id, now = ask.params, ask.caller, ask.client, ask.session_id, ask.now
    incomplete = not delivery.delivered and delivery.pack.has_more
    if session_id is None:
        return [incomplete_notice(params, None, delivery.pack.needed)] if incomplete else []
    target = _target(ask, pos, cursor, changes, delivery, incomplete=incomplete)
    try:
        stored = store_cursor(
            deps,
            caller,
            client,
            session_id,
            now,
            cursor,
            target,
            incomplete=incomplete,
            hold=(pos.since, pos.slug),
            hold_seqs=(pos.page_pos, pos.fact_pos),
            hold_expiry=delivery.next_expiry,
        )
    except Unavailable as exc:
        raise session_unavailable(exc) from None
    if not incomplete:
        return []
    return [incomplete_notice(params, stored.incomplete_streak if stored else None, delivery.pack.needed)]


def _target(
    ask: Ask, pos: Positions, cursor: Cursor | None, changes: Changes, delivery: Delivery, *, incomplete: bool
) -> CursorTarget:
    """Where the session moves: each arm only past what was delivered; to now - 2 s when nothing
    was pending. A one-off read from an explicit since moves an arm only if it read from at or
    before the session's own position (it must not skip what the session has not seen)."""
    d = delivery
    target = CursorTarget(
        page_seq=d.next_page_seq if d.page_arm else None,
        fact_seq=d.next_fact_seq if d.fact_arm else None,
        position=(d.next_since, d.next_slug) if d.delivered_heads else None,
        expiry=d.next_expiry if d.expiry_arm else None,
    )
    if not d.delivered and not incomplete:
        target = CursorTarget(position=(ask.now - IN_FLIGHT_MARGIN, ""))
    if cursor is None or ask.explicit_since is None:
        return target
    read_from = iso(changes.expiry_at) or ""
    if changes.expiry_seq is not None:
        read_from = f"{read_from}#{changes.expiry_seq}"
    return CursorTarget(
        page_seq=target.page_seq if cursor.page_seq is None or pos.page_pos <= cursor.page_seq else None,
        fact_seq=target.fact_seq if cursor.fact_seq is None or pos.fact_pos <= cursor.fact_seq else None,
        position=target.position,
        expiry=target.expiry if cursor.expiry is None or expiry_key(read_from) <= expiry_key(cursor.expiry) else None,
    )


def delivered_answer(ask: Ask, pos: Positions, changes: Changes, delivery: Delivery, notices: list[Notice]) -> Answer:
    """The answer of a wake: what the text shows, and a next_cursor whose keyset position never
    passes a listed item the caller did not get."""
    d, now = delivery, ask.now
    body_since, body_slug = d.next_since, d.next_slug
    held = [(h.updated_at, h.slug) for _, h in changes.heads[len(d.page_arm) :] if isinstance(h, PageHead)] + [
        (f.created_at, "") for _, f in changes.facts[len(d.fact_arm) :] if f.is_active(now)
    ]
    for at, slug in held:
        if (at, slug) <= (body_since, body_slug):
            body_since, body_slug = at - timedelta(milliseconds=1), ""
    resume = NextCursor(
        since=iso(body_since),
        slug=body_slug,
        page_seq=d.next_page_seq,
        fact_seq=d.next_fact_seq,
        expiry=d.next_expiry,
    )
    last = changes.facts[len(d.fact_arm) - 1][1] if d.fact_arm else None
    start = start_points(ask.resume, pos.since, pos.slug, pos.page_pos, pos.fact_pos)
    return Answer(
        since=pos.since,
        pages=[p for p in d.page_arm if "reason" not in p],
        facts=[f for f in d.fact_arm if "reason" not in f],
        threads=d.pack.threads,
        retracted=[r for r in d.page_arm + d.fact_arm if "reason" in r] + d.expiry_arm,
        has_more=d.pack.has_more,
        cursor=resume,
        degraded=changes.degraded,
        text=d.pack.text,
        fields=d.pack.fields(ask.budget_tokens),
        notices=notices,
        arms=next_points(start, resume, (iso(last.created_at), last.seq) if last is not None else None),
    )


def reference_delta(deps: Deps, ask: Ask, ctx: CallContext, start: Start) -> Outcome:
    """A stateless call from a bare `since` (+ `since_slug`), as reference clients make it: one
    position on one timeline (`reference_read`), then the threads after `since`."""
    since = start.since
    degraded: list[str] = []
    skipped = _deadline_passed(ctx)
    if skipped:
        degraded.append(DEADLINE_SKIPPED)

    def threads_of() -> tuple[list[dict[str, Any]], bool]:
        threads, cut = _threads(deps, ask, since=since, ctx=ctx, skipped=skipped)
        if cut:
            degraded.append(cut)
        return threads, cut is not None

    read = reference_read(
        deps,
        ask.tenant,
        now=ask.now,
        since=since,
        slug=start.slug,
        budget_tokens=ask.budget_tokens,
        world_only=ask.world_only,
        skipped=skipped,
        fact_item=ask.item,
        threads_of=threads_of,
    )
    notices: list[Notice] = []
    if not read.taken and read.has_more:
        notices.append(incomplete_notice(ask.params, None, read.pack.needed))
    cursor = NextCursor(
        since=iso(read.since), slug=read.slug, page_seq=read.page_seq, fact_seq=read.fact_seq, expiry=None
    )
    return answer(
        Answer(
            since=since,
            pages=read.pages,
            facts=read.facts,
            threads=read.pack.threads,
            retracted=[],
            has_more=read.has_more,
            cursor=cursor,
            degraded=degraded,
            text=read.pack.text,
            fields=read.pack.fields(ask.budget_tokens),
            notices=notices,
            arms=next_points(
                start_points(ask.resume, since, start.slug, start.page_pos, start.fact_pos),
                cursor,
                (read.facts[-1]["created_at"], read.facts[-1]["id"]) if read.facts else None,
            ),
        )
    )


def _deadline_passed(ctx: CallContext) -> bool:
    return ctx.deadline_at is not None and time.monotonic() >= ctx.deadline_at


def _threads(
    deps: Deps, ask: Ask, *, since: datetime, ctx: CallContext, skipped: bool
) -> tuple[list[dict[str, Any]], str | None]:
    """Open-thread events after `since` for the named entities, and why the deadline cut them
    short (None when it did not)."""
    tenant, world_only, now = ask.tenant, ask.world_only, ask.now
    threads: list[dict[str, Any]] = []
    names = parse_entity_list(ask.params.entities, DELTA_MAX_THREAD_ENTITIES)
    seen: set[str] = set()
    for i, name in enumerate(names):
        if skipped:
            break
        if _deadline_passed(ctx):
            return threads, f"server deadline reached after {i} of {len(names)} thread entities"
        best = resolve_entity(deps, tenant, name, world_only=world_only).best
        if best is None or best.head.slug in seen:
            continue
        seen.add(best.head.slug)
        page = deps.pages.get(tenant, best.head.slug)
        if page is None or (world_only and page.visibility != "world"):
            continue
        events = open_threads(deps, tenant, page, world_only=world_only, now=now, since=since)
        if ask.caller.remote:
            events = [{**event, "text": redact(event["text"])} for event in events]
        threads += [{"slug": page.slug, **thread} for thread in events]
    return threads, None
