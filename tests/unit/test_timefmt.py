"""The wire time format: `iso` renders like JavaScript's toISOString() for every instant, whether it
arrives as stored (aware UTC) or in another zone, naive, or with sub-millisecond digits."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

from fleetmem.timefmt import iso, parse_iso


def _expected(dt: datetime) -> str:
    """toISOString() spelled out: UTC, milliseconds truncated, a four-digit year, `Z`."""
    u = (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).astimezone(UTC)
    return (
        f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}."
        f"{u.microsecond // 1000:03d}Z"
    )


def test_iso_matches_to_iso_string_in_every_zone_and_precision() -> None:
    rng = random.Random(11)
    zones = [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8)), None]
    for _ in range(20_000):
        dt = datetime(1, 1, 2, tzinfo=UTC) + timedelta(microseconds=rng.randrange(0, 315_537_800_000_000_000))
        zone = rng.choice(zones)
        shown = dt.replace(tzinfo=None) if zone is None else dt.astimezone(zone)
        assert iso(shown) == _expected(shown), shown


def test_iso_edges() -> None:
    assert iso(None) is None
    assert iso(datetime(1, 2, 3, tzinfo=UTC)) == "0001-02-03T00:00:00.000Z"
    assert iso(datetime(2026, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)) == "2026-12-31T23:59:59.999Z"
    assert iso(datetime(2027, 1, 1, 5, 0, tzinfo=timezone(timedelta(hours=5)))) == "2027-01-01T00:00:00.000Z"
    assert iso(parse_iso("2026-06-11T09:30:00.123456+02:00")) == "2026-06-11T07:30:00.123Z"
