"""delta's opaque resume cursor (D33): `next_cursor.cursor` out, `cursor` in, and the
`cursor_arms` audit trail of where each arm started and where it resumes.

A cursor is `base64url(JSON)` of a versioned object holding exactly the fields of `next_cursor`
(the keyset position `since`/`slug`, the change positions `page_seq`/`fact_seq`, the TTL-expiry
position `expiry`) and the facts arm's keyset point (`created_at`, `id` of the last fact it
delivered). Passing it back is the same call as passing every `next_cursor` field back
(`since`, `since_slug`, `since_page_seq`, `since_fact_seq`, `since_expiry`): exact on both arms.

It carries positions only: per-brain change numbers and times. A cursor read by another brain's
credential names positions in THAT brain's sequences and reads only that brain (the tenant comes
from the credential), so it reveals nothing and needs no integrity tag: any position a forged
cursor could name, the caller can already read from with `since` 1970.

Public API: `CURSOR_VERSION`, `Resume`, `decode_cursor(params, now) -> Resume | None`,
`encode_cursor(next_cursor, fact_point) -> str`, `FactPoint`, `PagePoint`, `CursorArms`,
`cursor_arms(start, pages_next, facts_next) -> CursorArms`.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import Field

from fleetmem.errors import VerbError
from fleetmem.memory import common
from fleetmem.memory.delta_positions import expiry_key, fact_tie
from fleetmem.models import Wire
from fleetmem.timefmt import iso, parse_iso

if TYPE_CHECKING:
    from fleetmem.memory.delta_params import DeltaParams

TOOL = "delta"
CURSOR_VERSION = 1
CURSOR_MAX = 2048  # characters of a cursor (one is about 200)
_TEXT_MAX = 400  # characters of a slug or an expiry position inside one
#: Positions a cursor replaces; given beside a cursor without `since` they contradict it.
EXPLICIT_POSITIONS = ("since_slug", "since_page_seq", "since_fact_seq", "since_expiry")


class PagePoint(Wire):
    """A point of the page arm: the keyset (`since`, `slug`) and the page change number `seq`."""

    since: str | None
    slug: str
    seq: int | None = Field(description="page change number (since_page_seq)")


class FactPoint(Wire):
    """A point of the fact arm: the keyset (`since` = created_at, `id` = the fact's integer id; null
    when the point is a time only) and the fact change number `seq`."""

    since: str | None
    id: int | None
    seq: int | None = Field(description="fact change number (since_fact_seq)")


class PageArm(Wire):
    start: PagePoint
    next: PagePoint


class FactArm(Wire):
    start: FactPoint
    next: FactPoint


class CursorArms(Wire):
    """Replay audit trail: where each arm started this call and where it resumes."""

    pages: PageArm
    facts: FactArm


@dataclass(frozen=True)
class Resume:
    """A decoded cursor: the positions it resumes from (None: derived from `since`)."""

    since: datetime
    slug: str
    page_seq: int | None
    fact_seq: int | None
    expiry: str | None
    fact_at: str | None
    fact_id: int | None

    def fact_point(self) -> tuple[str | None, int | None]:
        return (self.fact_at, self.fact_id) if self.fact_at is not None else (iso(self.since), None)


def encode_cursor(next_cursor: dict[str, Any], fact_point: tuple[str | None, int | None]) -> str:
    """The opaque cursor of a `next_cursor` (its fields as the wire has them) and the fact arm's point."""
    body = {
        "v": CURSOR_VERSION,
        "s": next_cursor["since"],
        "l": next_cursor["slug"],
        "p": next_cursor.get("page_seq"),
        "f": next_cursor.get("fact_seq"),
        "e": next_cursor.get("expiry"),
        "fs": fact_point[0],
        "fi": fact_point[1],
    }
    raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(params: DeltaParams, now: datetime) -> Resume | None:
    """The call's `cursor` decoded (None without one). A bad one, or one beside `since_*`
    positions without `since`, is `invalid_params` with a fix."""
    raw = params.cursor
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if params.since is None:
        clashing = [name for name in EXPLICIT_POSITIONS if getattr(params, name) is not None]
        if clashing:
            raise _clash_error(params, clashing)
    try:
        return _read(str(raw).strip())
    except (ValueError, TypeError, OverflowError, KeyError, RecursionError, binascii.Error, UnicodeDecodeError):
        raise _bad_cursor_error(params, now) from None


def _read(text: str) -> Resume:
    if len(text) > CURSOR_MAX:
        raise ValueError("too long")
    body = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode())
    if not isinstance(body, dict) or body.get("v") != CURSOR_VERSION:
        raise ValueError("not a cursor of this version")
    since = _time(body["s"])
    slug, expiry, fact_at = body.get("l", ""), body.get("e"), body.get("fs")
    if not isinstance(slug, str) or len(slug) > _TEXT_MAX:
        raise ValueError("slug")
    if expiry is not None:
        if not isinstance(expiry, str) or len(expiry) > _TEXT_MAX:
            raise ValueError("expiry")
        expiry_key(expiry)
    if fact_at is not None:
        _time(fact_at)
    return Resume(
        since=since,
        slug=slug,
        page_seq=_position(body.get("p")),
        fact_seq=_position(body.get("f")),
        expiry=expiry,
        fact_at=fact_at,
        fact_id=_position(body.get("fi")),
    )


def _time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise TypeError("time")
    return parse_iso(value)  # 0001-01-01..9999-12-31 in UTC, or ValueError / OverflowError


def _position(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= common.MAX_POSITION:
        raise ValueError("position")
    return value


def _bad_cursor_error(params: DeltaParams, now: datetime) -> VerbError:
    """Without another starting point the fix replays the last day statelessly (at-least-once:
    what it re-delivers carries the same `facts[].id` and page `updated_at`)."""
    cause = (
        "cursor is next_cursor.cursor of an earlier delta answer, passed back unchanged; this one does "
        "not decode (truncated, edited, or from another protocol version)."
    )
    problem = "The cursor could not be read, so delta does not know where to resume."
    if params.session_id or params.since:
        return common.invalid(
            TOOL, params, "`cursor` is not a delta cursor.", problem=problem, cause=cause, field="cursor", drop=True
        )
    args = {k: v for k, v in common.given_args(params).items() if k != "cursor"}
    return common.invalid(
        TOOL,
        args,
        "`cursor` is not a delta cursor.",
        problem=problem,
        cause=cause + " Without it a session_id (the server keeps the cursor) or a since is needed.",
        field="since",
        value=iso(now - timedelta(days=1)),
        why="The cursor does not decode; the fix reads the last 24 hours instead (or pass a session_id).",
    )


def _clash_error(params: DeltaParams, clashing: list[str]) -> VerbError:
    names = ", ".join(clashing)
    return common.invalid(
        TOOL,
        {k: v for k, v in common.given_args(params).items() if k not in clashing},
        f"`cursor` and {names} name two different positions.",
        problem=f"delta got both a cursor and {names} without since.",
        cause="a cursor already holds every position of both arms; the since_* positions only refine an "
        "explicit since (since given with a cursor replaces the cursor's positions).",
        field="cursor",
        value=params.cursor,
        why=f"The cursor alone resumes exactly; the fix drops {names}.",
    )


def cursor_arms(start: tuple[PagePoint, FactPoint], pages_next: PagePoint, facts_next: FactPoint) -> CursorArms:
    return CursorArms(pages=PageArm(start=start[0], next=pages_next), facts=FactArm(start=start[1], next=facts_next))


def start_points(
    resume: Resume | None, since: datetime, slug: str, page_seq: int | None, fact_seq: int | None
) -> tuple[PagePoint, FactPoint]:
    """Where a call's arms start: its keyset position and change positions; the fact arm's keyset
    point is the one the cursor carried, else `since` (and the fact of a "#f<seq>" slug)."""
    fact_at, fact_id = resume.fact_point() if resume is not None else (iso(since), fact_tie(slug))
    return PagePoint(since=iso(since), slug=slug, seq=page_seq), FactPoint(since=fact_at, id=fact_id, seq=fact_seq)


def next_points(
    start: tuple[PagePoint, FactPoint], next_cursor: Any, last_fact: tuple[str | None, int] | None
) -> CursorArms:
    """The arms' audit trail: each one's start, and where `next_cursor` resumes it (the fact arm's
    keyset point is the last fact it delivered, or its start)."""
    fact_at, fact_id = last_fact if last_fact is not None else (start[1].since, start[1].id)
    return cursor_arms(
        start,
        PagePoint(since=next_cursor.since, slug=next_cursor.slug, seq=next_cursor.page_seq),
        FactPoint(since=fact_at, id=fact_id, seq=next_cursor.fact_seq),
    )
