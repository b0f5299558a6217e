"""The OpenSearch adapter against a real engine: a single-node OpenSearch 2.19.1 with the k-NN
plugin (lucene engine), assembled from Maven Central by scripts/lib/opensearch.sh and started once
per test run by tests/aws/engines.py. Nothing here is a stand-in: the `_msearch`, the `knn` query
with its efficient filter, the cosine score scale, the per-model indices and the deletes are the
node's own behaviour.

The port contract suite (tests/contract/test_search_index.py) runs on the same node as the
"opensearch" backend; with OPENSEARCH_URL set it runs once more against that endpoint
("opensearch-live", SigV4 per OPENSEARCH_SERVICE=es|aoss)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from fleetmem.adapters.aws.opensearch import OpenSearchIndex
from fleetmem.models import SearchQuery
from tests.contract.builders import doc, unit

pytestmark = pytest.mark.live_opensearch

MODEL = "live-test-4"
DIM = 4


def vec(*components: float) -> bytes:
    return unit(*components, dim=DIM)


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


class _Recorder:
    """Counts the client calls the adapter makes (the calls still go to the real node)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.msearch_bodies: list[list[dict[str, Any]]] = []
        self.searches = 0

    def msearch(self, **kw: Any) -> Any:
        self.msearch_bodies.append(kw["body"])
        return self.client.msearch(**kw)

    def search(self, **kw: Any) -> Any:
        self.searches += 1
        return self.client.search(**kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def _index(url: str, prefix: str, *, model_id: str = MODEL, dim: int = DIM) -> OpenSearchIndex:
    return OpenSearchIndex(url, model_id=model_id, dim=dim, prefix=prefix, service="none", refresh=True)


@pytest.fixture
def prefix(opensearch_url: str) -> Iterator[str]:
    p = "fml" + uuid.uuid4().hex[:8]
    yield p
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[opensearch_url])
    client.indices.delete(index=f"{p}-docs-*", ignore_unavailable=True)
    client.close()


@pytest.fixture
def index(opensearch_url: str, prefix: str) -> Iterator[OpenSearchIndex]:
    ix = _index(opensearch_url, prefix)
    yield ix
    ix.client.close()


def q(tenant: str, text: str = "", **kw: Any) -> SearchQuery:
    kw.setdefault("vector_model", MODEL)
    return SearchQuery(tenant=tenant, text=text, **kw)


def ids(hits: Any) -> list[str]:
    return [h.doc_id for h in hits]


def test_the_node_runs_the_knn_plugin(opensearch_url: str) -> None:
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[opensearch_url])
    try:
        plugins = {p["component"] for p in client.cat.plugins(format="json")}
        assert "opensearch-knn" in plugins
        assert client.info()["version"]["number"] == "2.19.1"
    finally:
        client.close()


def test_the_real_node_is_a_registered_search_backend() -> None:
    from tests.contract.backends import backends_for

    assert "opensearch" in [p.id for p in backends_for("search")]


def test_keyword_and_knn_arms_go_out_in_one_msearch(index: OpenSearchIndex) -> None:
    index.upsert(
        [
            doc("t1", "chunk:drinks/espresso#0", "espresso is a strong coffee", vector=vec(1, 0), vector_model=MODEL),
            doc("t1", "chunk:drinks/tea#0", "green tea is mild", vector=vec(0, 1), vector_model=MODEL),
        ]
    )
    rec = _Recorder(index.client)
    index._client = rec
    hits = index.search(q("t1", "coffee", vector=vec(0.1, 1)))
    assert len(rec.msearch_bodies) == 1 and rec.searches == 0
    (body,) = rec.msearch_bodies
    assert len(body) == 4 and "knn" in body[3]["query"]
    assert hits.vector_error is None
    assert ids(hits.keyword) == ["chunk:drinks/espresso#0"]
    assert ids(hits.vector) == ["chunk:drinks/tea#0", "chunk:drinks/espresso#0"]


def test_vector_scores_come_back_as_cosine(index: OpenSearchIndex) -> None:
    """lucene reports cosinesimil as (1 + cos) / 2; the adapter turns it back into cos, negative
    cosines included."""
    a, b, query = [1.0, 0.0, 0.0, 0.0], [-0.6, 0.8, 0.0, 0.0], [0.8, 0.6, 0.0, 0.0]
    index.upsert(
        [
            doc("t1", "chunk:a#0", "alpha", vector=vec(*a), vector_model=MODEL),
            doc("t1", "chunk:b#0", "beta", vector=vec(*b), vector_model=MODEL),
        ]
    )
    hits = index.search(q("t1", vector=vec(*query)))
    scores = {h.doc_id: h.score for h in hits.vector or ()}
    assert scores["chunk:a#0"] == pytest.approx(cosine(a, query), abs=1e-4)
    assert scores["chunk:b#0"] == pytest.approx(cosine(b, query), abs=1e-4)
    assert scores["chunk:b#0"] == pytest.approx(0.0, abs=1e-4) and scores["chunk:a#0"] == pytest.approx(0.8, abs=1e-4)


def test_knn_filters_are_efficient_a_small_tenant_still_gets_k_hits(index: OpenSearchIndex) -> None:
    """Another tenant's 40 docs sit exactly on the query vector; a post-filter would keep none of
    the k nearest for t1. The filter inside the knn clause returns t1's own docs, k of them."""
    crowd = [
        doc("big", f"chunk:crowd/{n}#0", f"crowd {n}", vector=vec(1, 0, 0, 0), vector_model=MODEL) for n in range(40)
    ]
    mine = [
        doc("t1", f"chunk:mine/{n}#0", f"mine {n}", vector=vec(0.1 * n, 1, 0, 0), vector_model=MODEL) for n in range(3)
    ]
    index.upsert([*crowd, *mine])
    hits = index.search(q("t1", vector=vec(1, 0, 0, 0), k=3))
    assert sorted(ids(hits.vector)) == sorted(d.doc_id for d in mine)


def test_knn_filters_kind_and_visibility(index: OpenSearchIndex) -> None:
    index.upsert(
        [
            doc("t1", "chunk:pub/a#0", "public chunk", vector=vec(1, 0), vector_model=MODEL),
            doc("t1", "chunk:priv/b#0", "private chunk", visibility="private", vector=vec(1, 0), vector_model=MODEL),
            doc("t1", "fact:f_1", "a fact", vector=vec(1, 0), vector_model=MODEL),
        ]
    )
    world_chunks = index.search(q("t1", vector=vec(1, 0)))
    assert ids(world_chunks.vector) == ["chunk:pub/a#0"]
    everything = index.search(q("t1", vector=vec(1, 0), kinds=("chunk", "fact"), world_only=False))
    assert sorted(ids(everything.vector)) == ["chunk:priv/b#0", "chunk:pub/a#0", "fact:f_1"]
    facts = index.search(q("t1", vector=vec(1, 0), kinds=("fact",), world_only=False))
    assert ids(facts.vector) == ["fact:f_1"]


def test_each_model_has_its_own_index(opensearch_url: str, prefix: str) -> None:
    """Index-per-model versioning: a model (or dimension) change is a new index; the old one is
    untouched and vectors of the two models are never compared."""
    old = _index(opensearch_url, prefix, model_id="model-a", dim=4)
    new = _index(opensearch_url, prefix, model_id="model-b", dim=8)
    try:
        old.upsert([doc("t1", "chunk:x#0", "only in the old index", vector=vec(1, 0), vector_model="model-a")])
        new.upsert([doc("t1", "chunk:y#0", "only in the new index", vector=unit(1, 0, dim=8), vector_model="model-b")])
        assert old.index != new.index
        assert old.client.indices.exists(index=old.index) and new.client.indices.exists(index=new.index)
        mapping = new.client.indices.get_mapping(index=new.index)[new.index]["mappings"]["properties"]
        assert mapping["vector"]["dimension"] == 8 and mapping["vector"]["method"]["engine"] == "lucene"
        in_old = old.search(SearchQuery(tenant="t1", text="index", vector=vec(1, 0), vector_model="model-a"))
        in_new = new.search(SearchQuery(tenant="t1", text="index", vector=unit(1, 0, dim=8), vector_model="model-b"))
        assert ids(in_old.keyword) == ids(in_old.vector) == ["chunk:x#0"]
        assert ids(in_new.keyword) == ids(in_new.vector) == ["chunk:y#0"]
        crossed = new.search(SearchQuery(tenant="t1", text="", vector=vec(1, 0), vector_model="model-a"))
        assert crossed.vector is None and crossed.vector_error
    finally:
        old.client.close()
        new.client.close()


def test_deletes_leave_nothing_searchable(index: OpenSearchIndex) -> None:
    index.upsert(
        [
            doc("t1", "fact:f_1", "espresso fact", vector=vec(1, 0), vector_model=MODEL),
            doc("t1", "chunk:drinks/coffee#0", "espresso chunk one", vector=vec(1, 0), vector_model=MODEL),
            doc("t1", "chunk:drinks/coffee#1", "espresso chunk two", vector=vec(1, 0), vector_model=MODEL),
            doc("t2", "chunk:drinks/coffee#0", "espresso chunk of t2", vector=vec(1, 0), vector_model=MODEL),
        ]
    )
    both = ("chunk", "fact")
    index.delete("t1", ["fact:f_1"])
    index.delete("t1", ["fact:never-indexed"])  # a missing doc is not an error
    index.delete_page("t1", "drinks/coffee")
    index.client.indices.refresh(index=index.index)
    t1 = index.search(q("t1", "espresso", vector=vec(1, 0), kinds=both))
    assert t1.keyword == () and t1.vector == ()
    t2 = index.search(q("t2", "espresso", vector=vec(1, 0), kinds=both))
    assert ids(t2.keyword) == ids(t2.vector) == ["chunk:drinks/coffee#0"]


def test_redelivered_upserts_keep_one_doc(index: OpenSearchIndex) -> None:
    d = doc("t1", "chunk:a#0", "same doc", vector=vec(1, 0), vector_model=MODEL)
    index.upsert([d])
    index.upsert([d.model_copy(update={"text": "same doc, new text"})])
    assert index.client.count(index=index.index)["count"] == 1
    hits = index.search(q("t1", "new text", vector=vec(1, 0)))
    assert [h.text for h in hits.keyword] == ["same doc, new text"]
