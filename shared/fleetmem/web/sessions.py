"""Console sign-in sessions, kept on the server: the browser holds only a random session id.

A session carries the token it was signed in with (never sent back to the browser), who that token
is (`whoami`), and the CSRF token every form posts back. Sessions expire after `IDLE` without a
request and after `ABSOLUTE` in all; sign-out ends one at once. Sign-in tickets (`fleetmem
console`) are one-time, short-lived links that sign a browser in with a token the console holds.

Cookies ignore ports, so the cookie names carry the console's port (`cookie_names`): two consoles on
one host keep apart. One token holds at most `MAX_PER_TOKEN` live sessions (signing in again evicts
its oldest), and `SignInLimiter` caps sign-in attempts per client address.
"""

from __future__ import annotations

import hmac
import os
import secrets
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

#: The cookie holding the session id, and the one holding the sign-in form's CSRF value (each
#: followed by `_<port>`: see `cookie_names`).
COOKIE = "fleetmem_console"
LOGIN_CSRF_COOKIE = "fleetmem_console_login"
IDLE = timedelta(minutes=30)
ABSOLUTE = timedelta(hours=8)
TICKET_TTL = timedelta(seconds=60)
#: Sessions kept at most; past it the least recently used is dropped.
MAX_SESSIONS = 1000
#: Live sessions one token may hold; signing in once more ends its oldest.
MAX_PER_TOKEN = 20
#: Sign-in attempts one client address may make per `SIGN_IN_WINDOW` (the environment variable
#: overrides the default).
ENV_SIGN_INS_PER_MINUTE = "FLEETMEM_CONSOLE_SIGN_INS_PER_MINUTE"
SIGN_INS_PER_MINUTE = 10
SIGN_IN_WINDOW = timedelta(minutes=1)


def cookie_names(port: int) -> tuple[str, str]:
    """The session cookie's and the sign-in CSRF cookie's names for a console on `port`."""
    return f"{COOKIE}_{port}", f"{LOGIN_CSRF_COOKIE}_{port}"


@dataclass
class Session:
    id: str
    token: str = field(repr=False)
    csrf: str = field(repr=False)
    who: dict[str, Any]
    created: datetime
    seen: datetime
    #: What one redirect hands to the page it leads to (a new token, a forget report); read once.
    flash: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset(self.who.get("scopes") or ())

    def can(self, scope: str) -> bool:
        return scope in self.scopes

    def csrf_ok(self, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(self.csrf, str(presented))

    def token_ok(self, presented: str | None) -> bool:
        """Whether `presented` is the token this session signed in with (the step-up check)."""
        return bool(presented) and hmac.compare_digest(self.token.encode(), str(presented).strip().encode())


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
            same = sorted((s for s in self._sessions.values() if s.token == token), key=lambda s: s.created)
            for old in same[: max(0, len(same) - MAX_PER_TOKEN + 1)]:
                self._sessions.pop(old.id, None)
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


class SignInLimiter:
    """At most `limit` sign-in attempts per client address within `SIGN_IN_WINDOW`."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit if limit is not None else _limit_from_env()
        self._lock = threading.Lock()
        self._seen: dict[str, deque[datetime]] = {}

    def allow(self, address: str) -> bool:
        """Counts one attempt from `address`; False when it is over the limit (and not counted)."""
        now = _now()
        with self._lock:
            for key in [k for k, q in self._seen.items() if not q or now - q[-1] > SIGN_IN_WINDOW]:
                del self._seen[key]
            recent = self._seen.setdefault(address, deque())
            while recent and now - recent[0] > SIGN_IN_WINDOW:
                recent.popleft()
            if len(recent) >= self.limit:
                return False
            recent.append(now)
            return True


def _limit_from_env() -> int:
    raw = os.environ.get(ENV_SIGN_INS_PER_MINUTE, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else SIGN_INS_PER_MINUTE
