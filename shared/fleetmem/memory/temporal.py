"""Dates in text, for ranking: absolute dates a query or a stored text names, and the days a stored
text's relative expressions ("yesterday", "two days ago", "last Saturday") point at, resolved
against the text's own date.

Public API:
- `dates_in(text) -> list[Day]`: absolute dates written in `text`, in order ("2026-03-14",
  "14 March 2026", "March 14, 2026", "14 Mar", "March 14"); a date without a year has `year=None`.
- `date_words(text) -> set[str]`: the words that write those dates, lower-cased.
- `Day`: (year | None, month, day); `Day.matches(d: date) -> bool`.
- `written_day(text) -> date | None`: the first full date in the first WRITTEN_SCAN characters of
  `text` (the day it was written).
- `mentioned_days(text) -> frozenset[date]`: the days a stored text is about — its first full date (the
  day it was written) and every day its relative expressions point to from that date.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from functools import lru_cache
from typing import NamedTuple

_MONTHS = {
    m: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for m in names
}
#: Every spelling of a month `dates_in` reads ("march", "mar", ...).
MONTH_NAMES = frozenset(_MONTHS)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
# A month is any 3-9 letter word checked against _MONTHS afterwards: a case-insensitive
# alternation of month names tried at every word is several times slower.
_DAY_MONTH = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([A-Za-z]{3,9})\b\.?(?:,?\s+(\d{4})\b)?")
_MONTH_DAY = re.compile(r"\b([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(\d{4})\b)?")
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "a": 1, "an": 1}
_DAYS_AGO = re.compile(r"\b(\d|one|two|three|four|five|six|a|an)\s+days?\s+ago\b", re.I)
_WEEKDAY_REF = re.compile(r"\b(?:last|on|this\s+past)\s+(" + "|".join(_WEEKDAYS) + r")\b", re.I)


_DIGIT = re.compile(r"\d")
#: A stored text's own date is the first full date in its opening (a page chunk's title line, a
#: fact's date prefix); later dates in a long chunk are what it talks about, not when it was written.
WRITTEN_SCAN = 200
#: Parsed stored texts kept per process (a tenant's hits recur across queries; ~1 KB each).
CACHE_SIZE = 4096


class Day(NamedTuple):
    year: int | None
    month: int
    day: int

    def matches(self, d: date) -> bool:
        return d.month == self.month and d.day == self.day and (self.year is None or self.year == d.year)

    def as_date(self) -> date | None:
        if self.year is None:
            return None
        try:
            return date(self.year, self.month, self.day)
        except ValueError:
            return None


def dates_in(text: str) -> list[Day]:
    return [d for _, d in _found(text)]


def date_words(text: str) -> set[str]:
    """The words (lower-cased) that write the dates `dates_in` finds ("30 August 2026" -> {"30",
    "august", "2026"})."""
    return {w.lower() for m, _ in _found(text) for w in _WORD.findall(m[0])}


_WORD = re.compile(r"\w+")


def _found(text: str) -> list[tuple[re.Match[str], Day]]:
    """Each date written in `text` with its match, in order."""
    if not _DIGIT.search(text):
        return []
    found: list[tuple[re.Match[str], Day]] = []
    for m in _ISO.finditer(text):
        found.append((m, Day(int(m[1]), int(m[2]), int(m[3]))))
    for m in _DAY_MONTH.finditer(text):
        if (month := _MONTHS.get(m[2].lower())) is not None:
            found.append((m, Day(int(m[3]) if m[3] else None, month, int(m[1]))))
    for m in _MONTH_DAY.finditer(text):
        if (month := _MONTHS.get(m[1].lower())) is not None:
            found.append((m, Day(int(m[3]) if m[3] else None, month, int(m[2]))))
    return [(m, d) for m, d in sorted(found, key=lambda e: e[0].start()) if 1 <= d.day <= 31]


@lru_cache(maxsize=CACHE_SIZE)
def written_day(text: str) -> date | None:
    return next((d.as_date() for d in dates_in(text[:WRITTEN_SCAN]) if d.as_date() is not None), None)


@lru_cache(maxsize=CACHE_SIZE)
def mentioned_days(text: str) -> frozenset[date]:
    written = written_day(text)
    if written is None:
        return frozenset()
    days = {written}
    low = text.casefold()
    if "yesterday" in low and re.search(r"\byesterday\b", low):
        days.add(written - timedelta(days=1))
    for m in _DAYS_AGO.finditer(low) if " ago" in low else ():
        n = int(m[1]) if m[1].isdigit() else _NUMBERS[m[1]]
        days.add(written - timedelta(days=n))
    for m in _WEEKDAY_REF.finditer(low) if "day" in low else ():
        back = (written.weekday() - _WEEKDAYS.index(m[1])) % 7 or 7
        days.add(written - timedelta(days=back))
    return frozenset(days)
