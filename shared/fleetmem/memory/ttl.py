"""TTL grammar for `remember` (docs/protocol.md, remember; D5), and the one error a bad TTL gets.

Public API:
- `parse_ttl(value: str | None, now: datetime) -> datetime | None`: the absolute expiry instant.
  `None` / `""` (after trimming) -> None (never expires; remember refuses a ttl of invisible
  characters only before it gets here, `RememberParams`). Shorthand `N<unit>` with N a
  non-negative integer and unit s|sec|second(s), m|min|minute(s) (m is MINUTES), h|hr|hour(s),
  d|day(s), w|week(s), case-insensitive, optional space ("30d", "12 h", "2 weeks") -> now + N
  units. Otherwise an absolute ISO 8601 date or datetime (past instants accepted; naive means UTC).
  Anything else raises `TtlInvalid` (an `invalid_params` VerbError) built by `ttl_error`. Digits are
  ASCII only (D18: "٣d" is refused, its fix the same ttl in ASCII digits); a duration is at most
  `MAX_TTL_DAYS` days (100 years; longer is refused as too large, never as "not a duration").
- `ttl_error(value) -> TtlInvalid`: the envelope-ready error for a TTL that does not parse. Its fix
  is `run` ONLY when the correction keeps the caller's meaning (AGENT_OPERATOR: the same call with
  the bad argument fixed): an ISO-8601 duration ("P30D" -> "30d"), years and months ("1y" ->
  "365d", "2 months" -> "60d"; 365/30 days, the conventional reading ISO durations get too), a
  fraction that is a whole number of a smaller unit ("1.5h" -> "90m"), and "forever"/"never"/
  "permanent" (-> the same call without `ttl`, which never expires), and digits of another script
  ("٣d" -> "3d"). A negative duration ("-5m"), a duration over the maximum,
  an unknown unit or free text has no meaning-keeping correction: the fix has no step
  (`next: report`) and says what to send instead — it never guesses "30d".
- `suggest_ttl(value) -> str | None`: the corrected ttl for the run-fix cases ("" = leave ttl
  out), None when there is none.
- `TtlError(ValueError)`: kept for callers that catch it; `.suggested` as `suggest_ttl`.
- `iso_duration_to_shorthand(text) -> str | None`: "P1DT12H" -> "36h"; None when not a duration.

`TtlInvalid` is deliberately not a `TtlError`: `parse_ttl` raises the complete error (message,
suggestion, fix) so every caller answers a bad TTL the same way.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime, timedelta
from fractions import Fraction

from fleetmem.errors import Fix, VerbError
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
#: Units remember does not take, with the conventional length their correction uses.
_CALENDAR_SECONDS = {
    "y": 365 * 86400,
    "yr": 365 * 86400,
    "yrs": 365 * 86400,
    "year": 365 * 86400,
    "years": 365 * 86400,
    "mo": 30 * 86400,
    "mos": 30 * 86400,
    "mon": 30 * 86400,
    "month": 30 * 86400,
    "months": 30 * 86400,
}
#: Words that mean "never expires": the corrected call leaves ttl out.
_FOREVER = frozenset(
    {
        "forever",
        "never",
        "none",
        "null",
        "permanent",
        "permanently",
        "infinite",
        "infinity",
        "inf",
        "indefinite",
        "indefinitely",
        "no expiry",
        "no expiration",
        "unlimited",
    }
)
#: D18: ASCII digits only (`\d` and `int()` would also read "٣" as 3). A run of digits is capped so
#: no number is ever converted from an arbitrarily long text; a longer one is too large anyway.
_DIGITS = 30
_SHORTHAND = re.compile(rf"^([0-9]{{1,{_DIGITS}}})\s*([a-z]+)$", re.I | re.ASCII)
_NUMBER_UNIT = re.compile(rf"^([+-]?)\s*([0-9]{{0,{_DIGITS}}}(?:\.[0-9]{{1,{_DIGITS}}})?)\s*([a-z]+)$", re.I | re.ASCII)
_ISO_DURATION = re.compile(
    rf"^P(?:([0-9]{{1,{_DIGITS}}})Y)?(?:([0-9]{{1,{_DIGITS}}})M)?(?:([0-9]{{1,{_DIGITS}}})W)?"
    rf"(?:([0-9]{{1,{_DIGITS}}})D)?(?:T(?:([0-9]{{1,{_DIGITS}}})H)?(?:([0-9]{{1,{_DIGITS}}})M)?"
    rf"(?:([0-9]{{1,{_DIGITS}}})S)?)?$",
    re.I | re.ASCII,
)
_LONG_NUMBER_UNIT = re.compile(rf"^\+?\s*[0-9]{{{_DIGITS + 1},}}(?:\.[0-9]+)?\s*([a-z]+)$", re.I | re.ASCII)
#: The longest duration a ttl may give: 100 years. (An absolute date may go to 9999-12-31.)
MAX_TTL_DAYS = 36500
MAX_TTL_SECONDS = MAX_TTL_DAYS * 86400
_ACCEPTED = 'N + unit (s, m = minutes, h, d, w; e.g. "30d", "12h") or an ISO 8601 date/datetime'


class TtlError(ValueError):
    def __init__(self, message: str, suggested: str | None = None) -> None:
        super().__init__(message)
        self.suggested = suggested


class TtlInvalid(VerbError):
    """`invalid_params` for a ttl that does not parse (see `ttl_error`)."""


def _shorthand_for_seconds(total: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if total and total % size == 0:
            return f"{total // size}{unit}"
    return f"{total}s"


def _iso_duration_seconds(text: str) -> int | None:
    m = _ISO_DURATION.match(text.strip())
    if not m or not any(m.groups()) or text.strip().upper().endswith("T"):
        return None
    y, mo, w, d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    # Calendar units have no fixed length; 365/30 days is the conventional reading.
    return ((y * 365 + mo * 30 + w * 7 + d) * 86400) + h * 3600 + mi * 60 + s


def iso_duration_to_shorthand(text: str) -> str | None:
    total = _iso_duration_seconds(text)
    return None if total is None else _shorthand_for_seconds(total)


def _duration_seconds(text: str) -> Fraction | None:
    """How long a positive duration-shaped ttl is (ISO 8601, or N + a known or calendar unit); None
    when the text is no such duration (or a negative one)."""
    iso = _iso_duration_seconds(text)
    if iso is not None:
        return Fraction(iso)
    flat = " ".join(text.split()).lower()
    long = _LONG_NUMBER_UNIT.match(flat)
    if long and (long.group(1) in _UNIT_SECONDS or long.group(1) in _CALENDAR_SECONDS):
        return Fraction(MAX_TTL_SECONDS + 1)  # more digits than any duration up to the maximum has
    parsed = _number_unit(flat)
    if parsed is None or parsed[0] == "-":
        return None
    size = _UNIT_SECONDS.get(parsed[2]) or _CALENDAR_SECONDS.get(parsed[2])
    return None if size is None else parsed[1] * size


def _ascii_digits(text: str) -> str | None:
    """`text` with decimal digits of any script as ASCII digits, or None when it has none."""
    if not any(ch.isdecimal() and not ch.isascii() for ch in text):
        return None
    return "".join(str(unicodedata.decimal(ch)) if ch.isdecimal() else ch for ch in text)


def _number_unit(text: str) -> tuple[str, Fraction, str] | None:
    """(sign, amount, unit) of "-5m", "1.5 h", "2years"; None when the text is not N + word."""
    m = _NUMBER_UNIT.match(text)
    if not m or not m.group(2) or m.group(2) == ".":
        return None
    return m.group(1), Fraction(m.group(2)), m.group(3).lower()


def suggest_ttl(value: str) -> str | None:
    """The meaning-keeping correction of an unparseable ttl ("" = leave ttl out), else None."""
    text = " ".join(value.split()).lower()
    if text in _FOREVER:
        return ""
    seconds = _duration_seconds(text)
    if seconds is not None and seconds > MAX_TTL_SECONDS:
        return None  # too large: no duration means the same
    iso = iso_duration_to_shorthand(text)
    if iso is not None:
        return iso
    parsed = _number_unit(text)
    if parsed is None:
        return None
    sign, amount, unit = parsed
    size = _UNIT_SECONDS.get(unit) or _CALENDAR_SECONDS.get(unit)
    if sign == "-" or size is None:
        return None
    seconds = amount * size
    if seconds.denominator != 1:
        return None  # not a whole number of seconds: nothing exact to offer
    return _shorthand_for_seconds(int(seconds))


def ttl_error(value: str) -> TtlInvalid:
    """The error for a ttl `parse_ttl` cannot read; a run-fix only when it keeps the meaning."""
    text = value.strip()
    ascii_text = _ascii_digits(text)
    if ascii_text is not None:
        return _non_ascii_digits(value, ascii_text)
    seconds = _duration_seconds(text)
    if seconds is not None and seconds > MAX_TTL_SECONDS:
        return _too_large(value)
    suggested = suggest_ttl(text)
    parsed = _number_unit(" ".join(text.split()).lower())
    if suggested == "":
        return TtlInvalid(
            "invalid_params",
            f"ttl {value!r} is not a duration.",
            f"ttl={value!r} is not a duration. Cause: a fact saved without ttl never expires. "
            "Fix: call remember again without `ttl`, keeping the other arguments.",
            why="A fact without ttl never expires, which is what this ttl asks for.",
            fix=Fix(why="The same call without ttl: the fact never expires.", drop=("ttl",)),
            klass="caller",
        )
    if suggested is not None:
        return _restated(value, text, suggested, parsed)
    return _unreadable(value, parsed)


def _restated(value: str, text: str, suggested: str, parsed: tuple[str, Fraction, str] | None) -> TtlInvalid:
    """A ttl with a form remember does not take but one meaning: the fix is that meaning restated."""
    if iso_duration_to_shorthand(text) is not None:
        message = f"ttl {value!r} is an ISO-8601 duration, which remember does not accept."
        cause = f'ttl takes the shorthand form; {value!r} is written "{suggested}".'
    elif parsed is not None and parsed[2] in _CALENDAR_SECONDS:
        message = f"ttl {value!r} uses a calendar unit, which remember does not accept."
        cause = (
            f'ttl units are s, m (minutes), h, d and w; {value!r} is written "{suggested}" '
            "(a year is 365 days, a month 30)."
        )
    else:
        message = f"ttl {value!r} is not a whole number of units."
        cause = f'ttl takes whole numbers; {value!r} is exactly "{suggested}".'
    return TtlInvalid(
        "invalid_params",
        message,
        f"ttl={value!r} is not in the accepted form. Cause: {cause} Fix: pass `ttl` as "
        f'"{suggested}", keeping the other arguments.',
        why=cause,
        fix=Fix(why=f'The same call with ttl "{suggested}", which means the same duration.', amend={"ttl": suggested}),
        klass="caller",
    )


def _unreadable(value: str, parsed: tuple[str, Fraction, str] | None) -> TtlInvalid:
    """A ttl of no duration remember could restate: no corrected call keeps its meaning."""
    if parsed is not None and parsed[0] == "-":
        problem = f"ttl {value!r} is negative."
        cause = "ttl is how long the fact stays valid from now, so it cannot be negative."
    else:
        problem = f"ttl {value!r} is not a duration or an ISO 8601 date."
        cause = f"ttl is {_ACCEPTED}."
    instead = (
        "No corrected call keeps your meaning, so none is offered: send the ttl you intended as a "
        'positive duration ("45m", "30d") or an ISO 8601 date, leave ttl out for a fact that never '
        "expires, or call forget to end a fact that is no longer true."
    )
    return TtlInvalid(
        "invalid_params",
        problem,
        f"{problem} Cause: {cause} Fix: {instead}",
        why=cause,
        fix=Fix(why=instead),
        klass="caller",
    )


def _non_ascii_digits(value: str, ascii_text: str) -> TtlInvalid:
    problem = f"ttl {value!r} is written with digits other than ASCII 0-9."
    try:
        parse_ttl(ascii_text, datetime(2000, 1, 1))
    except TtlInvalid:
        fixable = False
    else:
        fixable = True
    cause = "ttl numbers are written with the ASCII digits 0-9 only."
    if fixable:
        return TtlInvalid(
            "invalid_params",
            problem,
            f"{problem} Cause: {cause} Fix: pass `ttl` as {ascii_text!r}, keeping the other arguments.",
            why=f"{cause} {ascii_text!r} is the same ttl in ASCII digits.",
            fix=Fix(
                why=f"The same call with ttl {ascii_text!r}: the same number in ASCII digits.",
                amend={"ttl": ascii_text},
            ),
            klass="caller",
        )
    instead = 'send the ttl in ASCII digits with its unit, e.g. "30d", or an ISO 8601 date.'
    return TtlInvalid(
        "invalid_params",
        problem,
        f"{problem} Cause: {cause} Fix: {instead}",
        why=f"{cause} {instead}",
        fix=Fix(why=f"{cause} No corrected call keeps your meaning: {instead}"),
        klass="caller",
    )


def _too_large(value: str) -> TtlInvalid:
    problem = f"ttl {value!r} is too large: the longest ttl is {MAX_TTL_DAYS}d ({MAX_TTL_DAYS // 365} years)."
    cause = f"a ttl duration is at most {MAX_TTL_DAYS} days; an absolute ISO 8601 date may go up to 9999-12-31."
    instead = (
        "leave ttl out for a fact that never expires, or send a duration of at most "
        f"{MAX_TTL_DAYS}d (or the ISO 8601 date it ends). No corrected call is offered: which of these "
        "you meant is yours to say."
    )
    return TtlInvalid(
        "invalid_params",
        problem,
        f"{problem} Cause: {cause} Fix: {instead}",
        why=f"{problem} {instead[0].upper()}{instead[1:]}",
        detail={"max_ttl": f"{MAX_TTL_DAYS}d"},
        fix=Fix(why=f"{problem} {instead[0].upper()}{instead[1:]}"),
        klass="caller",
    )


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
            seconds = int(m.group(1)) * _UNIT_SECONDS[unit]
            if seconds > MAX_TTL_SECONDS:
                raise _too_large(value)
            return to_ms(now + timedelta(seconds=seconds))
        raise ttl_error(value)
    if iso_duration_to_shorthand(text) is not None:
        raise ttl_error(value)
    try:
        return parse_iso(text)
    except (ValueError, OverflowError):
        raise ttl_error(value) from None
