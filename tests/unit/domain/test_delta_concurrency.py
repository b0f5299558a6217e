"""delta under concurrent writers (issue 8 item 1, D14), on SQLite (a file store: WAL, one connection
per thread) and the AWS set (DynamoDB Local + the real OpenSearch node).

Writer threads put pages and remember facts through the verbs with the real clock, while a
heartbeat session wakes every 50 ms at a small budget and a stateless caller follows next_cursor
at the same time. After the writers stop both drain until has_more is false; every page and every
fact must have been delivered to each of them at least once. Nothing here asserts timing.

Knobs (environment): FLEETMEM_DELTA_STRESS_ROUNDS (default 1) repeats the whole run;
FLEETMEM_DELTA_STRESS_PAGES / _FACTS and _WRITERS (default 4) size it. Default sizes: 600 pages and
300 facts on SQLite; 150 / 75 on DynamoDB Local, which spends ~0.1 s per transaction on a 2-core
CI machine (600 / 300 there takes minutes: set the variables to run it, e.g.
`FLEETMEM_DELTA_STRESS_ROUNDS=20 FLEETMEM_DELTA_STRESS_PAGES=600 FLEETMEM_DELTA_STRESS_FACTS=300`).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
from tests.unit.domain.delta_backends import BACKENDS, open_deps

from fleetmem.adapters.local.clock import SystemClock
from fleetmem.memory.verbs import delta, put_page, remember
from fleetmem.models import Caller
from fleetmem.ports import CallContext
from fleetmem.timefmt import iso

ROUNDS = int(os.environ.get("FLEETMEM_DELTA_STRESS_ROUNDS", "1"))
DEFAULT_SIZES = {"sqlite": (600, 300), "dynamodb-local": (150, 75)}


def sizes(backend: str) -> tuple[int, int]:
    pages, facts = DEFAULT_SIZES[backend]
    return (
        int(os.environ.get("FLEETMEM_DELTA_STRESS_PAGES", pages)),
        int(os.environ.get("FLEETMEM_DELTA_STRESS_FACTS", facts)),
    )


WRITERS = int(os.environ.get("FLEETMEM_DELTA_STRESS_WRITERS", "4"))
BUDGET = 120
WAKE_EVERY = 0.05
CTX = CallContext("stress")


class Reader:
    """One delta consumer: a session (session_id) or a stateless caller following next_cursor."""

    def __init__(self, deps: Any, caller: Caller, *, session_id: str | None) -> None:
        self.deps, self.caller, self.session_id = deps, caller, session_id
        self.args: dict[str, Any] = {"session_id": session_id} if session_id else {"since": "1970-01-01T00:00:00Z"}
        self.pages: set[str] = set()
        self.facts: set[str] = set()
        self.wakes = 0

    def wake(self) -> bool:
        body = delta.run(self.deps, self.caller, delta.DeltaParams(budget_tokens=BUDGET, **self.args), CTX).body
        self.wakes += 1
        assert body["budget_used"] <= BUDGET
        self.pages.update(p["slug"] for p in body["pages"] if not p.get("truncated"))
        self.facts.update(f["fact_id"] for f in body["facts"])
        if self.session_id is None:
            nxt = body["next_cursor"]
            self.args = {"since": nxt["since"], "since_slug": nxt["slug"]}
            for field in ("page_seq", "fact_seq"):  # the exact positions (D14), when given
                if nxt.get(field) is not None:
                    self.args[f"since_{field}"] = nxt[field]
        return bool(body["has_more"])

    def drain(self, limit: int = 10_000) -> None:
        for _ in range(limit):
            if not self.wake():
                return
        raise AssertionError("delta did not drain")


def _run_round(deps: Any, round_no: int, pages_n: int, facts_n: int) -> None:
    caller = Caller(tenant="t1", client_id="stress-agent", scopes=frozenset({"read", "write"}), remote=True)
    session = Reader(deps, caller, session_id=f"hb-{round_no}")
    session.wake()  # first wake: establishes the cursor before any write of this round
    stateless = Reader(deps, caller, session_id=None)
    stateless.args = {"since": iso(deps.clock.now())}
    stateless.wake()  # from a timestamp (position derived), then exact via next_cursor
    written_pages: list[str] = []
    written_facts: list[str] = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        try:
            mine_p = [i for i in range(pages_n) if i % WRITERS == w]
            mine_f = [i for i in range(facts_n) if i % WRITERS == w]
            for k, i in enumerate(mine_p):
                slug = f"r{round_no}/w{w}/page-{i:04d}"
                put_page.run(deps, caller, put_page.PutPageParams(slug=slug, content=f"Page {i}."), CTX)
                with lock:
                    written_pages.append(slug)
                if k < len(mine_f):
                    j = mine_f[k]
                    out = remember.run(
                        deps,
                        caller,
                        remember.RememberParams(fact=f"Round {round_no} fact {j} from writer {w}", provenance="stress"),
                        CTX,
                    ).body
                    with lock:
                        written_facts.append(out["id"])
            for j in mine_f[len(mine_p) :]:
                out = remember.run(
                    deps,
                    caller,
                    remember.RememberParams(fact=f"Round {round_no} fact {j} from writer {w}", provenance="stress"),
                    CTX,
                ).body
                with lock:
                    written_facts.append(out["id"])
        except BaseException as exc:  # surfaced by the main thread
            errors.append(exc)

    def heartbeat() -> None:
        try:
            while not stop.is_set():
                session.wake()
                stateless.wake()
                stop.wait(WAKE_EVERY)
        except BaseException as exc:
            errors.append(exc)

    beat = threading.Thread(target=heartbeat, name="delta-heartbeat")
    writers = [threading.Thread(target=writer, args=(w,), name=f"writer-{w}") for w in range(WRITERS)]
    beat.start()
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    beat.join()
    assert not errors, errors[0]
    assert len(written_pages) == pages_n and len(written_facts) == facts_n

    session.drain()
    stateless.drain()
    for reader in (session, stateless):
        missing_pages = set(written_pages) - reader.pages
        missing_facts = set(written_facts) - reader.facts
        assert not missing_pages, f"{len(missing_pages)} pages never delivered: {sorted(missing_pages)[:5]}"
        assert not missing_facts, f"{len(missing_facts)} facts never delivered"
    assert session.wakes > 2  # the heartbeat really interleaved with the writers


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_page_and_fact_is_delivered_at_least_once_under_concurrent_writers(
    backend: str, request: pytest.FixtureRequest
) -> None:
    with open_deps(backend, request, SystemClock(), file=True) as deps:
        for round_no in range(ROUNDS):
            _run_round(deps, round_no, *sizes(backend))  # rounds share the store; each has its own slugs and session
