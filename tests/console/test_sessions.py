"""Console sessions and sign-in tickets without a browser: idle and absolute expiry, sign-out, and a
ticket that signs in once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetmem.web import sessions
from fleetmem.web.sessions import ABSOLUTE, IDLE, MAX_PER_TOKEN, SIGN_IN_WINDOW, TICKET_TTL, Sessions, SignInLimiter


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[datetime]:
    now = [datetime(2026, 6, 1, 9, 0, tzinfo=UTC)]
    monkeypatch.setattr(sessions, "_now", lambda: now[0])
    return now


def test_a_session_lives_while_used_and_ends_after_idle(clock: list[datetime]) -> None:
    s = Sessions()
    opened = s.open("fm_token", {"scopes": ["read"]})
    clock[0] += IDLE - timedelta(seconds=1)
    assert s.get(opened.id) is opened  # used in time: its idle clock restarts
    clock[0] += IDLE - timedelta(seconds=1)
    assert s.get(opened.id) is opened
    clock[0] += IDLE + timedelta(seconds=1)
    assert s.get(opened.id) is None
    assert s.get(opened.id) is None  # and it stays gone


def test_a_session_ends_after_the_absolute_limit_however_busy(clock: list[datetime]) -> None:
    s = Sessions()
    opened = s.open("fm_token", {"scopes": ["read"]})
    while clock[0] - opened.created < ABSOLUTE - timedelta(minutes=10):
        clock[0] += timedelta(minutes=10)
        assert s.get(opened.id) is opened
    clock[0] += timedelta(minutes=11)
    assert s.get(opened.id) is None


def test_sign_out_and_unknown_ids(clock: list[datetime]) -> None:
    s = Sessions()
    opened = s.open("fm_token", {"scopes": ["read", "write"]})
    assert opened.can("write") and not opened.can("admin")
    assert opened.csrf_ok(opened.csrf) and not opened.csrf_ok("guess") and not opened.csrf_ok(None)
    assert "fm_token" not in repr(opened) and opened.csrf not in repr(opened)
    s.close(opened.id)
    assert s.get(opened.id) is None and s.get(None) is None and s.get("") is None


def test_a_ticket_signs_in_once(clock: list[datetime]) -> None:
    s = Sessions()
    ticket = s.ticket("fm_token")
    assert "fm_token" not in ticket
    assert s.redeem(ticket) == "fm_token"
    assert s.redeem(ticket) is None  # used up
    assert s.redeem("made-up") is None and s.redeem(None) is None


def test_a_ticket_expires(clock: list[datetime]) -> None:
    s = Sessions()
    ticket = s.ticket("fm_token")
    clock[0] += TICKET_TTL + timedelta(seconds=1)
    assert s.redeem(ticket) is None


def test_one_token_keeps_at_most_its_cap_of_sessions_the_oldest_going_first(clock: list[datetime]) -> None:
    s = Sessions()
    mine = []
    for _ in range(MAX_PER_TOKEN + 1):
        clock[0] += timedelta(seconds=1)
        mine.append(s.open("fm_token", {"scopes": ["read"]}))
    other = s.open("fm_other", {"scopes": ["read"]})
    assert s.get(mine[0].id) is None
    assert all(s.get(m.id) is m for m in mine[1:]) and s.get(other.id) is other


def test_sign_ins_are_limited_per_address_within_the_window(clock: list[datetime]) -> None:
    limiter = SignInLimiter(3)
    assert [limiter.allow("10.0.0.1") for _ in range(4)] == [True, True, True, False]
    assert limiter.allow("10.0.0.2")  # another address has its own count
    clock[0] += SIGN_IN_WINDOW + timedelta(seconds=1)
    assert limiter.allow("10.0.0.1")  # the window has passed


def test_the_step_up_check_takes_only_the_sessions_own_token(clock: list[datetime]) -> None:
    opened = Sessions().open("fm_token", {"scopes": ["admin"]})
    assert opened.token_ok("fm_token") and opened.token_ok(" fm_token\n")
    assert not opened.token_ok("fm_other") and not opened.token_ok("") and not opened.token_ok(None)
