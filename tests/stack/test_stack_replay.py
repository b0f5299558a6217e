"""The search node stops during a write burst, and `fleetmem admin replay` restores the index.

On the local stack (tests/stack/stack.py): the functions' way to the OpenSearch node is stopped
(`search_path.refuse()`: connections fail at once; the node itself is shared by every xdist
worker, so only this stack's path to it stops) while facts and pages are written over the HTTP
API. The stream mapping (`RetryingPump`, the deployed batch size and retries) retries the failed
batches and then gives up on them, as the deployed one does; the indexer function kept every
failed item on the replay queue (SQS on moto). With the path open again, `fleetmem admin replay`
(the CLI, the stage's settings from the environment) re-indexes them from DynamoDB. Then: no
document missing — the index holds exactly the documents the tables' items make — and recall
answers as it does for a tenant given the same writes while the node was up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any

import httpx
import pytest

from fleetmem.memory.indexing import docs_for_page, fact_doc_id
from tests.aws import engines

from .conftest import mint
from .stack import Stack

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]

FACTS = [f"The ferry to island {n} leaves at {7 + n % 10}:15 from pier {n % 4}" for n in range(24)]
PAGES = {
    f"places/island-{n}": f"# Island {n}\n\nIsland {n} has {n + 2} beaches and a lighthouse painted "
    + ("red" if n % 2 else "blue")
    + ".\n"
    for n in range(6)
}
QUERIES = ["when does the ferry leave for island 3", "lighthouse painted red", "beaches on the island"]


def call(stack: Stack, token: str, tool: str, body: dict[str, Any]) -> dict[str, Any]:
    out = httpx.post(
        f"{stack.base_url}/v1/{tool}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=120
    )
    assert out.status_code == 200, out.text
    return dict(out.json())


def burst(stack: Stack, token: str) -> None:
    """The same writes for every tenant: facts, pages, a page rewritten, a fact forgotten, a page deleted."""
    ids = [call(stack, token, "remember", {"fact": f, "provenance": "replay test"})["id"] for f in FACTS]
    for slug, body in PAGES.items():
        call(stack, token, "put_page", {"slug": slug, "content": body})
    call(stack, token, "put_page", {"slug": "places/island-1", "content": "# Island 1\n\nNow a bird sanctuary.\n"})
    call(stack, token, "forget", {"id": ids[5], "reason": "replay test"})
    call(stack, token, "delete_page", {"slug": "places/island-4"})


def expected_docs(stack: Stack, tenant: str) -> set[str]:
    """The documents the tables' current items make: active facts, every chunk of every page."""
    stores = engines.open_stores(stack.ddb, stack.prefix)
    docs: set[str] = set()
    after: str | None = None
    while True:
        facts, after = stores.facts.scan(tenant, after=after, limit=500)
        docs |= {fact_doc_id(f.fact_id) for f in facts if f.expired_at is None and f.superseded_by is None}
        if after is None:
            break
    while True:
        pages, after = stores.pages.scan(tenant, after=after, limit=500)
        docs |= {d.doc_id for p in pages for d in docs_for_page(p)}
        if after is None:
            return docs


def indexed_docs(stack: Stack, tenant: str) -> set[str]:
    index = f"{stack.index_prefix}*"
    httpx.post(f"{stack.search_url}/{index}/_refresh", timeout=30)
    body = {"size": 1000, "_source": ["doc_id"], "query": {"bool": {"filter": [{"term": {"tenant": tenant}}]}}}
    hits = httpx.post(f"{stack.search_url}/{index}/_search", json=body, timeout=30).json()["hits"]["hits"]
    return {h["_source"]["doc_id"] for h in hits}


def recall_view(stack: Stack, token: str, query: str) -> list[Any]:
    """What recall finds, without the ids that differ between tenants: fact texts, page chunks."""
    found = call(stack, token, "recall", {"query": query})
    facts = sorted(f["fact"] for f in found["facts"])
    pages = sorted((r["slug"], r["chunk"]) for r in found["results"])
    return [facts, pages, found.get("search_degraded")]


def replay_queue_waiting(stack: Stack) -> int:
    import boto3

    sqs = boto3.client("sqs", endpoint_url=stack.moto, **engines.CREDENTIALS)
    attrs = sqs.get_queue_attributes(QueueUrl=stack.replay_queue, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])


def admin(stack: Stack, *words: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""), **stack.admin_env()}
    return subprocess.run(
        [sys.executable, "-m", "fleetmem.cli", "admin", *words], env=env, capture_output=True, text=True, timeout=600
    )


def test_a_stopped_search_node_loses_nothing_after_replay(stack):
    run = uuid.uuid4().hex[:6]
    failing, healthy = f"replay-{run}", f"steady-{run}"
    token = mint(stack, ["read", "write"], tenant=failing)
    steady = mint(stack, ["read", "write"], tenant=healthy)
    discarded, failed_batches = len(stack.pump.discarded), stack.pump.failed_batches

    stack.search_path.refuse()
    try:
        burst(stack, token)
        # the mapping retries each failed batch, then gives up on it: wait until the stream is past all
        deadline = time.monotonic() + 300
        while stack.pump.attempts or len(stack.pump.discarded) == discarded:
            assert time.monotonic() < deadline, "the stream mapping never gave up on the failed batches"
            stack.drain()
            time.sleep(0.2)
        assert stack.pump.failed_batches > failed_batches
        assert indexed_docs(stack, failing) == set()  # nothing reached the index
        assert replay_queue_waiting(stack) > 0
        status = admin(stack, "status", "--json", "--exact")
        assert status.returncode == 0, status.stderr
        doc = json.loads(status.stdout)
        assert doc["kept_for_replay"]["waiting"] > 0 and doc["index_lag"]["facts"]["missing"] > 0
    finally:
        stack.search_path.resume()

    out = admin(stack, "replay", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["failed"] == [] and report["replayed"] > 0
    assert replay_queue_waiting(stack) == 0

    # 0 missing: the index holds exactly what the tables' items make
    expected = expected_docs(stack, failing)
    assert len(expected) > len(FACTS)
    assert indexed_docs(stack, failing) == expected

    # and search answers as for a tenant that got the same writes while the node was up
    burst(stack, steady)
    stack.drain()
    assert len(indexed_docs(stack, healthy)) == len(expected_docs(stack, healthy)) == len(expected)
    for query in QUERIES:
        assert recall_view(stack, token, query) == recall_view(stack, steady, query), query
    for query in QUERIES:  # a recall that found nothing would make the comparison empty
        assert recall_view(stack, token, query)[0], query
