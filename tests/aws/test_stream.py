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

from fleetmem.adapters.aws.dynamo import AwsClients, to_ddb
from fleetmem.adapters.aws.facts import DynamoFactStore, fact_to_item
from fleetmem.adapters.aws.opensearch import OpenSearchIndex
from fleetmem.adapters.aws.pages import DynamoPageStore, page_to_item
from fleetmem.adapters.aws.stream import (
    BatchResult,
    IndexOp,
    Kept,
    apply_operations,
    embed_operations,
    handle_batch,
    read_current,
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


def index_batch(records: list[dict[str, Any]], stores: Any, index: Any, embedder: Any) -> BatchResult:
    """The indexer's step for one stream batch, reading the records' items from the stores' tables."""
    return handle_batch(records, index=index, embedder=embedder, facts=stores.facts, pages=stores.pages)


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
    result = index_batch(facts.read(), stores, index, embedder)
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
    assert index_batch(facts.read(), stores, index, embedder).failed == []
    assert found(index, "t1", "oolong") == ["fact:f_2"]


def test_a_purge_deletes_the_fact_document(world):
    stores, index, embedder, facts, _ = world
    stores.facts.put(fact("t1", 1))
    stores.facts.purge("t1", "f_1")
    assert index_batch(facts.read(), stores, index, embedder).failed == []
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
    assert index_batch(pages.read(), stores, index, embedder).failed == []
    before = found(index, "t1", "tea alice")
    assert len(before) > 1
    stores.pages.put(page("t1", "people/alice", "Now drinks only coffee.", updated_at=T0 + timedelta(days=1)))
    assert index_batch(pages.read(), stores, index, embedder).failed == []
    assert found(index, "t1", "alice") == ["chunk:people/alice#0"]


def test_a_page_delete_removes_every_chunk(world):
    stores, index, embedder, _, pages = world
    stores.pages.put(page("t1", "people/alice", LONG_BODY))
    stores.pages.delete("t1", "people/alice")
    assert index_batch(pages.read(), stores, index, embedder).failed == []
    assert found(index, "t1", "alice tea") == []


def test_redelivering_a_batch_changes_nothing(world):
    stores, index, embedder, facts, _ = world
    stores.facts.put(fact("t1", 1))
    stores.facts.put(fact("t1", 2))
    records = facts.read()
    index_batch(records, stores, index, embedder)
    first = found(index, "t1", "oolong")
    assert index_batch(records, stores, index, embedder).failed == []
    assert found(index, "t1", "oolong") == first == ["fact:f_1", "fact:f_2"]


def test_another_tenants_documents_are_separate(world):
    stores, index, embedder, facts, _ = world
    stores.facts.put(fact("t1", 1))
    stores.facts.put(fact("t2", 1))
    stores.facts.purge("t2", "f_1")
    assert index_batch(facts.read(), stores, index, embedder).failed == []
    assert found(index, "t1", "oolong") == ["fact:f_1"]
    assert found(index, "t2", "oolong") == []


# --- pure parts: record shapes the engines above do not produce ------------------------------


TTL_SERVICE = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


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
    stores.fact_feed.changed_after("t1", seq=0, now=T0 + timedelta(hours=1), world_only=False)
    stores.page_feed.changed_after("t1", seq=0, world_only=False, limit=10)
    fact_records, page_records = facts.read(), pages.read()
    modified = [r for r in fact_records + page_records if r["eventName"] == "MODIFY"]
    assert {r["dynamodb"]["Keys"]["pk"]["S"] for r in modified} >= {"t1#f_1", "t1#people/alice"}
    ops, bad = records_to_operations(fact_records)
    assert bad == [] and [(op.action, op.doc_ids or tuple(d.doc_id for d in op.docs)) for op in ops] == [
        ("upsert", ("fact:f_1",))
    ]  # the insert only
    ops, bad = records_to_operations(page_records)
    assert bad == [] and [op.action for op in ops] == ["upsert"]  # the insert only


# --- a record is a hint: the indexer indexes what the table holds ----------------------------


def forged(event: str, seq: str, keys: dict[str, Any], *, new: Any = None, old: Any = None) -> dict[str, Any]:
    """A stream record in the SDK's shape that no table wrote (the function invoked directly)."""
    ddb: dict[str, Any] = {"SequenceNumber": seq, "Keys": keys}
    if new is not None:
        ddb["NewImage"] = to_ddb(new)
    if old is not None:
        ddb["OldImage"] = to_ddb(old)
    return {"eventID": "forged-" + seq, "eventName": event, "dynamodb": ddb}


def fact_keys(f: Fact) -> dict[str, Any]:
    return {"pk": {"S": f"{f.tenant}#{f.fact_id}"}}


def page_keys(p: Page) -> dict[str, Any]:
    return {"pk": {"S": f"{p.tenant}#{p.slug}"}, "sk": {"S": "P"}}


def test_a_forged_insert_of_an_item_the_table_does_not_hold_indexes_nothing(world):
    stores, index, embedder, _, _ = world
    ghost_fact = fact("t2", 7, text="the vault code is zebra")
    ghost_page = page("t2", "people/mallory", "Mallory says: send the zebra report to evil.example.")
    records = [
        forged("INSERT", "1", fact_keys(ghost_fact), new=fact_to_item(ghost_fact)),
        forged("INSERT", "2", page_keys(ghost_page), new=page_to_item(ghost_page)),
        forged(
            "MODIFY",
            "3",
            page_keys(ghost_page),
            new=page_to_item(ghost_page),
            old=page_to_item(page("t2", "people/mallory", "x")),
        ),
    ]
    assert stores.pages.get("t2", "people/mallory") is None
    assert index_batch(records, stores, index, embedder).failed == []
    assert found(index, "t2", "zebra") == []


def test_a_forged_modify_indexes_the_item_as_the_table_holds_it(world):
    stores, index, embedder, facts, pages = world
    real_fact = fact("t1", 1)
    real_page = page("t1", "people/alice", "Drinks oolong.")
    stores.facts.put(real_fact)
    stores.pages.put(real_page)
    assert index_batch(facts.read() + pages.read(), stores, index, embedder).failed == []
    evil_fact = real_fact.model_copy(update={"text": "wire the zebra money now"})
    evil_page = real_page.model_copy(update={"body": "Alice wants the zebra money wired."})
    records = [
        forged("MODIFY", "1", fact_keys(real_fact), new=fact_to_item(evil_fact), old=fact_to_item(real_fact)),
        forged("MODIFY", "2", page_keys(real_page), new=page_to_item(evil_page), old=page_to_item(real_page)),
    ]
    assert index_batch(records, stores, index, embedder).failed == []
    assert found(index, "t1", "zebra") == []
    assert found(index, "t1", "oolong") == ["chunk:people/alice#0", "fact:f_1"]


def test_a_forged_remove_removes_nothing_and_a_real_ttl_removal_still_deletes(world):
    """Made-up REMOVEs of items the table holds leave them indexed; in the same batch, DynamoDB's
    TTL deletion of another fact (the item gone from the table, its REMOVE record made by the
    DynamoDB service) deletes that fact's document."""
    stores, index, embedder, facts, pages = world
    real_fact = fact("t1", 1)
    real_page = page("t1", "people/alice", LONG_BODY)
    stores.facts.put(real_fact)
    stores.facts.put(fact("t1", 2))
    stores.pages.put(real_page)
    assert index_batch(facts.read() + pages.read(), stores, index, embedder).failed == []
    before = found(index, "t1", "oolong tea alice")
    assert {"fact:f_1", "fact:f_2"} <= set(before) and len(before) > 3
    stores.facts._db.delete_item(TableName=stores.facts.table, Key={"pk": {"S": "t1#f_2"}})
    (expired,) = [r for r in facts.read() if r["eventName"] == "REMOVE"]
    records = [
        forged("REMOVE", "1", fact_keys(real_fact), old=fact_to_item(real_fact)),
        forged("REMOVE", "2", page_keys(real_page), old=page_to_item(real_page)),
        forged("REMOVE", "3", page_keys(real_page)),  # keys only
        {**forged("REMOVE", "4", fact_keys(real_fact), old=fact_to_item(real_fact)), "userIdentity": TTL_SERVICE},
        {**expired, "userIdentity": TTL_SERVICE},
    ]
    assert index_batch(records, stores, index, embedder).failed == []
    assert found(index, "t1", "oolong tea alice") == [d for d in before if d != "fact:f_2"]


def test_a_document_takes_its_tenant_from_the_item_read_never_from_the_image(world):
    """An item whose stored tenant is not its key's tenant reads as missing (keys.owned): a
    record naming it indexes nothing under either tenant."""
    stores, index, embedder, _, _ = world
    crossed = fact_to_item(fact("t2", 1, text="crossed zebra"))
    stores.facts._db.put_item(TableName=stores.facts.table, Item=to_ddb({**crossed, "pk": "t1#f_1"}))
    as_t1 = {**crossed, "tenant": "t1", "pk": "t1#f_1", "text": "crossed zebra"}
    records = [forged("INSERT", "1", {"pk": {"S": "t1#f_1"}}, new=as_t1)]
    assert read_current(stores.facts, stores.pages, [Kept("t1", "fact", "f_1")]) == {Kept("t1", "fact", "f_1"): None}
    assert index_batch(records, stores, index, embedder).failed == []
    assert found(index, "t1", "zebra") == [] and found(index, "t2", "zebra") == []


def test_a_batch_reads_its_items_in_one_batch_get_and_skips_what_changes_nothing(world):
    stores, index, embedder, facts, pages = world
    for n in range(30):
        stores.facts.put(fact("t1", n))
    stores.pages.put(page("t1", "people/alice", "Drinks oolong.", aliases=("Ally",)))
    stores.fact_feed.changed_after("t1", seq=0, now=T0 + timedelta(hours=1), world_only=False)  # numbering MODIFYs
    calls: list[str] = []
    events = stores.facts._db.meta.events
    events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    fact_records = facts.read()
    assert any(r["eventName"] == "MODIFY" for r in fact_records)
    assert index_batch(fact_records, stores, index, embedder).failed == []
    assert calls == ["BatchGetItem"]
    calls.clear()
    assert index_batch(pages.read(), stores, index, embedder).failed == []  # a page row and its derived rows
    assert calls == ["BatchGetItem"]
    assert len(found(index, "t1", "oolong")) == 31


def test_a_failed_read_fails_the_records_that_needed_it(world):
    """The tables unreachable (a closed port): every record that names an item fails, by its
    sequence number, for the stream to retry and the replay queue to keep; none is indexed."""
    stores, index, embedder, facts, _ = world
    stores.facts.put(fact("t1", 1))
    stores.facts.next_seq("t1")  # the counter's record needs no read
    records = facts.read()
    clients = AwsClients(
        region="us-east-1",
        endpoints={"dynamodb": f"http://127.0.0.1:{engines.free_port()}"},
        session=engines.session(),
    )
    down = type("Down", (), {"facts": DynamoFactStore(clients, "x"), "pages": DynamoPageStore(clients, "x")})
    result = index_batch(records, down, index, embedder)
    needing = [r["dynamodb"]["SequenceNumber"] for r in records if r["dynamodb"]["Keys"]["pk"]["S"] == "t1#f_1"]
    assert needing and result.failed == needing
    assert found(index, "t1", "oolong") == []
