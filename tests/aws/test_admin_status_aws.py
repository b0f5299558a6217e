"""`fleetmem admin status --exact`: the index compared with the tables id by id, per tenant.

Real engines: the stores on moto's server, the stream records read back with the DynamoDB
Streams API and indexed by the stream indexer's own step into the real OpenSearch node. The
HashEmbedder stands in for Bedrock.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleetmem.adapters.aws.opensearch import OpenSearchIndex
from fleetmem.adapters.aws.tables import FACTS, PAGES
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.cli.admin_status import _index_doc_keys, _lag
from fleetmem.models import SearchDoc
from tests.aws import engines
from tests.aws.test_stream import StreamReader, fact, index_batch, page

pytestmark = [pytest.mark.live_opensearch]

T0 = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)


@pytest.fixture
def world(moto_endpoint, opensearch_url):
    prefix = engines.fresh_prefix()
    stores = engines.open_stores(moto_endpoint, prefix)
    embedder = HashEmbedder(dim=16)
    index = OpenSearchIndex(opensearch_url, model_id=embedder.model_id, dim=embedder.dim, prefix=prefix, service="none")
    streams = [StreamReader(moto_endpoint, t.physical_name(prefix)) for t in (FACTS, PAGES)]
    yield stores, index, embedder, streams, engines.dynamodb_client(moto_endpoint), prefix
    index.client.indices.delete(index=index.index, ignore_unavailable=True)
    index.client.close()


def exact_lag(index: OpenSearchIndex, ddb, prefix: str) -> dict:
    index.client.indices.refresh(index=index.index)
    return _lag({}, {"keys": _index_doc_keys(index)}, ddb, prefix, True)


def test_a_document_made_by_no_item_cannot_offset_a_missing_one(world):
    stores, index, embedder, streams, ddb, prefix = world
    for n in range(1, 4):
        stores.facts.put(fact("t1", n))
    stores.pages.put(page("t1", "people/alice", "Drinks oolong."))
    stores.facts.put(fact("t2", 9))
    records = [r for s in streams for r in s.read()]
    assert index_batch(records, stores, index, embedder).failed == []

    clean = exact_lag(index, ddb, prefix)
    assert clean["consistent"] is True and clean["tenants"] == {}
    assert clean["facts"] == {"tables": 4, "index": 4, "missing": 0, "extra": 0}
    assert clean["chunks"] == {"tables": 1, "index": 1, "missing": 0, "extra": 0}

    # one real document lost, one planted for a tenant and an item the tables do not hold: the
    # counts per kind stay equal, the ids do not
    planted = SearchDoc(tenant="t2", doc_id="fact:f_planted", kind="fact", slug="", title="", text="x", updated_at=T0)
    assert index.write([planted], [("t1", "fact:f_2")]) == set()
    lag = exact_lag(index, ddb, prefix)
    assert lag["facts"] == {"tables": 4, "index": 4, "missing": 1, "extra": 1}
    assert lag["consistent"] is False
    assert lag["tenants"] == {
        "t1": {"missing": 1, "extra": 0, "missing_ids": ["fact:f_2"], "extra_ids": []},
        "t2": {"missing": 0, "extra": 1, "missing_ids": [], "extra_ids": ["fact:f_planted"]},
    }


def test_forgotten_facts_and_page_chunks_are_compared_as_the_indexer_builds_them(world):
    stores, index, embedder, streams, ddb, prefix = world
    stores.facts.put(fact("t1", 1))
    stores.facts.put(fact("t1", 2))
    stores.facts.expire("t1", "f_2", at=T0, reason="wrong", actor="agent-a")
    long_body = "\n\n".join(f"## Part {n}\n" + ("green tea notes " * 80) for n in range(4))
    stores.pages.put(page("t1", "people/alice", long_body))
    assert index_batch([r for s in streams for r in s.read()], stores, index, embedder).failed == []
    lag = exact_lag(index, ddb, prefix)
    assert lag["consistent"] is True and lag["facts"]["tables"] == 1 and lag["chunks"]["tables"] > 1
    (chunk, *_) = sorted(k for k in _index_doc_keys(index) if "|chunk:" in k)
    assert index.write([], [tuple(chunk.split("|", 1))]) == set()
    lag = exact_lag(index, ddb, prefix)
    assert lag["tenants"]["t1"]["missing_ids"] == [chunk.split("|", 1)[1]] and lag["chunks"]["missing"] == 1
