"""delta's answer: its wire models, the entries it lists (pages, retractions), the notices and
refusals it gives, and the body built once from what its text shows (docs/protocol.md: delta)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import Field

from fleetmem.errors import Fix, Notice, Outcome, VerbError
from fleetmem.memory import common
from fleetmem.memory.delta_budget import pack_delta
from fleetmem.memory.delta_cursor import RETRY_AFTER_SECONDS
from fleetmem.memory.delta_positions import expiry_key
from fleetmem.memory.delta_resume import CursorArms, encode_cursor, next_points, start_points
from fleetmem.models import BudgetFields, Fact, PackFact, PageHead, PageItem, PageTombstone, SlugThread, Wire
from fleetmem.protocol import PROTOCOL_VERSION
from fleetmem.timefmt import iso

if TYPE_CHECKING:
    from fleetmem.memory.delta_params import DeltaParams

TOOL = "delta"
INCOMPLETE_REPORT_STREAK = 3


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
    cursor: str | None = Field(
        default=None, description="Opaque: every position above, both arms exact; pass back as cursor (D33)."
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
    cursor_arms: CursorArms | None = Field(
        default=None, description="Replay audit trail: where each arm started and where next_cursor resumes it."
    )


class DeltaResult(BudgetFields, DeltaBody):
    """delta's body: DeltaBody's fields, then the budget fields (pydantic lists the fields of the
    last base first)."""


@dataclass(frozen=True)
class Answer:
    """What one delta call delivers, as its text shows it (`answer` makes the body)."""

    since: datetime | None
    pages: list[dict[str, Any]]
    facts: list[dict[str, Any]]
    threads: list[dict[str, Any]]
    retracted: list[dict[str, Any]]
    has_more: bool
    cursor: NextCursor
    degraded: list[str]
    text: str
    fields: dict[str, int]
    notices: list[Notice]
    arms: CursorArms | None = None


def answer(a: Answer) -> Outcome:
    """The delta body from what its text shows: built as its result model and dumped once."""
    result = DeltaResult.model_validate(
        {
            "protocol_version": PROTOCOL_VERSION,
            "since": iso(a.since),
            "pages": a.pages,
            "facts": a.facts,
            "threads": a.threads,
            "retracted": a.retracted,
            "text": a.text,
            "has_more": a.has_more,
            "next_cursor": _with_cursor(a.cursor, a.arms),
            **({"degraded_reason": "; ".join(a.degraded)} if a.degraded else {}),
            **({"cursor_arms": a.arms} if a.arms is not None else {}),
            **a.fields,
        }
    )
    return Outcome(body=result.wire(), notices=a.notices)


def _with_cursor(next_cursor: NextCursor, arms: CursorArms | None) -> NextCursor:
    """next_cursor with its opaque `cursor` (D33): its own fields and the fact arm's keyset point."""
    point = (arms.facts.next.since, arms.facts.next.id) if arms is not None else (next_cursor.since, None)
    return next_cursor.model_copy(update={"cursor": encode_cursor(next_cursor.model_dump(), point)})


def missing_input_error(params: DeltaParams, now: datetime) -> VerbError:
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


def empty_body(since: datetime, slug: str, seqs: tuple[int, int], budget_tokens: int | None) -> dict[str, Any]:
    """A first wake's answer: nothing delivered; every position at now (TTL expiries from now on),
    each arm's start its next (D33)."""
    pack = pack_delta(iso(since) or "", [], [], overflow=False, budget=budget_tokens)
    resume = NextCursor(since=iso(since), slug=slug, page_seq=seqs[0], fact_seq=seqs[1], expiry=iso(since))
    arms = next_points(start_points(None, since, slug, seqs[0], seqs[1]), resume, None)
    body: dict[str, Any] = {
        "protocol_version": PROTOCOL_VERSION,
        "since": iso(since),
        "pages": [],
        "facts": [],
        "threads": [],
        "retracted": [],
        "text": pack.text,
        "has_more": False,
        "next_cursor": _with_cursor(resume, arms).wire(),
        "cursor_arms": arms.wire(),
    }
    body.update(pack.fields(budget_tokens))
    return body


def first_wake_notice(params: DeltaParams, since: datetime) -> Notice:
    """A first wake delivers nothing by design (the session starts now): say so, with the
    stateless call that reads what changed in the day before it instead."""
    args = {k: v for k, v in common.given_args(params).items() if k not in ("session_id", "cursor")}
    args["since"] = iso(since - timedelta(days=1))
    why = (
        "This is the first wake of this session: its cursor starts now, so nothing is delivered yet; "
        "the next wake with the same session_id (or with next_cursor.cursor) returns what changes from "
        "now on. To read what changed before the session started, run the stateless call with since "
        "(it does not move the session)."
    )
    return Notice(code="empty_retrieval", kind="info", why=why, fix=Fix(why=why, mcp={"tool": TOOL, "arguments": args}))


def page_entry(h: PageHead | PageTombstone) -> dict[str, Any]:
    if isinstance(h, PageTombstone):
        return {"kind": "page", "slug": h.slug, "reason": "deleted", "at": iso(h.deleted_at)}
    return {"slug": h.slug, "title": h.title, "type": h.type, "updated_at": iso(h.updated_at)}


def fact_retraction(f: Fact, now: datetime) -> dict[str, Any]:
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


def parse_expiry(params: DeltaParams) -> str:
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


def incomplete_notice(params: DeltaParams, streak: int | None, needed: int | None = None) -> Notice:
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
