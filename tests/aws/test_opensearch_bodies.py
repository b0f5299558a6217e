"""OpenSearch request bodies and response parsing, without a server.

The bodies are pinned as golden JSON (tests/aws/golden/; the real node runs them in
tests/aws/test_live_opensearch.py) and checked against the documented DSL: efficient filtering puts the filter
INSIDE the knn field clause (lucene engine, HNSW, cosinesimil), keyword search is a `multi_match`
under a bool filter on tenant/kind/visibility. Responses recorded in the real shapes
(tests/aws/golden/responses/; the knn error is an engine without k-NN answering) are parsed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetmem.adapters.aws.opensearch_bodies import (
    bulk_body,
    delete_page_body,
    doc_key,
    index_body,
    index_name,
    keyword_body,
    knn_body,
    msearch_body,
    parse_hits,
    parse_lookup,
    parse_msearch,
)
from fleetmem.errors import Unavailable
from tests.aws.opensearch_cases import DOCS, INDEX, MODEL, QUERY, VECTOR

GOLDEN = Path(__file__).parent / "golden"


def golden(name: str):
    return json.loads((GOLDEN / name).read_text())


def response(name: str) -> dict:
    return json.loads((GOLDEN / "responses" / name).read_text())


def test_the_index_mapping_matches_its_golden_file():
    assert index_body(4) == golden("index_body.json")


def test_the_mapping_declares_hnsw_cosine_on_lucene_with_the_embedders_dimension():
    body = index_body(1024)
    assert body["settings"]["index"]["knn"] is True
    vec = body["mappings"]["properties"]["vector"]
    assert vec["type"] == "knn_vector" and vec["dimension"] == 1024
    assert (vec["method"]["name"], vec["method"]["engine"], vec["method"]["space_type"]) == (
        "hnsw",
        "lucene",
        "cosinesimil",
    )
    props = body["mappings"]["properties"]
    assert {props[f]["type"] for f in ("tenant", "visibility", "kind")} == {"keyword"}
    assert props["text"]["analyzer"] == props["title"]["analyzer"]


def test_index_names_carry_the_model_and_dimension():
    assert index_name("fleetmem", MODEL, 4) == INDEX
    assert index_name("fleetmem", MODEL, 1024) != index_name("fleetmem", "all-MiniLM-L6-v2", 384)


def test_keyword_and_knn_bodies_match_their_golden_files():
    assert keyword_body(QUERY) == golden("keyword_body.json")
    assert knn_body(QUERY, VECTOR) == golden("knn_body.json")


def test_the_knn_filter_is_an_efficient_filter_inside_the_knn_clause():
    clause = knn_body(QUERY, VECTOR)["query"]["knn"]["vector"]
    assert clause["k"] == QUERY.k and clause["vector"] == VECTOR
    filters = clause["filter"]["bool"]["filter"]
    assert {"term": {"tenant": "t1"}} in filters
    assert {"term": {"visibility": "world"}} in filters
    assert {"terms": {"kind": ["chunk", "fact"]}} in filters


def test_remote_reads_filter_visibility_and_trusted_reads_do_not():
    trusted = QUERY.model_copy(update={"world_only": False})
    kw = keyword_body(trusted)["query"]["bool"]["filter"]
    knn = knn_body(trusted, VECTOR)["query"]["knn"]["vector"]["filter"]["bool"]["filter"]
    assert kw == knn == [{"term": {"tenant": "t1"}}, {"terms": {"kind": ["chunk", "fact"]}}]


def test_msearch_pairs_a_header_with_each_arm_keyword_first():
    lines = msearch_body(QUERY, VECTOR)
    assert lines == golden("msearch_body.json")
    assert lines[::2] == [{}, {}]  # the index is named in the path (`POST /<alias>/_msearch`)
    assert "multi_match" in json.dumps(lines[1]) and "knn" in lines[3]["query"]
    assert len(msearch_body(QUERY, None)) == 2


def test_bulk_upserts_by_tenant_scoped_id_and_never_stores_a_foreign_models_vector():
    lines = bulk_body(INDEX, upserts=DOCS, deletes=[("t1", "fact:f_9")], model_id=MODEL)
    assert lines == golden("bulk_body.json")
    assert lines[0] == {"index": {"_index": INDEX, "_id": "t1|chunk:people/alice#0"}}
    assert "vector" in lines[1] and "vector" not in lines[3]
    assert lines[4] == {"delete": {"_index": INDEX, "_id": "t1|fact:f_9"}}


def test_every_doc_carries_its_tenant_scoped_key():
    lines = bulk_body(INDEX, upserts=DOCS, model_id=MODEL)
    assert [lines[1]["doc_key"], lines[3]["doc_key"]] == ["t1|chunk:people/alice#0", "t1|fact:f_1"]
    assert doc_key("t1", "fact:f_1") != doc_key("t2", "fact:f_1")


def test_serverless_bulk_sends_only_ids_a_lookup_found_and_folds_duplicates():
    found = {"t1|chunk:people/alice#0": ["gen-a", "gen-b"], "t1|fact:f_9": ["gen-c", "gen-d"]}
    lines = bulk_body(
        INDEX, upserts=DOCS, deletes=[("t1", "fact:f_9"), ("t1", "fact:gone")], model_id=MODEL, found=found
    )
    assert lines[0] == {"delete": {"_index": INDEX, "_id": "gen-b"}}  # the duplicate
    assert lines[1] == {"index": {"_index": INDEX, "_id": "gen-a"}}  # the kept copy, rewritten
    assert lines[3] == {"index": {"_index": INDEX}}  # a new doc: the node picks the `_id`
    assert lines[5:] == [{"delete": {"_index": INDEX, "_id": "gen-c"}}, {"delete": {"_index": INDEX, "_id": "gen-d"}}]


def test_delete_page_targets_one_tenants_chunks_of_one_slug():
    assert delete_page_body("t1", "people/alice") == golden("delete_page_body.json")


def test_a_lookup_that_matched_more_than_it_read_is_retried_not_half_done():
    hit = {"_id": "gen-a", "_source": {"doc_key": "t1|fact:f_1"}}
    assert parse_lookup({"hits": {"total": {"value": 1}, "hits": [hit]}}) == {"t1|fact:f_1": ["gen-a"]}
    with pytest.raises(Unavailable):
        parse_lookup({"hits": {"total": {"value": 2}, "hits": [hit]}})


def test_a_doc_stored_twice_is_answered_once_at_its_best_rank():
    rows = [
        {"_id": i, "_score": s, "_source": {"doc_id": d, "kind": "fact"}}
        for i, s, d in [("x", 3.0, "fact:f_1"), ("y", 2.0, "fact:f_2"), ("z", 1.0, "fact:f_1")]
    ]
    hits = parse_hits({"hits": {"hits": rows}})
    assert [(h.doc_id, h.score) for h in hits] == [("fact:f_1", 3.0), ("fact:f_2", 2.0)]


def test_a_hybrid_response_parses_both_arms_with_cosine_vector_scores():
    hits = parse_msearch(response("msearch_hybrid_ok.json"), vector_asked=True)
    assert [h.doc_id for h in hits.keyword] == ["chunk:people/alice#0", "fact:f_7"]
    assert hits.keyword[1].fact_id == "f_7"
    assert hits.vector is not None and [h.doc_id for h in hits.vector] == ["fact:f_7"]
    # lucene cosinesimil reports (1 + cos) / 2; the port speaks cosine
    assert hits.vector[0].score == pytest.approx(0.9)
    assert hits.vector_error is None


def test_a_rejected_knn_arm_keeps_the_keyword_arm_and_says_why():
    hits = parse_msearch(response("msearch_knn_unsupported.json"), vector_asked=True)
    assert [h.doc_id for h in hits.keyword] == ["chunk:a#0"]
    assert hits.vector is None and hits.vector_error


def test_a_missing_index_is_an_empty_brain_not_an_outage():
    hits = parse_msearch(response("msearch_index_missing.json"), vector_asked=True)
    assert hits.keyword == () and hits.vector == () and hits.vector_error is None


def test_a_rejected_keyword_arm_is_unavailable():
    with pytest.raises(Unavailable):
        parse_msearch(response("msearch_keyword_rejected.json"), vector_asked=True)
