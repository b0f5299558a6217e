"""Kept for replay, then replayed: the stream indexer's failure path and `fleetmem.adapters.aws.replay`.

Real engines: the stores on moto's server (DynamoDB with streams, and SQS for the replay queue),
the stream records read back with the DynamoDB Streams API and handed to the indexer handler in
the JSON shape Lambda delivers, and the real OpenSearch node. An index whose endpoint refuses
connections (a closed port) is the search node being down. The HashEmbedder stands in for Bedrock.
"""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetmem.adapters.aws.opensearch import OpenSearchIndex
from fleetmem.adapters.aws.replay import ReplayQueue, decode, encode, queue_name, replay
from fleetmem.adapters.aws.stream import Kept, record_identity
from fleetmem.adapters.aws.tables import FACTS, PAGES
from fleetmem.adapters.local.clock import SystemClock
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.memory.indexing import docs_for_page
from fleetmem.ports import Deps
from fleetmem.transport.aws_lambda.indexer import handle_stream_batch
from tests.aws import engines
from tests.aws.test_stream import StreamReader, fact, page
from tests.functions.gateway import lambda_json

pytestmark = [pytest.mark.live_opensearch]

T0 = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def world(moto_endpoint, opensearch_url):
    prefix = engines.fresh_prefix()
    stores = engines.open_stores(moto_endpoint, prefix)
    embedder = HashEmbedder(dim=16)
    kw = {"model_id": embedder.model_id, "dim": embedder.dim, "prefix": prefix, "service": "none"}
    index = OpenSearchIndex(opensearch_url, **kw)
    down = OpenSearchIndex(closed_port(), **kw)
    sqs = engines.session().client("sqs", endpoint_url=moto_endpoint)
    queue = ReplayQueue(sqs, sqs.create_queue(QueueName=queue_name(prefix))["QueueUrl"])
    streams = [StreamReader(moto_endpoint, t.physical_name(prefix)) for t in (FACTS, PAGES)]
    yield stores, index, down, embedder, queue, streams
    index.client.indices.delete(index=index.index, ignore_unavailable=True)


def deps_over(stores: Any, index: Any, embedder: Any) -> Deps:
    from fleetmem.adapters.local.ids import SortableIds

    return Deps.over(stores, search=index, clock=SystemClock(), ids=SortableIds(), embedder=embedder)


def lambda_event(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": json.loads(json.dumps(records, default=lambda_json))}


def metrics_of(out: str) -> dict[str, Any]:
    """The metric values of the EMF documents Powertools printed."""
    values: dict[str, Any] = {}
    for line in out.splitlines():
        if line.startswith("{") and "_aws" in line:
            doc = json.loads(line)
            for m in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
                value = doc[m["Name"]]
                values[m["Name"]] = value[0] if isinstance(value, list) else value
    return values


def doc_ids(index: OpenSearchIndex, tenant: str) -> set[str]:
    index.ensure_index()
    index.client.indices.refresh(index=index.index)
    body = {"size": 1000, "query": {"bool": {"filter": [{"term": {"tenant": tenant}}]}}}
    return {h["_source"]["doc_id"] for h in index.client.search(index=index.index, body=body)["hits"]["hits"]}


def test_failed_records_are_kept_and_replay_writes_what_dynamodb_holds_now(world, capsys):
    stores, index, down, embedder, queue, streams = world
    for n in range(1, 4):
        stores.facts.put(fact("t1", n))
    stores.pages.put(page("t1", "people/alice", "Drinks oolong."))
    stores.pages.put(page("t2", "people/bob", "Drinks coffee."))
    records = [r for s in streams for r in s.read()]
    capsys.readouterr()

    answer = handle_stream_batch(lambda_event(records), None, deps=deps_over(stores, down, embedder), kept=queue)

    # every record that changes the index failed; derived page rows change nothing and did not
    failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
    kept_items = {record_identity(r) for r in records if r["dynamodb"]["SequenceNumber"] in failed}
    assert kept_items == {
        Kept("t1", "fact", "f_1"),
        Kept("t1", "fact", "f_2"),
        Kept("t1", "fact", "f_3"),
        Kept("t1", "page", "people/alice"),
        Kept("t2", "page", "people/bob"),
    }
    metrics = metrics_of(capsys.readouterr().out)
    assert metrics["IndexingFailures"] == len(failed) and metrics["ReplayKept"] == 5
    assert metrics["SearchLagSeconds"] >= 0
    assert queue.count()["waiting"] == 5

    # meanwhile one fact is forgotten and one page deleted: replay follows the tables, not the records
    stores.facts.purge("t1", "f_2")
    stores.pages.delete("t2", "people/bob")
    report = replay(queue, facts=stores.facts, pages=stores.pages, index=index, embedder=embedder)
    assert sorted(report.replayed) == sorted(kept_items) and report.failed == []
    alice = {d.doc_id for d in docs_for_page(stores.pages.get("t1", "people/alice"))}
    assert alice and doc_ids(index, "t1") == {"fact:f_1", "fact:f_3"} | alice
    assert doc_ids(index, "t2") == set()
    assert queue.count() == {"waiting": 0, "in_flight": 0}


def test_a_replay_while_the_index_is_down_keeps_the_records_on_the_queue(world):
    stores, _, down, embedder, queue, _ = world
    stores.facts.put(fact("t1", 1))
    queue.keep([Kept("t1", "fact", "f_1"), Kept("t1", "fact", "f_1")])  # kept twice: one message
    report = replay(queue, facts=stores.facts, pages=stores.pages, index=down, embedder=embedder)
    assert report.failed == [Kept("t1", "fact", "f_1")] and report.replayed == []
    assert queue.count() == {"waiting": 0, "in_flight": 1}  # invisible for this run, then back


def test_a_successful_batch_keeps_nothing_and_reports_its_lag(world, capsys):
    stores, index, _, embedder, queue, streams = world
    stores.facts.put(fact("t1", 1, created_at=T0 + timedelta(minutes=1)))
    records = [r for s in streams for r in s.read()]
    capsys.readouterr()
    answer = handle_stream_batch(lambda_event(records), None, deps=deps_over(stores, index, embedder), kept=queue)
    assert answer == {"batchItemFailures": []}
    metrics = metrics_of(capsys.readouterr().out)
    assert metrics["IndexingFailures"] == 0 and "ReplayKept" not in metrics
    assert queue.count()["waiting"] == 0 and doc_ids(index, "t1") == {"fact:f_1"}


def test_identities_read_back_from_keys_and_messages():
    # a keys-only page removal and a fact row without images: identity from the escaped keys
    page_keys = {"dynamodb": {"Keys": {"pk": {"S": "t1#notes%23a"}, "sk": {"S": "W#tea"}}}}
    fact_keys = {"dynamodb": {"Keys": {"pk": {"S": "t1#f_9"}}}}
    counter = {"dynamodb": {"Keys": {"pk": {"S": "t1#~chg"}, "sk": {"S": "C"}}}}
    assert record_identity(page_keys) == Kept("t1", "page", "notes#a")
    assert record_identity(fact_keys) == Kept("t1", "fact", "f_9")
    assert record_identity(counter) is None
    k = Kept("t1", "page", "notes/ü")
    assert decode(encode(k)) == k
    assert decode("not json") is None and decode('{"tenant": "t1", "kind": "other", "id": "x"}') is None
