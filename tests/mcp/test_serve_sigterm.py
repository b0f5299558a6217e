"""`fleetmem serve` stops on SIGTERM: it stops accepting, gives the calls in flight a bounded grace
(`SHUTDOWN_GRACE_S`), answers the ones it cuts off with the `unavailable` envelope, and exits 0 —
also while calls wait on its bounded call pool behind a write that cannot proceed. A real server
subprocess on a free 127.0.0.1 port; the 30 s waits below bound the test, they measure nothing."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from fleetmem.adapters.local.sqlite import DB_FILENAME
from fleetmem.transport.http_local import SHUTDOWN_GRACE_S, SHUTDOWN_MARGIN_S
from tests.mcp.served import Served, server_env

CALL_THREADS = 2
CALLS = 6
#: how long the test waits for the process to end: a bound on the test, well past the server's own
EXIT_WAIT_S = 30.0
assert EXIT_WAIT_S > SHUTDOWN_GRACE_S + SHUTDOWN_MARGIN_S


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path, server_env(), args=("--threads", str(CALL_THREADS)))
    try:
        yield server.start()
    finally:
        server.stop()


def _threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def _wait_for_threads(served: Served, at_least: int) -> None:
    """Readiness: the server runs calls on that many threads (they are blocked, so they stay)."""
    assert served.proc is not None
    end = time.monotonic() + 60
    while _threads(served.proc.pid) < at_least:
        assert served.proc.poll() is None, served.log_text()
        assert time.monotonic() < end, "the calls never reached the server's call threads"
        time.sleep(0.05)


def test_sigterm_on_an_idle_server_exits_0(served: Served) -> None:
    assert served.call("recall", {"query": "anything"}).status_code == 200
    assert served.proc is not None
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(timeout=EXIT_WAIT_S) == 0, served.log_text()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts the server's threads in /proc (Linux)")
def test_sigterm_while_calls_wait_on_the_call_pool_exits_0_within_the_grace(served: Served) -> None:
    assert served.proc is not None
    idle = _threads(served.proc.pid)  # before any call: no call thread exists yet
    # Another process holds the database's write lock, as a long CLI import would: every write the
    # server runs waits for it on a call thread, and the calls beyond CALL_THREADS wait for a thread.
    lock = sqlite3.connect(served.data_dir / DB_FILENAME, isolation_level=None, timeout=30)
    lock.execute("BEGIN IMMEDIATE")
    answers: list[httpx.Response | Exception] = []
    guard = threading.Lock()

    def write(i: int) -> None:
        try:
            r: httpx.Response | Exception = served.call(
                "remember", {"fact": f"Waiting fact {i}", "provenance": "sigterm test"}, timeout=120
            )
        except httpx.TransportError as exc:  # sent, never read: the listener closed first
            r = exc
        with guard:
            answers.append(r)

    pool = ThreadPoolExecutor(max_workers=CALLS)
    try:
        for i in range(CALLS):
            pool.submit(write, i)
        _wait_for_threads(served, idle + CALL_THREADS)
        served.proc.send_signal(signal.SIGTERM)
        code = served.proc.wait(timeout=EXIT_WAIT_S)  # TimeoutExpired = it did not stop
    finally:
        lock.rollback()
        lock.close()
        pool.shutdown(wait=True)
    assert code == 0, served.log_text()
    assert len(answers) == CALLS
    for r in answers:
        if isinstance(r, Exception):
            continue
        body = r.json()
        if r.status_code != 200:  # cut off by the stop: the envelope, retryable, never a bare 500
            assert (r.status_code, body["code"], body["retryable"]) == (503, "unavailable", True), body
            assert body["detail"]["reason"] == "shutting_down"
            assert body["fix"]["next"] == "wait"
    assert "Traceback" not in served.log_text()
    with sqlite3.connect(served.data_dir / DB_FILENAME) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
