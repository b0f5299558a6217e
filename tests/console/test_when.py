"""How the console shows a time (`web.view.when`): relative within a week of now, the date beyond,
the exact time on hover and the ISO value kept for machines. No browser: the filter's output."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from fleetmem.web.view import when

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "shown", "exact"),
    [
        ("2026-12-06T11:59:30Z", "just now", "6 Dec 2026, 11:59:30 UTC"),
        ("2026-12-06T12:00:20Z", "in under a minute", "6 Dec 2026, 12:00:20 UTC"),
        ("2026-12-06T11:55:00Z", "5 min ago", "6 Dec 2026, 11:55:00 UTC"),
        ("2026-12-06T08:59:59.500Z", "3 h ago", "6 Dec 2026, 08:59:59 UTC"),
        ("2026-12-06T09:00:00.123Z", "2 h ago", "6 Dec 2026, 09:00:00 UTC"),  # 2 h 59 min: whole units
        ("2026-12-04T09:00:00Z", "2 d ago", "4 Dec 2026, 09:00:00 UTC"),
        ("2026-12-08T12:30:00Z", "in 2 d", "8 Dec 2026, 12:30:00 UTC"),
        ("2026-11-29T12:00:01Z", "6 d ago", "29 Nov 2026, 12:00:01 UTC"),
        ("2026-11-29T11:59:59Z", "29 Nov 2026", "29 Nov 2026, 11:59:59 UTC"),
        ("2025-01-02T03:04:05Z", "2 Jan 2025", "2 Jan 2025, 03:04:05 UTC"),
        # an offset is shown in UTC, as the hover says
        ("2026-12-06T13:00:00+02:00", "1 h ago", "6 Dec 2026, 11:00:00 UTC"),
    ],
)
def test_a_time_reads_relatively_within_a_week_and_keeps_the_exact_time_on_hover(
    value: str, shown: str, exact: str
) -> None:
    html = str(when(value, NOW))
    m = re.fullmatch(r'<time datetime="([^"]*)" title="([^"]*)">([^<]*)</time>', html)
    assert m is not None, html
    assert m.groups() == (value, exact, shown)


def test_a_date_alone_stays_a_date_and_what_is_not_a_time_is_shown_as_it_is() -> None:
    assert str(when("2026-12-06", NOW)) == '<time datetime="2026-12-06" title="6 Dec 2026">6 Dec 2026</time>'
    assert when("not a time <b>", NOW) == "not a time <b>"  # autoescaped by the template, as any text
    assert when("", NOW) == "" and when(None, NOW) == ""
