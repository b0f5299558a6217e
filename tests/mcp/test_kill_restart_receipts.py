"""D22's dead-holder rule on a real `fleetmem serve`: SIGKILL it in the middle of a six-writer burst
of `remember` / `put_page` calls, each with a `request_id`, while at least one call holds its claim
without a result; restart it on the same data directory and retry every write the kill cut off.

The server runs with a one-hour lease (FLEETMEM_IDEMPOTENCY_LEASE_S), so no claim the kill leaves
behind lapses during the test: a retry can only get through by seeing that the claim's holder
process is gone and taking the claim over. Each retry must answer success on its first try (never
`unavailable` / `write_pending`), its receipt `committed` under the id it was sent with, and each
write must be stored exactly once. Before the kill, each claim's receipt named the dead holder's
write as `recovering` once the process was gone. Real subprocess, real HTTP on 127.0.0.1, SQLite in
tmp_path, the hash embedder.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetmem.protocol import request_uuid
from tests.mcp.served import Served, server_env
from tests.mcp.test_kill_restart import Write, _burst, _kill_with_a_claim_in_flight, _store

pytestmark = pytest.mark.slow

#: far beyond the test's run: only the dead-holder rule can free a claim the kill left behind
LEASE_S = "3600"


def _write(writer: int, n: int) -> Write:
    marker = f"rq{uuid.uuid4().hex[:10]}"
    rid = f"writer-{writer}/write-{n}"  # not a UUID: stored under its UUIDv5, echoed as client_request_id
    if n % 2 == 0:
        text = f"Writer {writer} noted {marker} {uuid.uuid4().hex[:8]} {uuid.uuid4().hex[:8]}"
        return Write("remember", {"fact": text, "provenance": "receipts kill test", "request_id": rid}, marker)
    content = f"# Receipt page {writer} {n}\n\nWriter {writer} wrote {marker} {uuid.uuid4().hex[:8]}."
    return Write("put_page", {"slug": f"receipts/w{writer}-n{n}", "content": content, "request_id": rid}, marker)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path, server_env(FLEETMEM_IDEMPOTENCY_LEASE_S=LEASE_S))
    try:
        yield server.start()
    finally:
        server.stop()


def test_after_a_kill_every_cut_off_write_succeeds_on_its_first_retry_and_is_stored_once(served: Served) -> None:
    writes: list[Write] = []
    guard = threading.Lock()
    stop = threading.Event()
    threads = _burst(served, writes, guard, stop, make=_write)
    stuck = _kill_with_a_claim_in_flight(served, writes, guard)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)

    cut_off = [w for w in writes if w.cut_off]
    by_request = {request_uuid(w.args["request_id"])[0]: w for w in cut_off}
    assert stuck and stuck <= set(by_request)  # the kill left claims in flight, each a cut-off write's

    served.start()  # the same data directory; the killed process is gone
    for request_id in sorted(stuck):
        seen = served.call("get_write_request", {"request_id": by_request[request_id].args["request_id"]}).json()
        assert seen["write_request"]["state"] == "recovering", seen
    for w in cut_off:
        r = served.call(w.tool, w.args)
        body = r.json()
        assert r.status_code == 200 and "write_error" not in body, body  # its first try: no write_pending
        assert body["state"] == "committed" and body["client_request_id"] == w.args["request_id"], body
        w.body = body

    facts, pages = _store(served.data_dir)
    for w in writes:  # acknowledged before the kill, or retried after it: stored exactly once
        assert w.body is not None
        if w.tool == "remember":
            assert facts.get(w.args["fact"]) == [(w.body["id"], True)], (w, facts.get(w.args["fact"]))
        else:
            assert pages.get(w.args["slug"], "").count(w.marker) == 1, w
    for w in cut_off:  # and the receipt of each retried write says committed
        got = served.call("get_write_request", {"request_id": w.args["request_id"]}).json()
        assert got["write_request"]["state"] == "committed", got
