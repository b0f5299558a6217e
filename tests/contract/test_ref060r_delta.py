"""Reference 0.60 reads, delta (docs/protocol.md D33) on both adapter sets: SQLite, and DynamoDB
Local + the real OpenSearch node (tests/unit/domain/delta_backends.py). Nothing is mocked.

The opaque `cursor` (`next_cursor.cursor` passed back) resumes exactly on both arms while writes
interleave with the wakes (late commits of earlier-stamped writes included, the shape of the D14
at-least-once tests); `cursor_arms` is the audit trail of each arm; a bad or contradictory cursor is
`invalid_params` with a fix; a cursor read by another brain reads only that brain; a session's first
wake carries an `empty_retrieval` notice whose fix reads what came before it.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.errors import VerbError
from fleetmem.memory.verbs import delta, put_page
from fleetmem.models import Caller, Fact, Page
from fleetmem.ports import CallContext
from fleetmem.timefmt import iso, to_ms
from fleetmem.transport.dispatch import dispatch

CTX = CallContext("ref060r-delta")
EPOCH = "1970-01-01T00:00:00Z"


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(to_ms(datetime.now(UTC)))  # DynamoDB Local runs cursor TTLs on the wall clock


@pytest.fixture
def bdeps_clock(clock: FixedClock) -> FixedClock:
    return clock


@pytest.fixture
def bdeps_swap() -> dict[str, Any]:
    return {}  # no embedder


def _caller(d: Any, tenant: str | None = None) -> Caller:
    return Caller(tenant=tenant or d.test_tenant, client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)


def run(d: Any, caller: Caller | None = None, **args: Any) -> Any:
    return delta.run(d, caller or _caller(d), delta.DeltaParams.model_validate(args), CTX)


def wake(d: Any, caller: Caller | None = None, **args: Any) -> dict[str, Any]:
    return dict(run(d, caller, **args).body)


def refused(d: Any, **args: Any) -> VerbError:
    with pytest.raises(VerbError) as err:
        run(d, **args)
    return err.value


def stamped_page(d: Any, slug: str, at: datetime, tenant: str | None = None) -> None:
    """A page written straight to the store stamped `at` (a write stamped earlier can commit later)."""
    d.pages.put(Page(tenant=tenant or d.test_tenant, slug=slug, title=slug, created_at=at, updated_at=at, body="B."))


def stamped_fact(d: Any, text: str, at: datetime, tenant: str | None = None) -> None:
    tenant = tenant or d.test_tenant
    d.facts.put(
        Fact(
            tenant=tenant,
            fact_id=d.ids.new_id("f_"),
            seq=d.facts.next_seq(tenant),
            text=text,
            kind="fact",
            provenance="test",
            client_id="agent-a",
            created_at=at,
        )
    )


def cursor_of(body: dict[str, Any]) -> str:
    cursor = body["next_cursor"]["cursor"]
    assert isinstance(cursor, str) and cursor
    return cursor


def forged(**fields: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(fields).encode()).decode().rstrip("=")


def test_a_cursor_alone_resumes_exactly_on_both_arms_while_writes_interleave(bdeps, clock):
    """Every wake follows only next_cursor.cursor at a small budget; between wakes pages and facts
    are written, some stamped before items already delivered (late commits). Each is delivered
    exactly once: none twice, none lost."""
    written_pages: list[str] = []
    written_facts: list[str] = []
    got_pages: list[str] = []
    got_facts: list[str] = []
    body = wake(bdeps, since=EPOCH)
    for round_no in range(6):
        t_early = clock.now()
        clock.advance(seconds=1)
        for i in range(3):
            slug, text = f"notes/r{round_no}-p{i}", f"Fact {i} of round {round_no} about the cursor"
            stamped_page(bdeps, slug, clock.advance(milliseconds=3))
            stamped_fact(bdeps, text, clock.now())
            written_pages.append(slug)
            written_facts.append(text)
        # a late commit: stamped before the items above, committed after them
        stamped_page(bdeps, f"notes/r{round_no}-late", t_early)
        stamped_fact(bdeps, f"Late fact of round {round_no}", t_early)
        written_pages.append(f"notes/r{round_no}-late")
        written_facts.append(f"Late fact of round {round_no}")
        for _ in range(2):  # a couple of wakes per round, not always enough to drain
            body = wake(bdeps, cursor=cursor_of(body), budget_tokens=120)
            got_pages += [p["slug"] for p in body["pages"]]
            got_facts += [f["fact"] for f in body["facts"]]
    for _ in range(100):
        if not body["has_more"]:
            break
        body = wake(bdeps, cursor=cursor_of(body), budget_tokens=120)
        got_pages += [p["slug"] for p in body["pages"]]
        got_facts += [f["fact"] for f in body["facts"]]
    assert body["has_more"] is False
    assert sorted(got_pages) == sorted(written_pages)  # each exactly once
    assert sorted(got_facts) == sorted(written_facts)
    assert wake(bdeps, cursor=cursor_of(body))["pages"] == []


def test_a_session_answer_hands_over_to_its_cursor_without_a_gap_or_a_repeat(bdeps, clock):
    first = wake(bdeps, session_id="hb")
    stamped_page(bdeps, "notes/one", clock.advance(seconds=1))
    stamped_fact(bdeps, "Fact one", clock.now())
    by_session = wake(bdeps, session_id="hb")
    assert [p["slug"] for p in by_session["pages"]] == ["notes/one"]
    stamped_page(bdeps, "notes/two", clock.advance(seconds=1))
    stamped_fact(bdeps, "Fact two", clock.now())
    by_cursor = wake(bdeps, cursor=cursor_of(by_session))
    assert [p["slug"] for p in by_cursor["pages"]] == ["notes/two"]
    assert [f["fact"] for f in by_cursor["facts"]] == ["Fact two"]
    # the first wake's cursor reads both (it starts where the session started)
    from_start = wake(bdeps, cursor=cursor_of(first))
    assert [p["slug"] for p in from_start["pages"]] == ["notes/one", "notes/two"]


def test_cursor_arms_say_where_each_arm_started_and_where_it_resumes(bdeps, clock):
    body = wake(bdeps, since=EPOCH)
    stamped_page(bdeps, "notes/a", clock.advance(seconds=1))
    stamped_fact(bdeps, "Fact a", clock.now())
    nxt = wake(bdeps, cursor=cursor_of(body))
    arms = nxt["cursor_arms"]
    assert arms["pages"]["start"] == body["cursor_arms"]["pages"]["next"]
    assert arms["facts"]["start"] == body["cursor_arms"]["facts"]["next"]
    assert arms["pages"]["next"] == {
        "since": nxt["next_cursor"]["since"],
        "slug": "notes/a",
        "seq": nxt["next_cursor"]["page_seq"],
    }
    fact = nxt["facts"][0]
    assert arms["facts"]["next"] == {
        "since": fact["created_at"],
        "id": fact["id"],
        "seq": nxt["next_cursor"]["fact_seq"],
    }
    assert arms["pages"]["next"]["seq"] > arms["pages"]["start"]["seq"]
    assert isinstance(nxt["next_cursor"]["since"], str)


def test_since_given_with_a_cursor_replaces_its_positions_on_both_arms(bdeps, clock):
    t0 = clock.now()
    stamped_page(bdeps, "notes/old", clock.advance(seconds=1))
    stamped_fact(bdeps, "Old fact", clock.now())
    caught_up = wake(bdeps, since=EPOCH)
    assert [p["slug"] for p in caught_up["pages"]] == ["notes/old"]
    replayed = wake(bdeps, cursor=cursor_of(caught_up), since=iso(t0))
    assert [p["slug"] for p in replayed["pages"]] == ["notes/old"]
    assert [f["fact"] for f in replayed["facts"]] == ["Old fact"]
    assert wake(bdeps, cursor=cursor_of(caught_up))["pages"] == []


@pytest.mark.parametrize(
    "cursor",
    [
        "not a cursor",
        "%%%",
        forged(v=2, s="2026-01-01T00:00:00.000Z", l="", p=1, f=1, e=None),
        forged(v=1, s="0000-01-01T00:00:00Z", l="", p=1, f=1, e=None),
        forged(v=1, s="2026-01-01T00:00:00.000Z", l="", p=-1, f=1, e=None),
        forged(v=1, s="2026-01-01T00:00:00.000Z", l="", p=2**60, f=1, e=None),
        forged(v=1, s="2026-01-01T00:00:00.000Z", l="", p=1, f="3", e=None),
        forged(v=1, s="2026-01-01T00:00:00.000Z", l="", p=1, f=1, e="yesterday"),
        "x" * 5000,
    ],
    ids=["text", "not-base64", "version-2", "year-0", "negative", "past-2^53", "string-seq", "bad-expiry", "huge"],
)
def test_a_bad_cursor_is_invalid_params_with_a_stateless_fix(bdeps, cursor):
    good = cursor_of(wake(bdeps, since=EPOCH))
    assert wake(bdeps, cursor=good, budget_tokens=300)["has_more"] is False  # a good one is a whole call
    err = refused(bdeps, cursor=cursor, budget_tokens=300)
    assert err.code == "invalid_params" and "cursor" in err.message
    args = err.fix.mcp["arguments"]
    assert "cursor" not in args and args["budget_tokens"] == 300 and "since" in args
    assert wake(bdeps, **args)["has_more"] is False  # the fix runs


def test_a_bad_cursor_beside_a_session_is_refused_and_the_fix_keeps_the_session(bdeps):
    err = refused(bdeps, cursor="garbage", session_id="hb")
    assert err.code == "invalid_params"
    assert err.fix.mcp["arguments"] == {"session_id": "hb"}


def test_a_cursor_beside_since_positions_without_since_is_refused_as_contradictory(bdeps):
    cursor = cursor_of(wake(bdeps, since=EPOCH))
    err = refused(bdeps, cursor=cursor, since_page_seq=3, since_slug="a")
    assert err.code == "invalid_params"
    assert err.fix.mcp["arguments"] == {"cursor": cursor}


def test_a_cursor_from_another_brain_reads_only_the_callers_brain(bdeps, clock):
    other = "t-" + uuid.uuid4().hex[:12]
    for i in range(3):
        stamped_page(bdeps, f"secret/p{i}", clock.advance(seconds=1), tenant=other)
        stamped_fact(bdeps, f"Secret fact {i}", clock.now(), tenant=other)
    foreign = wake(bdeps, _caller(bdeps, other), since=EPOCH)
    assert len(foreign["pages"]) == 3
    stamped_page(bdeps, "notes/mine", clock.advance(seconds=1))
    mine = wake(bdeps, cursor=cursor_of(foreign))
    # what the answer lists comes from the caller's brain only (the cursor's own positions are echoed
    # back in next_cursor/cursor_arms: they are the caller's input, not the other brain's data)
    listed = json.dumps({k: mine[k] for k in ("pages", "facts", "retracted", "threads", "text")})
    assert "secret" not in listed.lower()
    assert [p["slug"] for p in mine["pages"]] in ([], ["notes/mine"])  # its own brain, by its own numbers
    assert all(f["fact"].startswith("Secret") is False for f in mine["facts"])


def test_a_first_wake_carries_an_empty_retrieval_notice_whose_fix_reads_what_came_before(bdeps, clock):
    stamped_page(bdeps, "notes/before", clock.now() - timedelta(hours=2))
    out = run(bdeps, session_id="hb", budget_tokens=400)
    assert out.body["pages"] == [] and out.body["has_more"] is False
    notices = [n for n in out.notices if n.code == "empty_retrieval"]
    assert len(notices) == 1 and notices[0].kind == "info"
    args = notices[0].fix.mcp["arguments"]
    assert "session_id" not in args and args["budget_tokens"] == 400
    assert [p["slug"] for p in wake(bdeps, **args)["pages"]] == ["notes/before"]
    # the second wake is not a first wake
    assert [n.code for n in run(bdeps, session_id="hb").notices] == []
    assert cursor_of(out.body)


def test_since_reads_years_1_to_9999_with_four_digits_and_refuses_any_other_without_a_crash(bdeps):
    for outside in ("0000-01-01", "10000-01-01T00:00:00Z", "0001-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00"):
        result = dispatch("delta", {"since": outside}, _caller(bdeps), bdeps)
        assert result.is_error and result.body["code"] == "invalid_params", outside
    assert wake(bdeps, since="0001-01-01")["since"] == "0001-01-01T00:00:00.000Z"
    last = wake(bdeps, since="9999-12-31T23:59:59.999Z")
    assert last["since"] == "9999-12-31T23:59:59.999Z"
    assert wake(bdeps, cursor=cursor_of(last))["since"] == last["next_cursor"]["since"]


def test_put_page_still_delivers_through_a_cursor_on_the_verb_path(bdeps, clock):
    first = wake(bdeps, since=EPOCH)
    put_page.run(bdeps, _caller(bdeps), put_page.PutPageParams(slug="notes/verb", content="Body."), CTX)
    assert [p["slug"] for p in wake(bdeps, cursor=cursor_of(first))["pages"]] == ["notes/verb"]
