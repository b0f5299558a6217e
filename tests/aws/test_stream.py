"""Stream indexer logic: DynamoDB stream records -> search index operations.

End to end on real engines: writes go through the DynamoDB stores on moto (server mode), the
stream records are read back with the DynamoDB Streams API exactly as the indexer Lambda receives
them, and the operations are applied to an OpenSearchIndex on the real OpenSearch node, once in
each flavour: `domain` and `serverless` (through tests/aws/serverless.py's transport, which fails
the test on a custom `_id` or a `_delete_by_query`). The deterministic HashEmbedder stands in for
Bedrock (which cannot run here).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetmem.adapters.aws.opensearch import OpenSearchIndex
from fleetmem.adapters.aws.stream import (
    BatchResult,
    IndexOp,
    apply_operations,
    embed_operations,
    handle_batch,
    records_to_operations,
)
from fleetmem.adapters.aws.tables import FACTS, PAGES
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.errors import Unavailable
from fleetmem.models import Fact, Page, SearchDoc, SearchQuery
from tests.aws import engines
from tests.aws.serverless import serverless_index

T0 = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)
LONG_BODY = "\n\n".join(f"## Part {n}\n" + ("green tea notes " * 80) for n in range(4))


def fact(tenant: str, n: int, **kw: Any) -> Fact:
    return Fact(
        **{
            "tenant": tenant,
            "fact_id": f"f_{n}",
            "seq": n,
            "text": f"fact {n} about oolong",
            "provenance": "test",
            "client_id": "agent-a",
            "created_at": T0 + timedelta(minutes=n),
            **kw,
        }
    )


def page(tenant: str, slug: str, body: str, **kw: Any) -> Page:
    return Page(
        **{
            "tenant": tenant,
            "slug": slug,
            "title": "Alice Example",
            "body": body,
            "created_at": T0,
            "updated_at": T0,
            **kw,
        }
    )


class StreamReader:
    """Reads a table's stream from the start, remembering where it stopped."""

    def __init__(self, endpoint: str, table: str) -> None:
        ddb = engines.dynamodb_client(endpoint)
        self.streams = engines.session().client("dynamodbstreams", endpoint_url=endpoint)
        arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        shard = self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        self.it = self.streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")[
            "ShardIterator"
        ]

    def read(self) -> list[dict[str, Any]]:
        out = self.streams.get_records(ShardIterator=self.it)
        self.it = out["NextShardIterator"]
        return out["Records"]


@pytest.fixture(params=["domain", "serverless"])
def world(request, moto_endpoint, opensearch_url):
    prefix = engines.fresh_prefix()
    stores = engines.open_stores(moto_endpoint, prefix)
    embedder = HashEmbedder(dim=16)
    kw = {"model_id": embedder.model_id, "dim": embedder.dim, "prefix": prefix}
    if request.param == "serverless":
        index, _ = serverless_index(opensearch_url, **kw)
    else:
        index = OpenSearchIndex(opensearch_url, service="none", **kw)
    facts = StreamReader(moto_endpoint, FACTS.physical_name(prefix))
    pages = StreamReader(moto_endpoint, PAGES.physical_name(prefix))
    yield stores, index, embedder, facts, pages
    index.client.indices.delete(index=index.index, ignore_unavailable=True)
    index.client.close()


def found(index: OpenSearchIndex, tenant: str, text: str, kinds=("chunk", "fact")) -> list[str]:
    """Every doc id of `tenant` matching `text`, duplicates included (counted from the node, not
    from the adapter's de-duplicated answer)."""
    index.ensure_index()
    index.client.indices.refresh(index=index.index)
    hits = index.search(SearchQuery(tenant=tenant, text=text, kinds=kinds, world_only=False, k=50))
    raw = index.client.search(
        index=index.index,
        body={"size": 100, "query": {"bool": {"filter": [{"term": {"tenant": tenant}}]}}},
    )["hits"]["hits"]
    stored = [h["_source"]["doc_id"] for h in raw]
    assert len(stored) == len(set(stored)), f"duplicate docs in the index: {sorted(stored)}"
    return sorted(h.doc_id for h in hits.keyword)


def test_fact_inserts_are_indexed_with_a_vector_of_the_index_model(world):
    stores, index, embedder, facts, _ = world
    stores.facts.put(fact("t1", 1))
    result = handle_batch(facts.read(), index=index, embedder=embedder)
    assert result.failed == [] and result.response() == {"batchItemFailures": []}
    assert found(index, "t1", "oolong") == ["fact:f_1"]
    (hit,) = index.client.search(index=index.index, body={"query": {"term": {"doc_key": "t1|fact:f_1"}}})["hits"][
        "hits"
    ]
    assert len(hit["_source"]["vector"]) == embedder.dim


def test_supersession_and_forget_remove_the_old_fact_from_the_index(world):
    stores, index, embedder, facts, _ = world
    old = fact("t1", 1)
    stores.facts.put(old)
    stores.facts.put(fact("t1", 2), supersede=old)
    stores.facts.put(fact("t1", 3))
    stores.facts.expire("t1", "f_3", at=T0 + timedelta(hours=1), reason="wrong", actor="agent-a")
    assert handle_batch(facts.read(), index=index, embedder=embedder).failed == []
    assert found(index, "t1", "oolong") == ["fact:f_2"]


def test_a_purge_deletes_the_fact_document(world):
    stores, index, embedder, facts, _ = world
    stores.facts.put(fact("t1", 1))
    stores.facts.purge("t1", "f_1")
    assert handle_batch(facts.read(), index=index, embedder=embedder).failed == []
    assert found(index, "t1", "oolong") == []


def test_the_sequence_counter_and_derived_page_rows_index_nothing(world):
    stores, _, _, facts, pages = world
    stores.facts.next_seq("t1")
    stores.pages.put(
        page(
            "t1",
            "people/alice",
            "short",
            aliases=("Ally",),
            links=({"type": "knows", "target": "people/bob"},),
        )
    )  # type: ignore[arg-type]
    ops, bad = records_to_operations(facts.read())
    assert ops == [] and bad == []
    ops, bad = records_to_operations(pages.read())
    assert bad == [] and [op.action for op in ops] == ["upsert"]  # the page row only


def test_a_page_update_drops_chunks_the_new_version_no_longer_has(world):
    stores, index, embedder, _, pages = world
    stores.pages.put(page("t1", "people/alice", LONG_BODY))
    assert handle_batch(pages.read(), index=index, embedder=embedder).failed == []
    before = found(index, "t1", "tea alice")
    assert len(before) > 1
    stores.pages.put(page("t1", "people/alice", "Now drinks only coffee.", updated_at=T0 + timedelta(days=1)))
    assert handle_batch(pages.read(), index=index, embedder=embedder).failed == []
    assert found(index, "t1", "alice") == ["chunk:people/alice#0"]


def test_a_page_delete_removes_every_chunk(world):
    stores, index, embedder, _, pages = world
    stores.pages.put(page("t1", "people/alice", LONG_BODY))
    stores.pages.delete("t1", "people/alice")
    assert handle_batch(pages.read(), index=index, embedder=embedder).failed == []
    assert found(index, "t1", "alice tea") == []


def test_redelivering_a_batch_changes_nothing(world):
    stores, index, embedder, facts, _ = world
    stores.facts.put(fact("t1", 1))
    stores.facts.put(fact("t1", 2))
    records = facts.read()
    handle_batch(records, index=index, embedder=embedder)
    first = found(index, "t1", "oolong")
    assert handle_batch(records, index=index, embedder=embedder).failed == []
    assert found(index, "t1", "oolong") == first == ["fact:f_1", "fact:f_2"]


def test_another_tenants_documents_are_separate(world):
    stores, index, embedder, facts, _ = world
    stores.facts.put(fact("t1", 1))
    stores.facts.put(fact("t2", 1))
    stores.facts.purge("t2", "f_1")
    assert handle_batch(facts.read(), index=index, embedder=embedder).failed == []
    assert found(index, "t1", "oolong") == ["fact:f_1"]
    assert found(index, "t2", "oolong") == []


# --- pure parts: record shapes the engines above do not produce ------------------------------


def ttl_removal(tenant: str, fact_id: str, seq: str) -> dict[str, Any]:
    return {
        "eventID": "e-" + seq,
        "eventName": "REMOVE",
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
        "dynamodb": {
            "SequenceNumber": seq,
            "Keys": {"pk": {"S": f"{tenant}#{fact_id}"}},
            "OldImage": {
                "pk": {"S": f"{tenant}#{fact_id}"},
                "typ": {"S": "fact"},
                "tenant": {"S": tenant},
                "fact_id": {"S": fact_id},
            },
        },
    }


def test_a_ttl_expiry_removal_deletes_the_document():
    ops, bad = records_to_operations([ttl_removal("t1", "f_9", "100")])
    assert bad == []
    assert ops == [IndexOp("100", "delete", "t1", doc_ids=("fact:f_9",))]


def test_an_unreadable_record_is_reported_by_its_sequence_number():
    broken = {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "7", "NewImage": {"typ": {"S": "fact"}}}}
    ops, bad = records_to_operations([broken, ttl_removal("t1", "f_1", "8")])
    assert bad == ["7"] and [op.record_id for op in ops] == ["8"]


class FailingEmbedder:
    model_id, dim = "hash-16", 16

    def embed(self, texts):
        raise Unavailable("throttled", retry_after_seconds=2)


def test_an_embedding_outage_fails_the_records_that_needed_vectors():
    doc = SearchDoc(tenant="t1", doc_id="fact:f_1", kind="fact", slug="", title="", text="x", updated_at=T0)
    ops = [IndexOp("1", "upsert", "t1", docs=(doc,)), IndexOp("2", "delete", "t1", doc_ids=("fact:f_2",))]
    out, failed = embed_operations(ops, FailingEmbedder())
    assert failed == ["1"] and out[1] == ops[1]


class FlakyIndex:
    """Records each batch write; refuses one doc id (the index failing that action)."""

    def __init__(self, refuse: str) -> None:
        self.refuse = refuse
        self.calls: list[tuple[list[str], list[str]]] = []

    def write(self, upserts, deletes):
        self.calls.append(([d.doc_id for d in upserts], [d for _, d in deletes]))
        keys = [f"{d.tenant}|{d.doc_id}" for d in upserts] + [f"{t}|{d}" for t, d in deletes]
        return {k for k in keys if k.endswith("|" + self.refuse)}

    def delete_page(self, tenant, slug):
        raise AssertionError("no page removal here")


def test_one_batch_is_one_write_and_a_refused_document_fails_every_record_that_touched_it():
    a = SearchDoc(tenant="t1", doc_id="fact:a", kind="fact", slug="", title="", text="a", updated_at=T0)
    b = SearchDoc(tenant="t1", doc_id="fact:b", kind="fact", slug="", title="", text="b", updated_at=T0)
    index = FlakyIndex(refuse="fact:a")
    failed = apply_operations(
        index,
        [
            IndexOp("1", "upsert", "t1", docs=(a,)),
            IndexOp("2", "upsert", "t1", docs=(b,)),
            IndexOp("3", "delete", "t1", doc_ids=("fact:a",)),  # the document's last state in the batch
        ],
    )
    assert failed == ["1", "3"]
    # one write for the batch; fact:a is sent once, as its final state (deleted)
    assert index.calls == [(["fact:b"], ["fact:a"])]
    assert BatchResult(failed=failed).response() == {
        "batchItemFailures": [{"itemIdentifier": "1"}, {"itemIdentifier": "3"}]
    }


def test_after_a_failure_later_operations_on_the_same_document_wait_for_the_retry():
    a = SearchDoc(tenant="t1", doc_id="fact:a", kind="fact", slug="people/x", title="", text="a", updated_at=T0)

    class PageRemovalFails(FlakyIndex):
        def delete_page(self, tenant, slug):
            raise Unavailable("index busy")

    index = PageRemovalFails(refuse="-")
    failed = apply_operations(
        index,
        [
            IndexOp("1", "delete_page", "t1", slug="people/x"),
            IndexOp("2", "upsert", "t1", docs=(a,), slug="people/x"),  # must not overtake the failed removal
        ],
    )
    assert failed == ["1", "2"] and index.calls == []


def test_a_page_touch_that_changes_no_indexed_text_indexes_nothing(world):
    stores, _, _, _, pages = world
    original = page("t1", "people/alice", "Drinks tea.")
    stores.pages.put(original)
    stores.pages.put(original.model_copy(update={"last_retrieved_at": T0 + timedelta(hours=2)}))
    ops, bad = records_to_operations(pages.read())
    assert bad == [] and [op.action for op in ops] == ["upsert"]  # the insert only


def test_numbering_a_pending_change_indexes_nothing(world):
    """D21: a reader numbering pending changes rewrites `cs` / `ct` only: those MODIFY records
    embed and upsert nothing (the write's own record already indexed the document)."""
    stores, _, _, facts, pages = world
    stores.facts.put(fact("t1", 1))
    stores.pages.put(page("t1", "people/alice", "Drinks tea."))
    stores.facts.changed_after("t1", seq=0, now=T0 + timedelta(hours=1), world_only=False)
    stores.pages.changed_after("t1", seq=0, world_only=False, limit=10)
    fact_records, page_records = facts.read(), pages.read()
    modified = [r for r in fact_records + page_records if r["eventName"] == "MODIFY"]
    assert {r["dynamodb"]["Keys"]["pk"]["S"] for r in modified} >= {"t1#f_1", "t1#people/alice"}
    ops, bad = records_to_operations(fact_records)
    assert bad == [] and [(op.action, op.doc_ids or tuple(d.doc_id for d in op.docs)) for op in ops] == [
        ("upsert", ("fact:f_1",))
    ]  # the insert only
    ops, bad = records_to_operations(page_records)
    assert bad == [] and [op.action for op in ops] == ["upsert"]  # the insert only
