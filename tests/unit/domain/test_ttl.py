"""TTL grammar (PROTOCOL_NOTES §4, D5): shorthand, absolute ISO dates, ISO durations refused; a
bad ttl's fix is `run` only when the correction keeps the caller's meaning (issue 8 item 10)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetmem.memory.ttl import TtlInvalid, iso_duration_to_shorthand, parse_ttl, suggest_ttl
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.timefmt import iso
from fleetmem.transport.dispatch import dispatch

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
    with pytest.raises(TtlInvalid) as err:
        parse_ttl(value, NOW)
    assert err.value.code == "invalid_params"
    assert err.value.fix is not None and err.value.fix.amend == {"ttl": shorthand}
    assert iso_duration_to_shorthand(value) == shorthand


@pytest.mark.parametrize(
    ("value", "corrected"),
    [
        ("1y", "365d"),
        ("2 years", "730d"),
        ("1 yr", "365d"),
        ("1.5h", "90m"),
        ("0.5d", "12h"),
        ("2.5 days", "60h"),
        ("2 months", "60d"),
        ("P30D", "30d"),
        ("forever", ""),
        ("Never", ""),
        ("permanent", ""),
    ],
)
def test_a_ttl_with_a_meaning_keeping_correction_suggests_it(value, corrected):
    assert suggest_ttl(value) == corrected


@pytest.mark.parametrize(
    "value", ["soon", "30 fortnights", "P", "tomorrow", "-3d", "-5m", "- 5 m", "1.5s", "-1y", "5 parsecs"]
)
def test_a_ttl_without_a_meaning_keeping_correction_gets_no_guess(value):
    assert suggest_ttl(value) is None
    with pytest.raises(TtlInvalid) as err:
        parse_ttl(value, NOW)
    fix = err.value.fix
    assert fix is not None and fix.amend is None and not fix.drop and fix.mcp is None and not fix.argv


def test_a_negative_ttl_says_it_is_negative():
    with pytest.raises(TtlInvalid) as err:
        parse_ttl("-5m", NOW)
    assert "negative" in err.value.message
    assert "forget" in err.value.suggestion


# --- through the one dispatch: the rendered fix (AGENT_OPERATOR `next`) ------------------------


def _remember(deps: Deps, caller: Caller, **args: Any) -> dict[str, Any]:
    return dispatch("remember", args, caller, deps).body


@pytest.mark.parametrize(("ttl", "fixed"), [("1y", "365d"), ("1.5h", "90m"), ("P30D", "30d")])
def test_a_correctable_ttl_gets_a_run_fix_with_the_same_duration_and_the_other_arguments(
    deps: Deps, remote_caller: Caller, ttl: str, fixed: str
) -> None:
    args = {"fact": "Cache entry", "provenance": "p", "entity": "people/a", "kind": "preference", "ttl": ttl}
    body = _remember(deps, remote_caller, **args)
    assert body["code"] == "invalid_params"
    assert body["fix"]["next"] == "run"
    assert body["fix"]["mcp"] == {"tool": "remember", "arguments": {**args, "ttl": fixed}}
    # the corrected call works and means what was asked
    saved = _remember(deps, remote_caller, **body["fix"]["mcp"]["arguments"])
    assert saved["status"] == "inserted"
    assert saved["valid_until"] == iso(parse_ttl(fixed, deps.clock.now()))


def test_forever_gets_the_same_call_without_ttl(deps: Deps, remote_caller: Caller) -> None:
    args = {"fact": "Alice is the CTO", "provenance": "p", "ttl": "forever"}
    body = _remember(deps, remote_caller, **args)
    assert body["fix"]["next"] == "run"
    assert body["fix"]["mcp"] == {"tool": "remember", "arguments": {"fact": "Alice is the CTO", "provenance": "p"}}
    saved = _remember(deps, remote_caller, **body["fix"]["mcp"]["arguments"])
    assert saved["status"] == "inserted" and saved["valid_until"] is None


@pytest.mark.parametrize("ttl", ["-5m", "next tuesday", "30 fortnights"])
def test_a_ttl_without_a_correction_gets_a_fix_with_no_step(deps: Deps, remote_caller: Caller, ttl: str) -> None:
    body = _remember(deps, remote_caller, fact="x", provenance="p", ttl=ttl)
    assert body["code"] == "invalid_params"
    fix = body["fix"]
    assert fix["next"] == "report"
    assert "mcp" not in fix and "argv" not in fix
    assert fix["why"]
    assert "Next:" not in body["suggestion"]
