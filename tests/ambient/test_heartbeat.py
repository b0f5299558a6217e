"""`fleetmem heartbeat`: one delta wake per call, with the catch-up for an expired session cursor,
against `fleetmem serve` over HTTP and against the local data directory."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fleetmem.hooks.heartbeat import looks_established
from fleetmem.profiles import write_private_json
from tests.ambient.conftest import Served
from tests.cli.conftest import Fleetmem


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def remote(served: Served) -> list[str]:
    return ["--url", served.url, "--token-file", str(served.token_file)]


def page(fm: Fleetmem, served: Served, slug: str, title: str) -> None:
    r = fm("put-page", slug, *remote(served), stdin=f"---\ntitle: {title}\n---\n{title} body.\n", data_dir=False)
    assert r.code == 0, r.stderr


def state(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "state" / "heartbeat.json").read_text())["entries"]


def test_first_wake_sets_the_cursor_and_the_next_wake_delivers_changes(fmx: Fleetmem, served: Served) -> None:
    first = fmx("heartbeat", "--session-id", "hb-basic", "--json", *remote(served), data_dir=False)
    assert first.code == 0, first.stderr
    doc = first.json()
    assert doc["established"] is False and doc["catch_up"] is None  # no last-seen time to catch up from
    assert doc["delta"]["pages"] == [] and "<fleetmem-delta>" in doc["text"]

    page(fmx, served, "notes/hb-basic", "HB Basic Note")
    second = fmx("heartbeat", "--session-id", "hb-basic", *remote(served), data_dir=False)
    assert second.code == 0
    assert "HB Basic Note (notes/hb-basic)" in second.stdout


def test_an_expired_session_catches_up_from_the_last_seen_time(fmx: Fleetmem, served: Served, tmp_path: Path) -> None:
    # The state says this session last woke 8 days ago; the server has no cursor for it any more
    # (expired), so its wake re-establishes at now and would skip what changed meanwhile.
    last_seen = datetime.now(UTC) - timedelta(seconds=1)
    key = f"{served.url}|hb-expired"
    write_private_json(
        tmp_path / "state" / "heartbeat.json",
        {
            "entries": {
                key: {
                    "last_seen": iso(last_seen),
                    "last_slug": "",
                    "exact": False,
                    "last_wake_at": iso(datetime.now(UTC) - timedelta(days=8)),
                    "updated_at": iso(last_seen),
                }
            }
        },
    )
    page(fmx, served, "notes/hb-missed", "HB Missed While Asleep")

    r = fmx("heartbeat", "--session-id", "hb-expired", "--json", *remote(served), data_dir=False)
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["established"] is True
    assert doc["delta"]["pages"] == []  # the session wake itself delivers nothing
    assert "notes/hb-missed" in [p["slug"] for p in doc["catch_up"]["pages"]]
    assert doc["text"].index("HB Missed While Asleep") < doc["text"].rindex("<fleetmem-delta>")

    again = fmx("heartbeat", "--session-id", "hb-expired", "--json", *remote(served), data_dir=False).json()
    assert again["established"] is False and again["catch_up"] is None


def test_a_catch_up_larger_than_the_budget_resumes_on_the_next_wakes(
    fmx: Fleetmem, served: Served, tmp_path: Path
) -> None:
    last_seen = datetime.now(UTC) - timedelta(seconds=1)
    key = f"{served.url}|hb-drain"
    write_private_json(
        tmp_path / "state" / "heartbeat.json",
        {
            "entries": {
                key: {
                    "last_seen": iso(last_seen),
                    "last_slug": "",
                    "exact": False,
                    "last_wake_at": iso(datetime.now(UTC) - timedelta(days=9)),
                    "updated_at": iso(last_seen),
                }
            }
        },
    )
    for i in (1, 2, 3):
        page(fmx, served, f"notes/hb-drain-{i}", f"HB Drain {i}")
    seen: list[str] = []
    for _ in range(10):  # a page or two fit the budget per wake (other tests' recent pages may come first)
        doc = fmx(
            "heartbeat", "--session-id", "hb-drain", "--budget-tokens", "110", "--json", *remote(served), data_dir=False
        ).json()
        assert doc["catch_up"] is not None
        seen += [p["slug"] for p in doc["catch_up"]["pages"]]
        if not doc["catch_up"]["has_more"]:
            break
    assert [s for s in seen if s.startswith("notes/hb-drain-")] == [f"notes/hb-drain-{i}" for i in (1, 2, 3)]
    assert state(tmp_path)[key]["catch_up"] is None  # drained
    done = fmx("heartbeat", "--session-id", "hb-drain", "--json", *remote(served), data_dir=False).json()
    assert done["catch_up"] is None


def test_repeated_wakes_on_the_local_lane_keep_state_per_lane(fm_local: Fleetmem, tmp_path: Path) -> None:
    for _ in range(2):
        r = fm_local("heartbeat", "--session-id", "hb-quiet", "--json")
        assert r.code == 0, r.stderr
        assert r.json()["catch_up"] is None
    keys = list(state(tmp_path))
    assert len(keys) == 1 and keys[0].startswith("local:") and keys[0].endswith("|hb-quiet")


def body(since: datetime, **extra: object) -> dict:
    return {
        "since": iso(since),
        "pages": [],
        "facts": [],
        "threads": [],
        "has_more": False,
        "next_cursor": {"since": iso(since), "slug": ""},
        **extra,
    }


def test_what_counts_as_a_freshly_established_cursor() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    seen = now - timedelta(minutes=10)
    quiet = {"last_seen": iso(seen), "exact": False, "last_wake_at": iso(now - timedelta(minutes=5))}
    exact = {**quiet, "exact": True}
    stale = {**quiet, "last_wake_at": iso(now - timedelta(days=8))}
    # after a quiet wake the server moved its cursor to "then - 2 s", which is later than last-seen:
    assert looks_established(body(now - timedelta(minutes=5)), quiet, now) is False
    # last-seen was the server's exact cursor, so a later empty cursor is a new one (evicted/expired)
    assert looks_established(body(now), exact, now) is True
    assert looks_established(body(now), stale, now) is True  # a week asleep: the cursor has expired
    assert looks_established(body(seen), exact, now) is False  # the cursor is where we left it
    assert looks_established(body(now, pages=[{"slug": "a"}]), stale, now) is False
    assert looks_established(body(now, has_more=True), stale, now) is False
    assert looks_established(body(now), None, now) is False  # no state: nothing to catch up from


def test_heartbeat_errors_keep_the_envelope_and_exit_code(fm_local: Fleetmem) -> None:
    r = fm_local("heartbeat", "--session-id", "hb-bad", "--budget-tokens", "0", "--json")
    assert r.code == 2
    assert r.json()["code"] == "invalid_params"
