"""delta's session cursors (D14): whose cursor a caller reads, and how a wake advances it —
a conditional write on the cursor version, re-read and retried once on a lost race, no position
ever moving backwards.

Public API: `cursor_client(caller) -> str`, `CursorTarget`, `store_cursor(...)`,
`session_unavailable(exc) -> VerbError`, `RETRY_AFTER_SECONDS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fleetmem.errors import Conflict, Fix, Unavailable, VerbError
from fleetmem.memory.delta_positions import expiry_key
from fleetmem.models import Caller, Cursor
from fleetmem.ports import Deps
from fleetmem.protocol import LOCAL_CLIENT, REMOTE_CLIENT
from fleetmem.timefmt import to_ms

RETRY_AFTER_SECONDS = 30


def cursor_client(caller: Caller) -> str:
    if not caller.remote:
        return caller.client_id or LOCAL_CLIENT
    if not caller.client_id or caller.client_id == LOCAL_CLIENT:
        return REMOTE_CLIENT
    return caller.client_id


def session_unavailable(exc: Unavailable) -> VerbError:
    why = "The session cursor store could not be read, so delta cannot tell what you already received."
    return VerbError(
        "unavailable",
        "The delta session state is unavailable right now.",
        "Problem: delta could not read the session cursor. Cause: the cursor store is throttled or "
        "down. Fix: wait and retry the same call; nothing was delivered or advanced.",
        why=why,
        detail={"reason": "session_state"},
        fix=Fix(why=why, actor="provider", retry_after_seconds=exc.retry_after_seconds or RETRY_AFTER_SECONDS),
        klass="unavailable",
        retryable=True,
    )


@dataclass(frozen=True)
class CursorTarget:
    """Where a wake moves the session cursor; None for a field means "leave it"."""

    page_seq: int | None = None
    fact_seq: int | None = None
    position: tuple[datetime, str] | None = None
    expiry: str | None = None


def store_cursor(
    deps: Deps,
    caller: Caller,
    client: str,
    session_id: str,
    now: datetime,
    current: Cursor | None,
    target: CursorTarget,
    *,
    incomplete: bool,
    hold: tuple[datetime, str],
    hold_seqs: tuple[int, int],
    hold_expiry: str | None = None,
) -> Cursor | None:
    """Conditionally write the advanced cursor; on a lost race re-read and retry once.

    A missing cursor is created at `target` or, field by field, at `hold`/`hold_seqs` (the position
    this wake read from). No position moves backwards. Returns the stored cursor, or None when both
    attempts lost the race (delivery stays at-least-once: the cursor simply did not move).
    """
    held = _Held(hold, hold_seqs, hold_expiry)
    for attempt in range(2):
        if current is None:
            new = _created(caller, client, session_id, now, target, held, incomplete=incomplete)
            expected = None
        else:
            new = _advanced(current, now, target, held, incomplete=incomplete)
            expected = current.version
        try:
            return deps.cursors.put(new, expected_version=expected)
        except Conflict:
            if attempt:
                return None
            current = deps.cursors.get(caller.tenant, client, session_id, now=now)
    return None


@dataclass(frozen=True)
class _Held:
    """The positions this wake read from: where a field the target leaves alone is created."""

    position: tuple[datetime, str]
    seqs: tuple[int, int]
    expiry: str | None


def _later(old: int | None, new: int | None) -> int | None:
    if new is None:
        return old
    return new if old is None or new > old else old


def _later_expiry(old: str | None, new: str | None) -> str | None:
    if new is None:
        return old
    return new if old is None or expiry_key(new) > expiry_key(old) else old


def _created(
    caller: Caller, client: str, session_id: str, now: datetime, target: CursorTarget, held: _Held, *, incomplete: bool
) -> Cursor:
    since, slug = target.position or held.position
    return Cursor(
        tenant=caller.tenant,
        client_id=client,
        session_id=session_id,
        since=to_ms(since),
        slug=slug,
        touched_at=now,
        incomplete_streak=1 if incomplete else 0,
        page_seq=_later(held.seqs[0], target.page_seq),
        fact_seq=_later(held.seqs[1], target.fact_seq),
        expiry=_later_expiry(held.expiry, target.expiry),
    )


def _advanced(current: Cursor, now: datetime, target: CursorTarget, held: _Held, *, incomplete: bool) -> Cursor:
    since, slug = current.since, current.slug
    if target.position is not None and (to_ms(target.position[0]), target.position[1]) > (since, slug):
        since, slug = to_ms(target.position[0]), target.position[1]
    return current.model_copy(
        update={
            "since": since,
            "slug": slug,
            "touched_at": now,
            "incomplete_streak": current.incomplete_streak + 1 if incomplete else 0,
            "page_seq": _later(current.page_seq if current.page_seq is not None else held.seqs[0], target.page_seq),
            "fact_seq": _later(current.fact_seq if current.fact_seq is not None else held.seqs[1], target.fact_seq),
            "expiry": _later_expiry(current.expiry if current.expiry is not None else held.expiry, target.expiry),
        }
    )
