"""Many concurrent writers against `fleetmem serve`'s app over real HTTP (uvicorn on a free
127.0.0.1 port, `/v1`), on one SQLite data directory: no call fails, an idempotency key gives
exactly one fact and one result however many retries race, and facts about one attribute end with
exactly one active.

The embedder maps every text to one direction, so each phone fact is a near-match of every other
one and the supersession rule (not the embedding model) decides; the real MiniLM model is tested
in tests/unit/embedder."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from fleetmem.adapters.local import LocalStores
from fleetmem.adapters.local.clock import SystemClock
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.ports import Deps
from fleetmem.transport.http_local import build_local_app, serve_in_thread

ALICE = "people/alice"


class OneDirection:
    """Every text gets the same unit vector (cosine 1.0 between any two facts)."""

    model_id = "one-direction-4"
    dim = 4

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0, 0.0, 0.0] for _ in texts]


@pytest.fixture
def url(file_stores: LocalStores) -> Iterator[str]:
    deps = Deps.over(file_stores, clock=SystemClock(), ids=SortableIds(), embedder=OneDirection())
    with serve_in_thread(build_local_app(lambda: deps)) as base:
        yield base


def _post_all(url: str, token: str, calls: list[dict[str, Any]]) -> list[httpx.Response]:
    """POST every call to /v1/remember at once: one thread and one client per call, all released
    together by a barrier, so the calls overlap on the server. (No connection is opened before the
    barrier: the server would close one left idle past its keep-alive timeout.)"""
    auth = {"Authorization": f"Bearer {token}"}
    start = threading.Barrier(len(calls))

    def post(args: dict[str, Any]) -> httpx.Response:
        with httpx.Client(timeout=120) as client:
            start.wait()
            return client.post(f"{url}/v1/remember", json=args, headers=auth)

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(post, calls))


#: what differs between a first call and its replays by design: the replay flag, the correlation
#: id, and the first call's notices (a replay returns the stored result, not the advice given then)
PER_CALL = ("idempotent_replay", "correlation_id", "notices")


def _result(r: httpx.Response) -> dict[str, Any]:
    """The call's stored result: the body without the per-call fields."""
    assert r.status_code == 200, r.text
    body = r.json()
    assert "code" not in body, body
    return {k: v for k, v in body.items() if k not in PER_CALL}


def _by_key(calls: list[dict[str, Any]], responses: list[httpx.Response]) -> dict[str, list[httpx.Response]]:
    out: dict[str, list[httpx.Response]] = {}
    for args, r in zip(calls, responses, strict=True):
        out.setdefault(args["idempotency_key"], []).append(r)
    return out


def _assert_one_result_per_key(groups: dict[str, list[httpx.Response]]) -> dict[str, dict[str, Any]]:
    results = {}
    for key, responses in groups.items():
        bodies = [_result(r) for r in responses]
        assert all(b == bodies[0] for b in bodies), (key, bodies)  # every retry got the first call's result
        firsts = [r for r in responses if "idempotent_replay" not in r.json()]
        assert len(firsts) == 1, key  # the verb ran once; every other call replayed it
        results[key] = bodies[0]
    return results


def test_fifty_concurrent_writers_on_one_entity_get_no_errors_exact_idempotency_and_one_active_fact(
    url: str, tokens: dict[str, str], file_stores: LocalStores
) -> None:
    writers, retries = 50, 3
    calls = [
        {
            "fact": f"Alice's phone is now 555-01{i:02d}",
            "provenance": "concurrency test",
            "entity": ALICE,
            "idempotency_key": f"phone-{i}",
        }
        for i in range(writers)
        for _ in range(retries)
    ]
    random.Random(7).shuffle(calls)
    responses = _post_all(url, tokens["write"], calls)

    results = _assert_one_result_per_key(_by_key(calls, responses))
    assert len(results) == writers
    ids = {r["id"] for r in results.values()}
    assert len(ids) == writers  # one fact per key, none shared
    assert {r["status"] for r in results.values()} <= {"inserted", "superseded"}

    stored = file_stores.fact_listing.by_entity("t1", ALICE, now=SystemClock().now(), active_only=False, limit=500)
    assert {f.fact_id for f in stored} == ids  # exactly the facts the calls reported, no extra
    active = file_stores.fact_listing.by_entity("t1", ALICE, now=SystemClock().now(), active_only=True)
    assert len(active) == 1  # each update superseded the one before it
    superseded = [f.supersedes for f in stored if f.supersedes is not None]
    assert len(superseded) == writers - 1 and len(set(superseded)) == writers - 1  # a chain, no fork
    assert [r["status"] for r in results.values()].count("inserted") == 1


def test_a_hundred_concurrent_retries_with_one_key_all_return_the_first_calls_result(
    url: str, tokens: dict[str, str], file_stores: LocalStores
) -> None:
    call = {
        "fact": "Bob's desk is now in room 4.12",
        "provenance": "concurrency test",
        "entity": "people/bob",
        "idempotency_key": "bob-desk",
    }
    calls = [dict(call) for _ in range(100)]
    responses = _post_all(url, tokens["write"], calls)

    [result] = _assert_one_result_per_key(_by_key(calls, responses)).values()
    assert result["status"] == "inserted"
    stored = file_stores.fact_listing.by_entity("t1", "people/bob", now=SystemClock().now(), active_only=False)
    assert [f.fact_id for f in stored] == [result["id"]]


def test_the_waiting_never_replays_another_clients_key(
    url: str, tokens: dict[str, str], file_stores: LocalStores
) -> None:
    """The same key from two clients is two calls: each gets its own fact (keys are per client)."""
    call = {"fact": "Carol's badge is 77", "provenance": "p", "entity": "people/carol", "idempotency_key": "k"}
    both: list[Callable[[], list[httpx.Response]]] = [
        lambda: _post_all(url, tokens["write"], [dict(call)] * 10),
        lambda: _post_all(url, tokens["write_only"], [dict(call)] * 10),
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        mine, theirs = pool.map(lambda run: run(), both)
    [a] = _assert_one_result_per_key({"k": mine}).values()
    [b] = _assert_one_result_per_key({"k": theirs}).values()
    assert {a["status"], b["status"]} == {"inserted", "duplicate"}  # the second client's write merged
    stored = file_stores.fact_listing.by_entity("t1", "people/carol", now=SystemClock().now(), active_only=False)
    assert len(stored) == 1
