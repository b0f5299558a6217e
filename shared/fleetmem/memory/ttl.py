"""TTL grammar for `remember` (docs/protocol.md, remember; D5).

Public API:
- `parse_ttl(value: str | None, now: datetime) -> datetime | None`: the absolute expiry instant.
  `None` / `""` (after trimming) -> None (never expires). Shorthand `N<unit>` with N a
  non-negative integer and unit s|sec|second(s), m|min|minute(s) (m is MINUTES), h|hr|hour(s),
  d|day(s), w|week(s), case-insensitive, optional space ("30d", "12 h", "2 weeks") -> now + N
  units. Otherwise an absolute ISO 8601 date or datetime (past instants accepted; naive means UTC).
  Raises `TtlError` for everything else.
- `TtlError(ValueError)`: `.suggested` holds a corrected value when one can be derived (an ISO-8601
  duration such as "P30D" -> "30d", "PT12H" -> "12h"), else None.
- `iso_duration_to_shorthand(text) -> str | None`: "P1DT12H" -> "36h"; None when not a duration.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from fleetmem.timefmt import parse_iso, to_ms

_UNIT_SECONDS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
}
_SHORTHAND = re.compile(r"^(\d{1,9})\s*([a-z]+)$", re.I)
_ISO_DURATION = re.compile(
    r"^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$", re.I
)


class TtlError(ValueError):
    def __init__(self, message: str, suggested: str | None = None) -> None:
        super().__init__(message)
        self.suggested = suggested


def _shorthand_for_seconds(total: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if total and total % size == 0:
            return f"{total // size}{unit}"
    return f"{total}s"


def iso_duration_to_shorthand(text: str) -> str | None:
    m = _ISO_DURATION.match(text.strip())
    if not m or not any(m.groups()) or text.strip().upper().endswith("T"):
        return None
    y, mo, w, d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    # Calendar units have no fixed length; 365/30 days is the conventional reading.
    total = ((y * 365 + mo * 30 + w * 7 + d) * 86400) + h * 3600 + mi * 60 + s
    return _shorthand_for_seconds(total)


def parse_ttl(value: str | None, now: datetime) -> datetime | None:
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    m = _SHORTHAND.match(text)
    if m:
        unit = m.group(2).lower()
        if unit in _UNIT_SECONDS:
            return to_ms(now + timedelta(seconds=int(m.group(1)) * _UNIT_SECONDS[unit]))
        raise TtlError(f"unknown TTL unit {m.group(2)!r}")
    shorthand = iso_duration_to_shorthand(text)
    if shorthand is not None:
        raise TtlError("ISO-8601 durations are not accepted as ttl", suggested=shorthand)
    try:
        return parse_iso(text)
    except (ValueError, OverflowError):
        raise TtlError("ttl is neither a duration shorthand nor an ISO 8601 date/datetime") from None
