"""The request path's search gives up fast on a node that does not answer: one attempt of
`SEARCH_TIMEOUT_S`, `unavailable` with a Retry-After, and after `BREAKER_FAILURES` of them the
sandbox's breaker answers at once without asking the node until its open period ends.

The "node" is a real TCP listener on 127.0.0.1 that accepts and never answers (what a client sees
of a paused process); the client is the real opensearch-py one the adapter builds."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from fleetmem.adapters.aws.deadlines import BREAKER_FAILURES, BREAKER_OPEN_S
from fleetmem.adapters.aws.opensearch import OpenSearchIndex, SearchBreaker
from fleetmem.errors import Unavailable
from fleetmem.models import SearchQuery


class Silent:
    """Accepts connections, reads nothing back, answers nothing; counts connections."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        for c in self.accepted:
            c.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    s = Silent()
    yield s
    s.close()


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_search_on_a_silent_node_fails_fast_then_the_breaker_stops_asking(silent: Silent) -> None:
    index = OpenSearchIndex(silent.url, model_id="m", dim=4, service="none")
    clock = Clock()
    index.breaker.clock = clock
    query = SearchQuery(tenant="t", text="anything", kinds=("chunk",), world_only=True, k=5)
    for _ in range(BREAKER_FAILURES):
        with pytest.raises(Unavailable) as timed_out:
            index.search(query)
        assert timed_out.value.reason == "timeout" and timed_out.value.retry_after_seconds
    asked = len(silent.accepted)
    with pytest.raises(Unavailable) as fast:
        index.search(query)
    assert fast.value.reason == "circuit_open"
    assert fast.value.retry_after_seconds == BREAKER_OPEN_S
    assert len(silent.accepted) == asked  # the node was not asked: no new connection
    clock.t += BREAKER_OPEN_S  # the open period is over: one call tries the node again
    with pytest.raises(Unavailable) as again:
        index.search(query)
    assert again.value.reason == "timeout"
    with pytest.raises(Unavailable) as reopened:
        index.search(query)
    assert reopened.value.reason == "circuit_open"


def test_the_breaker_counts_only_failures_that_say_the_node_is_not_answering() -> None:
    clock = Clock()
    breaker = SearchBreaker(failures=2, open_s=5, clock=clock)
    refused = Unavailable("search index request failed (status 400)", reason="search_error")
    for _ in range(5):
        breaker.record(refused)
    breaker.check()  # a refused query says nothing about the node's health
    breaker.record(Unavailable("x", reason="timeout"))
    breaker.record(None)  # a success in between resets the count
    breaker.record(Unavailable("x", reason="connection"))
    breaker.check()
    breaker.record(Unavailable("x", reason="timeout"))
    with pytest.raises(Unavailable) as opened:
        breaker.check()
    assert (opened.value.reason, opened.value.retry_after_seconds) == ("circuit_open", 5)
    clock.t += 4.2
    with pytest.raises(Unavailable) as later:
        breaker.check()
    assert later.value.retry_after_seconds == 1
    clock.t += 1
    breaker.check()
