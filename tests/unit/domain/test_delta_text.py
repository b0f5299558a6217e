"""delta's `text` and its JSON agree (D14, D16): every item a wake delivers is shown in that wake's
text (cut the same way when `truncated`; below the text's frame, the one item cut to the budget
is the whole text), no position passes an item the text left out, and a
follower of `next_cursor` gets every fact exactly once — whatever the budget.

A follower here is a heartbeat loop: it wakes a session with its budget and, when a wake delivers
nothing and its `delta_incomplete` notice names a budget that shows the oldest pending change, runs
the notice's fix as given. The property runs on in-memory SQLite over budgets 1…4,000 and facts up
to FACT_MAX characters; one deterministic case runs on SQLite and the AWS set (DynamoDB Local +
the OpenSearch node).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.unit.domain.delta_backends import BACKENDS, open_deps

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.memory.budget import cost
from fleetmem.memory.verbs import delta, put_page, remember
from fleetmem.models import Caller
from fleetmem.ports import CallContext, Deps
from fleetmem.protocol import FACT_MAX, TITLE_MAX
from fleetmem.timefmt import to_ms

CTX = CallContext("t")
WORDS = "ledger refund invoice runbook staging quorum latency rollout canary pager".split()


def _filler(n: int, length: int) -> str:
    """A fact of exactly `length` characters that starts with its own number (so no two are alike)."""
    head = f"fact {n}: "
    body = " ".join(WORDS[(n + i) % len(WORDS)] for i in range(length))
    return (head + body)[:length] if length > len(head) else head[:length]


def _folded(text: str) -> str:
    """Text as the block shows it: whitespace runs folded to one space."""
    return " ".join(text.split())


def write_fact(deps: Deps, caller: Caller, n: int, length: int, entity: str | None) -> None:
    remember.run(
        deps,
        caller,
        remember.RememberParams(fact=_filler(n, length), provenance="test", entity=entity),
        CTX,
    )


def write_page(deps: Deps, caller: Caller, n: int, title_len: int) -> None:
    title = (f"Page {n} " + "x" * TITLE_MAX)[:title_len]
    put_page.run(deps, caller, put_page.PutPageParams(slug=f"notes/page-{n}", title=title, content="Body."), CTX)


def _budget_fix(body_notices: list[Any], budget: int) -> int | None:
    """The budget a `delta_incomplete` notice's fix runs the same call with, if it names one."""
    for notice in body_notices:
        if notice.code == "delta_incomplete" and notice.fix and notice.fix.mcp:
            fixed = notice.fix.mcp["arguments"].get("budget_tokens")
            if isinstance(fixed, int) and fixed > budget:
                return fixed
    return None


class Follower:
    """A heartbeat loop over one session, checking every wake."""

    def __init__(self, deps: Deps, caller: Caller, clock: FixedClock, budget: int) -> None:
        self.deps, self.caller, self.clock, self.budget = deps, caller, clock, budget
        self.delivered: list[str] = []
        self.pages: list[str] = []
        self.wake()  # the first wake only establishes the cursor

    def _call(self, budget: int) -> tuple[dict, list[Any]]:
        out = delta.run(self.deps, self.caller, delta.DeltaParams(session_id="hb", budget_tokens=budget), CTX)
        return out.body, out.notices

    def wake(self) -> dict:
        self.clock.advance(seconds=3)
        budget = self.budget
        body, notices = self._call(budget)
        fixed = _budget_fix(notices, budget)
        if fixed is not None:
            assert not body["facts"] and not body["pages"] and body["has_more"]
            budget = fixed
            body, notices = self._call(budget)
        self.check(body, budget)
        return body

    def check(self, body: dict, budget: int) -> None:
        text = body["text"]
        assert cost(text) <= budget and body["budget_used"] == cost(text) <= budget
        if text and not text.startswith("<fleetmem-delta>"):
            # below the frame (D14): one item, cut to the budget, its text the cut content alone
            [item] = body["pages"] + body["facts"]
            shown = _folded(item["fact"]) if "fact" in item else f"{_folded(item['title'])} {item['slug']}".strip()
            assert text == shown, (item, text)
            self.delivered += [f["fact_id"] for f in body["facts"]]
            self.pages += [p["slug"] for p in body["pages"]]
            return
        lines = text.splitlines()
        for page in body["pages"]:  # shown, cut as the JSON cuts it
            assert f"- {_folded(page['title'])} ({page['slug']}) at {page['updated_at']}" in lines, (page, text)
        for fact in body["facts"]:
            assert any(line.startswith("- (") and line.endswith(f") {_folded(fact['fact'])}") for line in lines), (
                fact,
                text,
            )
        for item in body["pages"] + body["facts"]:
            if item.get("truncated"):
                assert len(body["pages"]) + len(body["facts"]) == 1
        if body["dropped_count"] and text:
            assert f"({body['dropped_count']} more over the budget)" in lines
        self.delivered += [f["fact_id"] for f in body["facts"]]
        self.pages += [p["slug"] for p in body["pages"]]

    def drain(self, limit: int) -> None:
        for _ in range(limit):
            body = self.wake()
            if not body["has_more"] and not (body["facts"] or body["pages"]):
                return
        raise AssertionError("the session did not drain")


def _written_fact_ids(deps: Deps, tenant: str, now: datetime) -> list[str]:
    return [f.fact_id for f in deps.fact_listing.recent(tenant, now=now, after=None, world_only=True, limit=100)]


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("fact"), st.integers(1, FACT_MAX), st.sampled_from([None, "people/ann", "companies/acme"])),
        st.tuples(st.just("page"), st.integers(1, TITLE_MAX), st.none()),
        st.tuples(st.just("wake"), st.none(), st.none()),
    ),
    min_size=1,
    max_size=10,
)


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(budget=st.integers(1, 4000), ops=OPS)
def test_every_delivered_item_is_in_its_wakes_text_and_every_fact_arrives_once(budget: int, ops: list) -> None:
    stores = open_local(":memory:")
    try:
        clock = FixedClock(datetime(2026, 6, 11, 9, 30, tzinfo=UTC))
        deps = Deps.over(stores, clock=clock, ids=SortableIds(), llm=None, embedder=None)
        caller = Caller(tenant="t1", client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)
        follower = Follower(deps, caller, clock, budget)
        pages = 0
        for n, (op, size, entity) in enumerate(ops):
            clock.advance(seconds=1)
            if op == "fact":
                write_fact(deps, caller, n, size, entity)
            elif op == "page":
                write_page(deps, caller, n, size)
                pages += 1
            else:
                follower.wake()
        follower.drain(limit=2 * len(ops) + 4)
        written = _written_fact_ids(deps, "t1", clock.now())
        assert sorted(follower.delivered) == sorted(written)  # every fact, exactly once
        assert len(follower.pages) == pages
    finally:
        stores.close()


@pytest.fixture
def clock() -> FixedClock:
    """Fixed, but at the real time: DynamoDB Local expires cursors by their TTL on the wall clock."""
    return FixedClock(to_ms(datetime.now(UTC)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("budget", [40, 100, 300])
def test_a_heartbeat_at_a_small_budget_shows_everything_it_delivers(
    request: pytest.FixtureRequest, clock: FixedClock, backend: str, budget: int
) -> None:
    """At 100 three of four delivered facts, and at 300 a long fact, never appeared in any text."""
    with open_deps(backend, request, clock) as deps:
        caller = Caller(
            tenant="t-" + uuid.uuid4().hex[:12], client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True
        )
        follower = Follower(deps, caller, clock, budget)
        for n, length in enumerate([FACT_MAX, 120, 80, 300]):
            clock.advance(seconds=1)
            write_fact(deps, caller, n, length, "people/ann")
        follower.drain(limit=12)
        assert len(follower.delivered) == len(set(follower.delivered)) == 4
