"""Wire time format: UTC, millisecond precision, `Z` suffix (`2026-06-11T09:30:00.000Z`)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import overload


def to_ms(dt: datetime) -> datetime:
    """Normalise to aware UTC truncated to milliseconds (the precision we store and emit)."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    dt = dt.astimezone(UTC)
    return dt.replace(microsecond=(dt.microsecond // 1000) * 1000)


@overload
def iso(dt: datetime) -> str: ...


@overload
def iso(dt: datetime | None) -> str | None: ...


def iso(dt: datetime | None) -> str | None:
    """Render like JavaScript's toISOString()."""
    if dt is None:
        return None
    if dt.tzinfo is UTC:  # what stores and clocks hold: no conversion, no strftime
        return (
            f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}."
            f"{dt.microsecond // 1000:03d}Z"
        )
    dt = to_ms(dt)
    # the year by hand: strftime's %Y drops leading zeros on glibc (year 1 -> "1")
    return f"{dt.year:04d}" + dt.strftime("-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def parse_iso(value: str) -> datetime:
    """Parse an ISO 8601 date or datetime; naive values are UTC. Raises ValueError."""
    text = value.strip()
    if not text:
        raise ValueError("empty timestamp")
    if len(text) == 10 and text[4] == "-" and text[7] == "-":
        d = date.fromisoformat(text)
        return datetime(d.year, d.month, d.day, tzinfo=UTC)
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    return to_ms(datetime.fromisoformat(text))
