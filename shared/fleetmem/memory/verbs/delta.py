"""`delta(since?, session_id?, since_slug?, since_page_seq?, since_fact_seq?, entities?, budget_tokens?,
include_private?)` — what changed since a cursor, for heartbeats (docs/protocol.md: delta; D10, D14).
At-least-once under any interleaving of writers and wakes, never silent loss.

Public API: `DeltaParams`, `DeltaResult`, `run(deps, caller, params, ctx) -> Outcome`, `SPEC`
(registered). The session cursors live in `fleetmem.memory.delta_cursor`, the budget (what the
text shows, the first item's cut) in `delta_budget`, change and expiry positions in
`delta_positions`, and the one-timeline read of a reference client in `delta_reference`.

Rules:
- Input: `since` (ISO 8601, must parse; echoed normalized `…T…:…:….000Z`) and/or `session_id`
  (clipped to 200 chars); neither -> invalid_params. With `since`: `since_slug` resumes a (updated_at,
  slug) keyset position, and `since_page_seq` / `since_fact_seq` (integers >= 0, from
  `next_cursor.page_seq` / `next_cursor.fact_seq`) resume the EXACT positions. An explicit `since`
  wins over the session's cursor.
- Change sequences (D14): every page write and every new fact gets the tenant's next page / fact
  change number inside its own write transaction (on DynamoDB the write commits with a pending
  number and the store numbers it when a reader asks for positions, D21), so once a reader has
  seen number N, every change below N has committed and every later number is above N. Pages and
  facts are each listed by change number strictly after their own position, ascending, 50 per
  call (51 fetched to detect overflow); facts active only. A position not given (a reference client passing only since /
  since_slug, or a session cursor from before change numbers) is derived from the timestamp:
  min(current counter, smallest number of an item after it - 1) — `change_floor`.
- Session cursors are keyed (tenant, cursor_client(caller), session_id): a trusted-local caller
  uses its client id (the CLI's is "local"); a remote caller uses its authenticated client id, or
  the shared "remote" namespace when it has none — and never "local", which is reserved for the
  trusted lane. First wake (or a wake after 7 idle days): the cursor is created at now (its change
  positions at the current counters) and the delta is empty (`since` = now, `has_more: false`).
- Budget (`delta_budget.pack_delta`): the budget is spent on `text`, frame included (D16). The
  pending items in the order their positions pass them (the page arm, the fact arm, TTL expiries;
  then thread events) are delivered as the longest prefix the text can show within the budget,
  and the JSON lists exactly that prefix: every delivered item is in the wake's text, and no
  position passes an item the text left out. When not even the first pending page or fact fits
  whole it is delivered cut to fit (`truncated: true`, the same cut in both). When the frame
  leaves no room for it, nothing is delivered and the `delta_incomplete` notice's fix is the same
  call with the smallest budget that shows it. `budget_used` = cost of the text; `dropped_count`
  = items and threads it left out. `has_more` = page or fact fetch overflow, the deadline, or any
  item left out (threads left out do not count: they are read again from `since`).
- Fact items: `{id, fact_id, fact, kind, entity_slug, provenance, visibility, created_at,
  valid_until}` (`fact` as in recall).
- Retractions (D19), `retracted[]`: a forgotten or superseded fact takes the next fact change
  number in its write and is listed in the fact arm as `{kind: "fact", id, reason, at,
  superseded_by?}`; a deleted page's tombstone is numbered in the page sequence and listed in the
  page arm as `{kind: "page", slug, reason: "deleted", at}`; a TTL expiry (read-time, no write) is
  listed after the fact arm by (valid_until, seq) after its own position `expiry` ("<ISO>#<seq>",
  in the session cursor and next_cursor; `since_expiry`; absent: from since). Each costs its line
  in the text. Calls from a bare since list none of them.
- A stateless call without both exact positions (a reference client: since + since_slug only)
  reads one timeline (`_reference_delta`): pages and facts merged in time order, a prefix within
  the budget, next_cursor.since/slug = the last delivered item ("#f<seq>" inside a millisecond of
  facts), page_seq / fact_seq the change floors of that position.
- `next_cursor` = `{since, slug}` of the last DELIVERED page (none delivered -> the effective
  since/slug; the reference wire) plus `page_seq` / `fact_seq`: the change numbers delivered up to
  (the exact cursor; pass them back as since_page_seq / since_fact_seq).
- Session advance (conditional write on the cursor version; on a lost race re-read and retry once;
  no position ever moves backwards): page_seq to the last delivered page, fact_seq to the last
  delivered fact, each only past what was DELIVERED; since/slug to the last delivered page, or to
  now − 2 s when nothing was pending (the threads arm filters by it). A wake that delivered
  nothing but held something back (only the deadline can now) moves nothing and carries a
  `delta_incomplete` notice (kind degraded) whose fix says wait and retry the same call; from the
  3rd consecutive incomplete wake of a session the fix carries no call (`next: report`). An
  explicit `since` on a session moves an arm's position only when it read from at or before it.
- Threads: open-thread events (commitments, timeline entries) dated after the effective `since`
  for up to 8 `entities` (comma-separated, like context_pack).
- Visibility: world-only unless trusted-local AND include_private (as context_pack).
- D10: past `ctx.deadline_at` the remaining arms are skipped, `degraded_reason` says so, the
  skipped arms count as dropped (has_more) and their positions do not move (no silent loss).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from pydantic import ConfigDict, Field

from fleetmem.errors import Fix, Notice, Outcome, Unavailable, VerbError
from fleetmem.memory import common
from fleetmem.memory.cards import open_threads
from fleetmem.memory.delta_budget import pack_delta
from fleetmem.memory.delta_cursor import (
    RETRY_AFTER_SECONDS,
    CursorTarget,
    cursor_client,
    session_unavailable,
    store_cursor,
)
from fleetmem.memory.delta_positions import expiry_key, fact_tie, merge_changes
from fleetmem.memory.delta_reference import reference_read
from fleetmem.memory.entities import parse_entity_list, resolve_entity
from fleetmem.memory.params import Budget, ChangePosition, Params, SinceText
from fleetmem.memory.registry import ToolSpec, register
from fleetmem.memory.verbs.recall import fact_item
from fleetmem.models import (
    BudgetFields,
    Caller,
    Cursor,
    Fact,
    PackFact,
    PageHead,
    PageItem,
    PageTombstone,
    SlugThread,
    Wire,
)
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import (
    DELTA_FACT_LIMIT,
    DELTA_MAX_THREAD_ENTITIES,
    DELTA_PAGE_LIMIT,
    PROTOCOL_VERSION,
    SESSION_ID_MAX,
)
from fleetmem.timefmt import iso

TOOL = "delta"
IN_FLIGHT_MARGIN = timedelta(seconds=2)
INCOMPLETE_REPORT_STREAK = 3


def _resume_at(what: str, cursor_field: str) -> Any:
    """A `since_*` parameter: the position, within `since`, a call resumes from (the field of the
    last answer's `next_cursor` it passes back)."""
    return Field(default=None, description=f"With since: {what} (pass back next_cursor.{cursor_field}).")


class DeltaParams(Params):
    model_config = ConfigDict(extra="ignore")

    since: SinceText = Field(
        default=None,
        description="ISO 8601 date/datetime: changes strictly after it. Wins over the session cursor.",
    )
    since_slug: str | None = _resume_at("resume after this slug", "since + next_cursor.slug")
    since_page_seq: ChangePosition = _resume_at("the exact page position", "page_seq")
    since_fact_seq: ChangePosition = _resume_at("the exact fact position", "fact_seq")
    since_expiry: str | None = _resume_at("the TTL-expiry position", "expiry")
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


class NextCursor(Wire):
    """Where to resume statelessly: `since` + `slug` of the last delivered page (the reference's
    fields) and the exact change positions of both arms (D14)."""

    since: str | None
    slug: str
    page_seq: int | None = Field(description="Page change number delivered up to; pass back as since_page_seq.")
    fact_seq: int | None = Field(
        description="Fact change number delivered up to; pass back as since_fact_seq (null only when a "
        "deadline skipped the facts of a call from a bare since)."
    )
    expiry: str | None = Field(
        default=None, description="TTL expiries reported up to; pass back as since_expiry (null: from since)."
    )


class Retraction(Wire):
    """A page or fact a follower may hold that is no longer true or gone."""

    kind: str = Field(description='"fact" or "page"')
    id: str | None = Field(default=None, description="the fact_id (kind fact)")
    slug: str | None = Field(default=None, description="the page slug (kind page)")
    reason: str = Field(description='"forgotten", "superseded", "expired" or "deleted"')
    at: str | None
    superseded_by: str | None = Field(default=None, description="the fact_id that replaces it (superseded)")


class DeltaBody(Wire):
    protocol_version: int
    since: str | None
    pages: list[DeltaPage]
    facts: list[PackFact]
    threads: list[SlugThread]
    retracted: list[Retraction] = Field(default_factory=list)
    text: str
    has_more: bool
    next_cursor: NextCursor
    degraded_reason: str | None = None


class DeltaResult(BudgetFields, DeltaBody):
    """delta's body: DeltaBody's fields, then the budget fields (pydantic lists the fields of the
    last base first)."""


def _deadline_passed(ctx: CallContext) -> bool:
    return ctx.deadline_at is not None and time.monotonic() >= ctx.deadline_at


def _missing_input_error(params: DeltaParams, now: datetime) -> VerbError:
    return common.invalid(
        TOOL,
        params,
        "delta needs `since` or `session_id`.",
        problem="delta was called with neither since nor session_id, so it has no starting point.",
        cause="delta reports what changed after a point in time: an explicit ISO 8601 `since`, or the "
        "cursor the server keeps for a `session_id` (pass a stable session_id on every heartbeat).",
        field="since",
        value=iso(now - timedelta(days=1)),
        why="Without since or session_id delta has no starting point; the fix asks for the last 24 hours.",
    )


def _empty_body(since: datetime, slug: str, seqs: tuple[int, int], budget_tokens: int | None) -> dict:
    """A first wake's answer: nothing delivered; every position at now (TTL expiries from now on)."""
    pack = pack_delta(iso(since) or "", [], [], overflow=False, budget=budget_tokens)
    body: dict = {
        "protocol_version": PROTOCOL_VERSION,
        "since": iso(since),
        "pages": [],
        "facts": [],
        "threads": [],
        "retracted": [],
        "text": pack.text,
        "has_more": False,
        "next_cursor": {
            "since": iso(since),
            "slug": slug,
            "page_seq": seqs[0],
            "fact_seq": seqs[1],
            "expiry": iso(since),
        },
    }
    body.update(pack.fields(budget_tokens))
    return body


def _page_entry(h: PageHead | PageTombstone) -> dict:
    if isinstance(h, PageTombstone):
        return {"kind": "page", "slug": h.slug, "reason": "deleted", "at": iso(h.deleted_at)}
    return {"slug": h.slug, "title": h.title, "type": h.type, "updated_at": iso(h.updated_at)}


def _fact_retraction(f: Fact, now: datetime) -> dict:
    """A listed fact that is no longer active: why and since when (read from the stored fact)."""
    if f.superseded_by is not None:
        return {
            "kind": "fact",
            "id": f.fact_id,
            "reason": "superseded",
            "at": iso(f.expired_at),
            "superseded_by": f.superseded_by,
        }
    if f.expired_at is not None and (f.valid_until is None or f.expired_at < f.valid_until):
        return {"kind": "fact", "id": f.fact_id, "reason": "forgotten", "at": iso(f.expired_at)}
    return {"kind": "fact", "id": f.fact_id, "reason": "expired", "at": iso(f.valid_until or now)}


def _parse_expiry(params: DeltaParams) -> str:
    try:
        expiry_key(params.since_expiry or "")
    except (ValueError, TypeError):
        raise common.invalid(
            TOOL,
            params,
            "`since_expiry` is not an expiry position from next_cursor.",
            problem=f"since_expiry {str(params.since_expiry)[:60]!r} is not a position delta returned.",
            cause="since_expiry is next_cursor.expiry passed back as is (an ISO time, optionally '#' and "
            "a number); without it TTL expiries are reported from since.",
            field="since_expiry",
            drop=True,
        ) from None
    return str(params.since_expiry)


def _incomplete_notice(params: DeltaParams, streak: int | None, needed: int | None = None) -> Notice:
    args = common.given_args(params)
    if needed is not None:
        why = (
            f"The oldest pending change needs budget_tokens {needed} to be shown in the text (the block's "
            f"frame included); with {params.budget_tokens} nothing could be delivered, so the cursor did not "
            f"move. Run the same call with budget_tokens {needed}; nothing is lost."
        )
        return Notice(
            code="delta_incomplete",
            kind="degraded",
            why=why,
            fix=Fix(why=why, mcp={"tool": TOOL, "arguments": {**args, "budget_tokens": needed}}),
        )
    if streak is not None and streak >= INCOMPLETE_REPORT_STREAK:
        why = (
            f"delta delivered nothing on {streak} consecutive wakes of this session although changes are "
            "waiting: the budget is too small for the oldest pending page or fact. Tell the user; the "
            "session cursor stays where it is until a wake can deliver."
        )
        return Notice(
            code="delta_incomplete",
            kind="degraded",
            why=why,
            fix=Fix(why=why, actor="provider"),
            user_message="Memory updates are stuck: the heartbeat budget is too small for pending changes.",
        )
    why = (
        "delta dropped pending changes for the budget and delivered none, so the cursor did not move. "
        f"Retry the same call in {RETRY_AFTER_SECONDS} seconds (or with a larger budget_tokens); "
        "nothing is lost."
    )
    return Notice(
        code="delta_incomplete",
        kind="degraded",
        why=why,
        fix=Fix(
            why=why, actor="provider", retry_after_seconds=RETRY_AFTER_SECONDS, mcp={"tool": TOOL, "arguments": args}
        ),
    )


def _threads(
    deps: Deps,
    tenant: str,
    params: DeltaParams,
    *,
    world_only: bool,
    now: datetime,
    since: datetime,
    ctx: CallContext,
    skipped: bool,
) -> tuple[list[dict], str | None]:
    """Open-thread events after `since` for the named entities, and why the deadline cut them
    short (None when it did not)."""
    threads: list[dict] = []
    names = parse_entity_list(params.entities, DELTA_MAX_THREAD_ENTITIES)
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
        threads += [{"slug": page.slug, **thread} for thread in events]
    return threads, None


def _reference_delta(
    deps: Deps,
    tenant: str,
    params: DeltaParams,
    ctx: CallContext,
    *,
    now: datetime,
    since: datetime,
    slug: str,
    budget_tokens: int | None,
    world_only: bool,
) -> Outcome:
    """A stateless call from a bare `since` (+ `since_slug`), as reference clients make it: one
    position on one timeline (`reference_read`), then the threads after `since`."""
    degraded: list[str] = []
    skipped = _deadline_passed(ctx)
    if skipped:
        degraded.append("server deadline reached before the facts arm; facts and threads skipped")

    def threads_of() -> tuple[list[dict], bool]:
        threads, cut = _threads(
            deps, tenant, params, world_only=world_only, now=now, since=since, ctx=ctx, skipped=skipped
        )
        if cut:
            degraded.append(cut)
        return threads, cut is not None

    read = reference_read(
        deps,
        tenant,
        now=now,
        since=since,
        slug=slug,
        budget_tokens=budget_tokens,
        world_only=world_only,
        skipped=skipped,
        fact_item=fact_item,
        threads_of=threads_of,
    )
    has_more = read.has_more
    notices: list[Notice] = []
    if not read.taken and has_more:
        notices.append(_incomplete_notice(params, None, read.pack.needed))
    cursor = NextCursor(
        since=iso(read.since), slug=read.slug, page_seq=read.page_seq, fact_seq=read.fact_seq, expiry=None
    )
    return _answer(
        since,
        read.pages,
        read.facts,
        read.pack.threads,
        [],
        has_more=has_more,
        cursor=cursor,
        degraded=degraded,
        text=read.pack.text,
        fields=read.pack.fields(budget_tokens),
        notices=notices,
    )


def run(deps: Deps, caller: Caller, params: DeltaParams, ctx: CallContext) -> Outcome:
    now = deps.clock.now()
    explicit_since = common.parse_since(TOOL, params, "since", now)
    session_id = (params.session_id or "").strip()[:SESSION_ID_MAX] or None
    if explicit_since is None and session_id is None:
        raise _missing_input_error(params, now)
    budget_tokens = common.check_budget(TOOL, params)
    page_param, fact_param = params.since_page_seq, params.since_fact_seq
    world_only = common.world_only(caller, params.include_private)
    client = cursor_client(caller)
    tenant = caller.tenant

    cursor: Cursor | None = None
    if session_id is not None:
        try:
            if explicit_since is None:
                # The change counters are read with the cursor (one round on network backends):
                # a first wake needs them, and everything committed before it lies behind them.
                cursor, top_page, top_fact = deps.gather(
                    lambda: deps.cursors.get(tenant, client, session_id, now=now),
                    lambda: deps.page_feed.change_floor(tenant, since=None),
                    lambda: deps.fact_feed.change_floor(tenant, after=None),
                )
            else:
                cursor = deps.cursors.get(tenant, client, session_id, now=now)
            if cursor is None and explicit_since is None:
                # First wake (or the old cursor idled out): establish at now and at the current
                # change counters, deliver nothing. A concurrent first wake set the same position.
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
                return Outcome(body=_empty_body(now, "", seqs, budget_tokens))
        except Unavailable as exc:
            raise session_unavailable(exc) from None

    if explicit_since is not None:
        eff_since, eff_slug = explicit_since, (params.since_slug or "").strip()
        page_pos, fact_pos = page_param, fact_param
        expiry_pos = _parse_expiry(params) if params.since_expiry else None
    else:
        assert cursor is not None
        eff_since, eff_slug = cursor.since, cursor.slug
        page_pos, fact_pos = cursor.page_seq, cursor.fact_seq
        expiry_pos = cursor.expiry
    if session_id is None and (page_pos is None or fact_pos is None):
        return _reference_delta(
            deps,
            tenant,
            params,
            ctx,
            now=now,
            since=eff_since,
            slug=eff_slug,
            budget_tokens=budget_tokens,
            world_only=world_only,
        )
    # A position not known exactly is derived from the timestamp (D14: change_floor); both arms
    # in one concurrent round on network backends.
    if page_pos is None or fact_pos is None:
        known_page, known_fact = page_pos, fact_pos
        page_pos, fact_pos = deps.gather(
            (lambda: known_page)
            if known_page is not None
            else lambda: deps.page_feed.change_floor(tenant, since=eff_since, slug=eff_slug),
            (lambda: known_fact)
            if known_fact is not None
            # inside a millisecond of facts ("#f<seq>"): after that fact
            else lambda: deps.fact_feed.change_floor(tenant, after=eff_since, after_seq=fact_tie(eff_slug)),
        )

    degraded: list[str] = []
    skipped_arms = _deadline_passed(ctx)
    if skipped_arms:
        degraded.append("server deadline reached before the facts arm; facts and threads skipped")
    # Pages and facts are independent reads: one concurrent round on network backends.
    # Retractions ride their arm's change numbers: a deleted page leaves a tombstone numbered in
    # the page sequence, a forgotten or superseded fact takes the next fact number.
    expiry_at, expiry_seq = (eff_since, None) if expiry_pos is None else expiry_key(expiry_pos, raw=True)
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
    pages = [_page_entry(h) for _, h in heads]
    fact_overflow = len(rows) > DELTA_FACT_LIMIT
    kept_facts = rows[:DELTA_FACT_LIMIT]
    facts: list[dict] = [fact_item(f) if f.is_active(now) else _fact_retraction(f, now) for _, f in kept_facts]
    expiry_overflow = len(expiring) > DELTA_FACT_LIMIT
    expired = expiring[:DELTA_FACT_LIMIT]
    expiries = [{"kind": "fact", "id": f.fact_id, "reason": "expired", "at": iso(f.valid_until)} for f in expired]

    threads, cut = _threads(
        deps, tenant, params, world_only=world_only, now=now, since=eff_since, ctx=ctx, skipped=skipped_arms
    )
    if cut:
        degraded.append(cut)
        skipped_arms = True

    # The budget is spent on the text: the wake delivers the prefix of its pending items (in the
    # order the positions pass them) that the text shows, the first cut to fit if need be (D14).
    overflow = page_overflow or fact_overflow or expiry_overflow or skipped_arms
    pack = pack_delta(iso(eff_since) or "", pages + facts + expiries, threads, overflow=overflow, budget=budget_tokens)
    page_arm = pack.items[: len(pages)]
    fact_arm = pack.items[len(pages) : len(pages) + len(facts)]
    expiry_arm = pack.items[len(pages) + len(facts) :]
    packed_pages = [p for p in page_arm if "reason" not in p]
    packed_facts = [f for f in fact_arm if "reason" not in f]
    retracted = [r for r in page_arm + fact_arm if "reason" in r] + expiry_arm
    has_more = pack.has_more
    next_expiry: str | None
    if expiry_arm:
        last_expired = expired[len(expiry_arm) - 1]
        next_expiry = f"{iso(last_expired.valid_until)}#{last_expired.seq}"
    else:
        next_expiry = expiry_pos if expiry_pos is not None else iso(eff_since)

    next_page_seq = heads[len(page_arm) - 1][0] if page_arm else page_pos
    next_fact_seq = kept_facts[len(fact_arm) - 1][0] if fact_arm else fact_pos
    delivered_heads = [h for _, h in heads[: len(page_arm)] if isinstance(h, PageHead)]
    if delivered_heads:
        next_since, next_slug = delivered_heads[-1].updated_at, delivered_heads[-1].slug
    else:
        next_since, next_slug = eff_since, eff_slug
    # The keyset position a caller may pass back alone never passes a listed item it did not get.
    body_since, body_slug = next_since, next_slug
    held = [(h.updated_at, h.slug) for _, h in heads[len(page_arm) :] if isinstance(h, PageHead)] + [
        (f.created_at, "") for _, f in kept_facts[len(fact_arm) :] if f.is_active(now)
    ]
    for at, slug in held:
        if (at, slug) <= (body_since, body_slug):
            body_since, body_slug = at - timedelta(milliseconds=1), ""

    notices: list[Notice] = []
    delivered = bool(page_arm or fact_arm or expiry_arm)
    # Each arm carries its own position; with nothing delivered, anything held back (only the
    # deadline can hold back everything now) keeps the cursor in place.
    incomplete = not delivered and has_more
    if session_id is not None:
        target = CursorTarget(
            page_seq=next_page_seq if page_arm else None,
            fact_seq=next_fact_seq if fact_arm else None,
            position=(next_since, next_slug) if delivered_heads else None,
            expiry=next_expiry if expiry_arm else None,
        )
        if not delivered and not incomplete:
            target = CursorTarget(position=(now - IN_FLIGHT_MARGIN, ""))
        if cursor is not None and explicit_since is not None:
            # A one-off read from an explicit since moves an arm only if it read from at or
            # before the session's own position (it must not skip what the session has not seen).
            read_from = iso(expiry_at) or ""
            if expiry_seq is not None:
                read_from = f"{read_from}#{expiry_seq}"
            target = CursorTarget(
                page_seq=target.page_seq if cursor.page_seq is None or page_pos <= cursor.page_seq else None,
                fact_seq=target.fact_seq if cursor.fact_seq is None or fact_pos <= cursor.fact_seq else None,
                position=target.position,
                expiry=target.expiry
                if cursor.expiry is None or expiry_key(read_from) <= expiry_key(cursor.expiry)
                else None,
            )
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
                hold=(eff_since, eff_slug),
                hold_seqs=(page_pos, fact_pos),
                hold_expiry=next_expiry,
            )
        except Unavailable as exc:
            raise session_unavailable(exc) from None
        if incomplete:
            notices.append(_incomplete_notice(params, stored.incomplete_streak if stored else None, pack.needed))
    elif incomplete:
        notices.append(_incomplete_notice(params, None, pack.needed))

    resume = NextCursor(
        since=iso(body_since), slug=body_slug, page_seq=next_page_seq, fact_seq=next_fact_seq, expiry=next_expiry
    )
    return _answer(
        eff_since,
        packed_pages,
        packed_facts,
        pack.threads,
        retracted,
        has_more=has_more,
        cursor=resume,
        degraded=degraded,
        text=pack.text,
        fields=pack.fields(budget_tokens),
        notices=notices,
    )


def _answer(
    since: datetime | None,
    pages: list[dict],
    facts: list[dict],
    threads: list[dict],
    retracted: list[dict],
    *,
    has_more: bool,
    cursor: NextCursor,
    degraded: list[str],
    text: str,
    fields: dict,
    notices: list[Notice],
) -> Outcome:
    """The delta body from what its text shows: built as its result model and dumped once."""
    result = DeltaResult.model_validate(
        {
            "protocol_version": PROTOCOL_VERSION,
            "since": iso(since),
            "pages": pages,
            "facts": facts,
            "threads": threads,
            "retracted": retracted,
            "text": text,
            "has_more": has_more,
            "next_cursor": cursor,
            **({"degraded_reason": "; ".join(degraded)} if degraded else {}),
            **fields,
        }
    )
    return Outcome(body=result.wire(), notices=notices)


SPEC = register(
    ToolSpec(
        name=TOOL,
        description=(
            "MEMORY VERB (v1): delta(session_id | since, budget_tokens?) returns what changed since your "
            "last wake: pages updated (oldest first), facts recorded, and open-thread events for `entities`, "
            "plus a ready-to-inject `text`. Call it on every HEARTBEAT / periodic wake with a stable "
            "session_id — the server keeps your cursor, delivery is at-least-once, and has_more=true means "
            "call again. The first wake of a session only sets the cursor (empty delta). Stateless: pass "
            'since (+ since_slug from next_cursor). Example: {"session_id": "ops-bot-heartbeat", '
            '"budget_tokens": 1500}. Stateless callers pass back every next_cursor field (page_seq as '
            "since_page_seq, fact_seq as since_fact_seq, expiry as since_expiry) for exact resumption. "
            "retracted[] lists facts forgotten, superseded or expired and pages deleted since: drop "
            "them from what you kept. Zero LLM, sub-second."
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
