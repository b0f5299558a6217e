"""The OpenSearch adapter against a real engine: a single-node OpenSearch 2.19.1 with the k-NN
plugin (lucene engine), assembled from Maven Central by scripts/lib/opensearch.sh and started once
per test run by tests/aws/engines.py. Nothing here is a stand-in: the `_msearch`, the `knn` query
with its efficient filter, the cosine score scale, the per-model indices and the deletes are the
node's own behaviour.

Every test that takes the `flavour` fixture runs twice: as a managed domain (`_id` = doc_key) and
under serverless constraints (the `serverless` flavour through tests/aws/serverless.py's
transport, which fails the test on any custom `_id` or `_delete_by_query` the adapter sends).

The port contract suite (tests/contract/test_search_index.py) runs on the same node as the
"opensearch" and "opensearch-serverless" backends; with OPENSEARCH_URL set it runs once more against that endpoint
("opensearch-live", SigV4 per OPENSEARCH_SERVICE=es|aoss)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from fleetmem.adapters.aws.opensearch import OpenSearchIndex
from fleetmem.models import SearchQuery
from tests.aws.serverless import ServerlessViolation, serverless_index
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


@pytest.fixture(params=["domain", "serverless"])
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _index(url: str, prefix: str, flavour: str, *, model_id: str = MODEL, dim: int = DIM) -> OpenSearchIndex:
    if flavour == "serverless":
        return serverless_index(url, model_id=model_id, dim=dim, prefix=prefix)[0]
    return OpenSearchIndex(url, model_id=model_id, dim=dim, prefix=prefix, service="none", refresh=True)


def settle(ix: OpenSearchIndex) -> None:
    """Make the writes searchable (the serverless flavour sends no refresh; a collection refreshes
    on its own)."""
    ix.ensure_index()
    ix.client.indices.refresh(index=ix.index)


def stored(ix: OpenSearchIndex, tenant: str) -> list[str]:
    """The doc ids of `tenant` as the node holds them, duplicates included."""
    settle(ix)
    body = {"size": 100, "query": {"term": {"tenant": tenant}}}
    return sorted(h["_source"]["doc_id"] for h in ix.client.search(index=ix.index, body=body)["hits"]["hits"])


@pytest.fixture
def prefix(opensearch_url: str) -> Iterator[str]:
    p = "fml" + uuid.uuid4().hex[:8]
    yield p
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[opensearch_url])
    client.indices.delete(index=f"{p}-docs-*", ignore_unavailable=True)
    client.close()


@pytest.fixture
def index(opensearch_url: str, prefix: str, flavour: str) -> Iterator[OpenSearchIndex]:
    ix = _index(opensearch_url, prefix, flavour)
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
    settle(index)
    rec = _Recorder(index.client)
    index._client = index._search_client = rec  # queries use the request-path client
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
    settle(index)
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
    settle(index)
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
    settle(index)
    world_chunks = index.search(q("t1", vector=vec(1, 0)))
    assert ids(world_chunks.vector) == ["chunk:pub/a#0"]
    everything = index.search(q("t1", vector=vec(1, 0), kinds=("chunk", "fact"), world_only=False))
    assert sorted(ids(everything.vector)) == ["chunk:priv/b#0", "chunk:pub/a#0", "fact:f_1"]
    facts = index.search(q("t1", vector=vec(1, 0), kinds=("fact",), world_only=False))
    assert ids(facts.vector) == ["fact:f_1"]


def test_each_model_has_its_own_index(opensearch_url: str, prefix: str, flavour: str) -> None:
    """Index-per-model versioning: a model (or dimension) change is a new index; the old one is
    untouched and vectors of the two models are never compared."""
    old = _index(opensearch_url, prefix, flavour, model_id="model-a", dim=4)
    new = _index(opensearch_url, prefix, flavour, model_id="model-b", dim=8)
    try:
        old.upsert([doc("t1", "chunk:x#0", "only in the old index", vector=vec(1, 0), vector_model="model-a")])
        new.upsert([doc("t1", "chunk:y#0", "only in the new index", vector=unit(1, 0, dim=8), vector_model="model-b")])
        settle(old), settle(new)
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
            doc("t1", "chunk:drinks/coffee-beans#0", "espresso of another page", vector=vec(1, 0), vector_model=MODEL),
            doc("t2", "chunk:drinks/coffee#0", "espresso chunk of t2", vector=vec(1, 0), vector_model=MODEL),
        ]
    )
    settle(index)
    both = ("chunk", "fact")
    index.delete("t1", ["fact:f_1"])
    index.delete("t1", ["fact:never-indexed"])  # a missing doc is not an error
    index.delete_page("t1", "drinks/coffee")
    index.delete_page("t1", "drinks/never-written")
    settle(index)
    t1 = index.search(q("t1", "espresso", vector=vec(1, 0), kinds=both))
    assert ids(t1.keyword) == ids(t1.vector) == ["chunk:drinks/coffee-beans#0"]
    t2 = index.search(q("t2", "espresso", vector=vec(1, 0), kinds=both))
    assert ids(t2.keyword) == ids(t2.vector) == ["chunk:drinks/coffee#0"]


def test_a_delete_page_on_a_missing_index_is_a_no_op(index: OpenSearchIndex) -> None:
    index.delete_page("t1", "drinks/coffee")
    index.delete("t1", ["fact:f_1"])
    assert stored(index, "t1") == []


def test_redelivered_upserts_keep_one_doc(index: OpenSearchIndex) -> None:
    d = doc("t1", "chunk:a#0", "same doc", vector=vec(1, 0), vector_model=MODEL)
    index.upsert([d])
    settle(index)
    index.upsert([d.model_copy(update={"text": "same doc, new text"})])
    settle(index)
    assert index.client.count(index=index.index)["count"] == 1
    hits = index.search(q("t1", "new text", vector=vec(1, 0)))
    assert [h.text for h in hits.keyword] == ["same doc, new text"]


def test_a_write_then_a_delete_before_any_refresh_leaves_nothing(index: OpenSearchIndex) -> None:
    """A fact written and purged in one stream batch: the delete runs before the write is
    searchable (refreshes are off here, as on a collection between its refreshes)."""
    index.ensure_index()
    index.client.indices.put_settings(index=index.index, body={"index": {"refresh_interval": "-1"}})
    index._refresh = False
    index.upsert([doc("t1", "fact:f_1", "espresso fact", vector=vec(1, 0), vector_model=MODEL)])
    index.upsert([doc("t1", "chunk:drinks/coffee#0", "espresso chunk", vector=vec(1, 0), vector_model=MODEL)])
    index.delete("t1", ["fact:f_1"])
    index.delete_page("t1", "drinks/coffee")
    assert stored(index, "t1") == []


def test_serverless_duplicates_from_a_race_are_folded_and_never_returned_twice(
    opensearch_url: str, prefix: str
) -> None:
    """Two indexer processes deliver the same new doc before either write is searchable: both
    find nothing and both insert. Search still returns the doc once; the next write of that doc
    keeps one and deletes the other; a delete removes every copy."""
    a, transport = serverless_index(opensearch_url, model_id=MODEL, dim=DIM, prefix=prefix)
    b, _ = serverless_index(opensearch_url, model_id=MODEL, dim=DIM, prefix=prefix)
    try:
        d = doc("t1", "fact:f_1", "espresso fact", vector=vec(1, 0), vector_model=MODEL)
        a.ensure_index()
        a.client.indices.put_settings(index=a.index, body={"index": {"refresh_interval": "-1"}})
        a.upsert([d])
        b.upsert([d])
        assert stored(a, "t1") == ["fact:f_1", "fact:f_1"]
        hits = a.search(q("t1", "espresso", vector=vec(1, 0), kinds=("fact",)))
        assert ids(hits.keyword) == ids(hits.vector) == ["fact:f_1"]
        b.upsert([d.model_copy(update={"text": "espresso fact, corrected"})])
        assert stored(a, "t1") == ["fact:f_1"]
        assert [h.text for h in a.search(q("t1", "espresso", kinds=("fact",))).keyword] == ["espresso fact, corrected"]
        a.upsert([d]), b.upsert([d])
        a.delete("t1", ["fact:f_1"])
        assert stored(a, "t1") == []
        indexed = [h for h in transport.bulk_actions if "index" in h]
        assert indexed and all("_id" not in h["index"] or h["index"]["_id"] in transport.issued for h in indexed)
    finally:
        a.client.close()
        b.client.close()


def test_the_serverless_transport_refuses_a_custom_id(opensearch_url: str, prefix: str) -> None:
    """The constraint check can fail: the domain flavour's `_id` = doc_key is refused."""
    from opensearchpy import OpenSearch

    from tests.aws.serverless import ServerlessTransport

    client = OpenSearch(hosts=[opensearch_url], transport_class=ServerlessTransport)
    domain = OpenSearchIndex(opensearch_url, model_id=MODEL, dim=DIM, prefix=prefix, service="none", client=client)
    try:
        with pytest.raises(ServerlessViolation, match="custom _id"):
            domain.upsert([doc("t1", "fact:f_1", "espresso fact")])
        with pytest.raises(ServerlessViolation, match="_delete_by_query"):
            client.delete_by_query(index=domain.index, body={"query": {"match_all": {}}})
    finally:
        client.close()


def test_an_unknown_flavour_is_refused() -> None:
    with pytest.raises(ValueError, match="domain, serverless"):
        OpenSearchIndex("http://127.0.0.1:9", model_id=MODEL, dim=DIM, flavour="vectorsearch")


def test_every_request_of_the_functions_names_a_docs_index_in_its_path(
    opensearch_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The domain's access policy allows the readers `POST /<alias>/_msearch` and the indexer
    `_bulk`/`_search` under the docs indices only (infra/constructs/search.py): every request the
    request path and the indexer send must name the index in its path, never `/_msearch` or
    `/_bulk` at the domain's root with the index inside the body."""
    from opensearchpy import Transport

    paths: list[tuple[str, str]] = []
    real = Transport.perform_request

    def recording(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        paths.append((method, url))
        return real(self, method, url, *args, **kwargs)

    monkeypatch.setattr(Transport, "perform_request", recording)
    ix = _index(opensearch_url, prefix, "domain")
    try:
        espresso = doc("t1", "chunk:drinks/espresso#0", "a strong coffee", vector=vec(1, 0), vector_model=MODEL)
        ix.upsert([espresso])
        ix.replace_page("t1", "drinks/tea", [doc("t1", "chunk:drinks/tea#0", "green tea is mild")])
        ix.delete("t1", ["chunk:drinks/espresso#0"])
        ix.search(q("t1", "coffee", vector=vec(1, 0)))
    finally:
        ix.client.close()
    assert {m for m, _ in paths} >= {"HEAD", "PUT", "POST"}
    assert any(url.endswith("/_msearch") for _, url in paths) and any(url.endswith("/_bulk") for _, url in paths)
    outside = [(m, url) for m, url in paths if not url.startswith(f"/{prefix}-docs-")]
    assert outside == []
