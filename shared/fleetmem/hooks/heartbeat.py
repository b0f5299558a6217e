"""`fleetmem heartbeat --session-id ID`: one periodic wake (the PULL path; there is no push heartbeat).

One `delta(session_id, budget_tokens)` against the local store or a remote endpoint. The server
keeps the session's cursor, but an idle cursor expires after 7 days (or is evicted) and the next
wake re-establishes it at now with an empty delta — whatever changed in between would be skipped.
So the last-seen position of each (endpoint, session) is kept in a small state file, and when a
wake comes back looking freshly established, a stateless `delta(since=last_seen)` catch-up runs
first (docs/protocol.md: delta; docs/ambient.md). A catch-up that could not
deliver everything (has_more) keeps its own cursor in the state and resumes on the next wake.

"Looks freshly established": an empty delta (no pages, facts, retractions or threads, has_more false) whose
cursor sits at its own `since` with no slug, AND later than the last-seen position, AND either the
last wake left last-seen exactly where the server's cursor was (it delivered pages, or held back)
or the last wake is older than the expiry window. After a quiet wake the server moves its cursor
to "now − 2 s", which the client cannot see; requiring one of the two conditions keeps quiet wakes
from paying for a needless catch-up, while a catch-up that does run is harmless (at-least-once).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fleetmem.hooks.state import StateFile

HEARTBEAT_FILE = "heartbeat.json"
MAX_SESSIONS = 200
HEARTBEAT_BUDGET_TOKENS = 600
CURSOR_EXPIRY = timedelta(days=7)
#: A wake this long after the last one may find its cursor expired (a day of margin for clocks).
STALE_AFTER = CURSOR_EXPIRY - timedelta(days=1)


def _parse(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def looks_established(body: dict[str, Any], entry: dict[str, Any] | None, now: datetime) -> bool:
    if not entry or any(body.get(k) for k in ("pages", "facts", "threads", "retracted", "has_more")):
        return False
    cursor = body.get("next_cursor") or {}
    since = _parse(body.get("since"))
    last_seen = _parse(entry.get("last_seen"))
    if since is None or last_seen is None or cursor.get("slug") or _parse(cursor.get("since")) != since:
        return False
    if since <= last_seen:
        return False
    last_wake = _parse(entry.get("last_wake_at"))
    return bool(entry.get("exact")) or last_wake is None or now - last_wake >= STALE_AFTER


def wake(
    lane: Any,
    session_id: str,
    budget_tokens: int | None = None,
    entities: str | None = None,
    *,
    state: StateFile | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """One heartbeat. Returns `{session_id, established, catch_up, delta, text}` or, when a call
    failed, `{error: <the envelope>}` (nothing in the state changes then)."""
    state = state or StateFile(HEARTBEAT_FILE, MAX_SESSIONS)
    now = now or datetime.now(UTC)
    key = f"{lane.label}|{session_id}"
    entry = state.get(key)
    args: dict[str, Any] = {"session_id": session_id}
    if budget_tokens is not None:
        args["budget_tokens"] = budget_tokens
    if entities:
        args["entities"] = entities
    reply = lane.call("delta", args)
    if reply.is_error:
        return {"error": reply.body, "notices": reply.notices}
    body = reply.body
    notices = list(reply.notices)
    catch_up: dict[str, Any] | None = None
    established = looks_established(body, entry, now)
    # A catch-up that did not drain last time (has_more) resumes where it stopped.
    resume = (entry or {}).get("catch_up")
    start: tuple[Any, Any] | None = None
    if isinstance(resume, dict):
        start = (resume.get("since"), resume.get("slug"))
    elif established and entry:
        start = (entry.get("last_seen"), entry.get("last_slug"))
    if start is not None:
        stateless = {k: v for k, v in args.items() if k != "session_id"}
        stateless["since"], slug = start
        if slug:
            stateless["since_slug"] = slug
        if isinstance(resume, dict):
            # D14: the exact positions, so items the budget left out (or cut) are neither lost nor repeated
            for field in ("page_seq", "fact_seq"):
                if resume.get(field) is not None:
                    stateless[f"since_{field}"] = resume[field]
        caught = lane.call("delta", stateless)
        if caught.is_error:
            return {"error": caught.body, "notices": caught.notices}
        catch_up = caught.body
        notices += caught.notices
    delivered = bool(body.get("pages")) or bool(body.get("has_more"))
    cursor = body.get("next_cursor") or {}

    def change(_old: dict[str, Any] | None) -> dict[str, Any]:
        return {
            "last_seen": cursor.get("since") or body.get("since"),
            "last_slug": cursor.get("slug") or "",
            "exact": delivered,
            "last_wake_at": now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
            "catch_up": dict(catch_up["next_cursor"]) if catch_up and catch_up.get("has_more") else None,
        }

    state.update(key, change)
    texts = [b["text"] for b in (catch_up, body) if b and isinstance(b.get("text"), str)]
    return {
        "session_id": session_id,
        "established": established,
        "catch_up": catch_up,
        "delta": body,
        "text": "\n".join(texts),
        "notices": notices,
    }
