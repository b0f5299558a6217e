"""Console sign-in sessions, kept on the server: the browser holds only a random session id.

A session carries the token it was signed in with (never sent back to the browser), who that token
is (`whoami`), and the CSRF token every form posts back. Sessions expire after `IDLE` without a
request and after `ABSOLUTE` in all; sign-out ends one at once. Sign-in tickets (`fleetmem
console`) are one-time, short-lived links that sign a browser in with a token the console holds.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

#: The cookie holding the session id, and the one holding the sign-in form's CSRF value.
COOKIE = "fleetmem_console"
LOGIN_CSRF_COOKIE = "fleetmem_console_login"
IDLE = timedelta(minutes=30)
ABSOLUTE = timedelta(hours=8)
TICKET_TTL = timedelta(seconds=60)
#: Sessions kept at most; past it the least recently used is dropped.
MAX_SESSIONS = 1000


@dataclass
class Session:
    id: str
    token: str = field(repr=False)
    csrf: str = field(repr=False)
    who: dict[str, Any]
    created: datetime
    seen: datetime

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset(self.who.get("scopes") or ())

    def can(self, scope: str) -> bool:
        return scope in self.scopes

    def csrf_ok(self, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(self.csrf, str(presented))


def _now() -> datetime:
    return datetime.now(UTC)


class Sessions:
    """The sessions of one console process (in memory: a restart signs everyone out)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._tickets: dict[str, tuple[str, datetime]] = {}

    def open(self, token: str, who: dict[str, Any]) -> Session:
        now = _now()
        session = Session(
            id=secrets.token_urlsafe(32), token=token, csrf=secrets.token_urlsafe(32), who=who, created=now, seen=now
        )
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions.values(), key=lambda s: s.seen)
                self._sessions.pop(oldest.id, None)
            self._sessions[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session with this id (its idle clock restarted), or None."""
        if not session_id:
            return None
        now = _now()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if now - session.seen > IDLE or now - session.created > ABSOLUTE:
                self._sessions.pop(session_id, None)
                return None
            session.seen = now
            return session

    def close(self, session_id: str | None) -> None:
        with self._lock:
            self._sessions.pop(session_id or "", None)

    def ticket(self, token: str) -> str:
        """A one-time sign-in ticket for `token`, valid for `TICKET_TTL`."""
        ticket = secrets.token_urlsafe(32)
        with self._lock:
            self._tickets[ticket] = (token, _now() + TICKET_TTL)
        return ticket

    def redeem(self, ticket: str | None) -> str | None:
        """The token of a live ticket, which is used up; None for an unknown or expired one."""
        with self._lock:
            entry = self._tickets.pop(ticket or "", None)
        if entry is None or entry[1] < _now():
            return None
        return entry[0]
