"""TTL grammar (PROTOCOL_NOTES §4, D5): shorthand, absolute ISO dates, ISO durations refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleetmem.memory.ttl import TtlError, iso_duration_to_shorthand, parse_ttl

NOW = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize("value", [None, "", "   "])
def test_empty_or_missing_ttl_never_expires(value):
    assert parse_ttl(value, NOW) is None


@pytest.mark.parametrize(
    ("value", "delta"),
    [
        ("30d", timedelta(days=30)),
        ("12h", timedelta(hours=12)),
        ("45m", timedelta(minutes=45)),
        ("10s", timedelta(seconds=10)),
        ("2w", timedelta(weeks=2)),
        ("3 weeks", timedelta(weeks=3)),
        ("1 day", timedelta(days=1)),
        ("5 mins", timedelta(minutes=5)),
        ("90sec", timedelta(seconds=90)),
        ("2hr", timedelta(hours=2)),
        ("7 Days", timedelta(days=7)),
    ],
)
def test_shorthand_durations_count_from_now(value, delta):
    assert parse_ttl(value, NOW) == NOW + delta


def test_m_means_minutes_not_months():
    assert parse_ttl("1m", NOW) == NOW + timedelta(minutes=1)


def test_absolute_dates_and_datetimes_are_accepted_even_in_the_past():
    assert parse_ttl("2027-01-01", NOW) == datetime(2027, 1, 1, tzinfo=UTC)
    assert parse_ttl("2026-06-12T10:00:00Z", NOW) == datetime(2026, 6, 12, 10, tzinfo=UTC)
    assert parse_ttl("2020-01-01T00:00:00+02:00", NOW) == datetime(2019, 12, 31, 22, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "shorthand"),
    [("P30D", "30d"), ("PT12H", "12h"), ("P2W", "14d"), ("P1DT12H", "36h"), ("PT45M", "45m"), ("p7d", "7d")],
)
def test_iso_durations_are_refused_with_the_shorthand_suggested(value, shorthand):
    with pytest.raises(TtlError) as err:
        parse_ttl(value, NOW)
    assert err.value.suggested == shorthand
    assert iso_duration_to_shorthand(value) == shorthand


@pytest.mark.parametrize("value", ["soon", "30 fortnights", "1.5h", "P", "tomorrow", "-3d"])
def test_unreadable_ttls_are_refused_without_a_guess(value):
    with pytest.raises(TtlError) as err:
        parse_ttl(value, NOW)
    assert err.value.suggested is None
