"""SearchIndex contract (fleetmem.ports.SearchIndex): keyword arm, vector arm, filters, deletes.

A backend whose engine has no vector search declares `vector_search = False`; for it, the suites
assert the documented degradation instead (the vector arm reports `vector_error`, `vector` is None,
the keyword arm still answers). The suites' vectors are 8-dimensional and claim model `MODEL`.
"""

from __future__ import annotations

import pytest
from tests.contract.builders import doc, unit

from fleetmem.models import SearchQuery

HOSTILE = [
    '"',
    '""',
    "*",
    "NEAR(",
    "NEAR(a b",
    "-",
    "--",
    "-tea",
    "tea*",
    "^tea",
    "title:tea",
    "text : tea",
    "tea AND",
    "OR",
    "NOT tea",
    "(tea",
    "tea)",
    "{tea}",
    "[tea]",
    "'",
    "a'b",
    "tea + -",
    "\\",
    "\x00",
    "ü∂ƒ ©",
    "中文 日本語",
    "🙂🙂",
    "tenant_key:x",
    "rowid=1",
    "'; DROP TABLE docs; --",
    " " * 3,
    "",
]


MODEL = "contract-test-8"


@pytest.fixture
def vector_search(search_backend) -> bool:
    return bool(getattr(search_backend, "vector_search", True))


def vec(hits, supported: bool):
    """The vector arm's hits when the backend has vector search; else assert the degradation."""
    if supported:
        assert hits.vector_error is None
        assert hits.vector is not None
        return hits.vector
    assert hits.vector is None and hits.vector_error
    return None


def q(tenant: str, text: str = "", **kw) -> SearchQuery:
    return SearchQuery(tenant=tenant, text=text, **kw)


def ids(hits) -> list[str]:
    return [h.doc_id for h in hits]


@pytest.fixture
def corpus(search, settle, tenant, other_tenant):
    search.upsert(
        [
            doc(
                tenant,
                "chunk:drinks/tea#0",
                "Green tea is grown in the hills",
                title="Tea",
                vector=unit(1, 0),
                vector_model=MODEL,
            ),
            doc(
                tenant,
                "chunk:drinks/coffee#0",
                "Coffee beans are roasted",
                title="Coffee",
                vector=unit(0, 1),
                vector_model=MODEL,
            ),
            doc(
                tenant,
                "chunk:drinks/coffee#1",
                "Espresso is strong coffee",
                title="Coffee",
                vector=unit(0.2, 1),
                vector_model=MODEL,
            ),
            doc(
                tenant,
                "chunk:secret/tea#0",
                "Secret tea blend recipe",
                title="Secret",
                visibility="private",
                vector=unit(1, 0.1),
                vector_model=MODEL,
            ),
            doc(
                tenant,
                "fact:f_1",
                "Alice likes tea with milk",
                slug="people/alice",
                vector=unit(0.9, 0.1),
                vector_model=MODEL,
            ),
            doc(
                other_tenant,
                "chunk:drinks/tea#0",
                "Their tea tea tea",
                title="Tea",
                vector=unit(1, 0),
                vector_model=MODEL,
            ),
        ]
    )
    settle()


def test_write_through_is_declared(search):
    assert isinstance(search.write_through, bool)


def test_keyword_finds_matching_chunks_best_first_with_positive_scores(search, corpus, tenant):
    hits = search.search(q(tenant, "coffee")).keyword
    assert set(ids(hits)) == {"chunk:drinks/coffee#0", "chunk:drinks/coffee#1"}
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    first = hits[0]
    assert (first.kind, first.slug, first.title) == ("chunk", "drinks/coffee", "Coffee")


def test_a_query_word_in_the_title_outranks_it_in_the_text(search, settle, tenant):
    search.upsert(
        [
            doc(tenant, "chunk:a/x#0", "notes about gardens and other things", title="Orchid"),
            doc(tenant, "chunk:a/y#0", "notes about orchid and other things", title="Garden"),
        ]
    )
    settle()
    assert ids(search.search(q(tenant, "orchid")).keyword) == ["chunk:a/x#0", "chunk:a/y#0"]


def test_keyword_any_word_matches(search, corpus, tenant):
    got = ids(search.search(q(tenant, "espresso hills")).keyword)
    assert set(got) == {"chunk:drinks/coffee#1", "chunk:drinks/tea#0"}


def test_no_arm_returns_another_tenants_docs(search, corpus, tenant, other_tenant, vector_search):
    mine = search.search(
        q(
            tenant,
            "tea their",
            world_only=False,
            kinds=("chunk", "fact"),
            vector=unit(1, 0),
            vector_model=MODEL,
        )
    )
    texts = [h.text for h in mine.keyword + (vec(mine, vector_search) or ())]
    assert texts and "Their tea tea tea" not in texts
    theirs = search.search(
        q(
            other_tenant,
            "coffee espresso secret alice",
            world_only=False,
            kinds=("chunk", "fact"),
            vector=unit(0, 1),
            vector_model=MODEL,
        )
    )
    assert theirs.keyword == ()
    if vector_search:
        assert ids(theirs.vector) == ["chunk:drinks/tea#0"]


def test_world_only_hides_private_docs_in_both_arms(search, corpus, tenant, vector_search):
    world = search.search(q(tenant, "tea secret", vector=unit(1, 0.1), vector_model=MODEL))
    assert "chunk:secret/tea#0" not in ids(world.keyword) + ids(vec(world, vector_search) or ())
    everyone = search.search(q(tenant, "tea secret", vector=unit(1, 0.1), vector_model=MODEL, world_only=False))
    assert "chunk:secret/tea#0" in ids(everyone.keyword)
    if vector_search:
        assert ids(vec(everyone, True))[0] == "chunk:secret/tea#0"


def test_kinds_filter_both_arms(search, corpus, tenant, vector_search):
    facts_only = search.search(q(tenant, "tea", kinds=("fact",), vector=unit(1, 0), vector_model=MODEL))
    assert ids(facts_only.keyword) == ["fact:f_1"]
    assert facts_only.keyword[0].fact_id == "f_1"
    chunks = search.search(q(tenant, "tea", vector=unit(1, 0), vector_model=MODEL))
    assert "fact:f_1" not in ids(chunks.keyword)
    if vector_search:
        assert ids(vec(facts_only, True)) == ["fact:f_1"]
        assert "fact:f_1" not in ids(vec(chunks, True))
        both = search.search(q(tenant, "tea", kinds=("chunk", "fact"), vector=unit(1, 0), vector_model=MODEL))
        assert {"fact:f_1", "chunk:drinks/tea#0"} <= set(ids(both.keyword)) & set(ids(vec(both, True)))


def test_k_bounds_each_arm(search, corpus, tenant, vector_search):
    hits = search.search(
        q(tenant, "tea coffee espresso", k=2, kinds=("chunk", "fact"), vector=unit(1, 1), vector_model=MODEL)
    )
    assert len(hits.keyword) == 2
    assert vec(hits, vector_search) is None or len(hits.vector) == 2


def test_vector_arm_ranks_by_cosine(search, corpus, tenant, vector_search):
    hits = vec(search.search(q(tenant, "", vector=unit(0, 1), vector_model=MODEL)), vector_search)
    if hits is None:
        return
    assert ids(hits) == ["chunk:drinks/coffee#0", "chunk:drinks/coffee#1", "chunk:drinks/tea#0"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].score > hits[1].score > hits[2].score
    assert hits[1].text == "Espresso is strong coffee"


def test_the_vector_arm_does_not_run_without_a_query_vector(search, corpus, tenant):
    hits = search.search(q(tenant, "tea"))
    assert hits.vector is None and hits.vector_error is None
    assert hits.keyword


def test_vectors_of_another_model_are_never_compared(search, settle, corpus, tenant, vector_search):
    """A backend either keeps vectors of several models apart or refuses a foreign model's query
    (`vector_error`); it never compares vectors across models."""
    search.upsert(
        [
            doc(tenant, "chunk:m/b#0", "model b chunk", vector=unit(0, 0, 1), vector_model="m-b"),
            doc(tenant, "chunk:m/none#0", "not embedded chunk"),
        ]
    )
    settle()
    a = vec(search.search(q(tenant, vector=unit(0, 0, 1), vector_model=MODEL)), vector_search)
    if a is not None:
        assert set(ids(a)) == {"chunk:drinks/tea#0", "chunk:drinks/coffee#0", "chunk:drinks/coffee#1"}
    b = search.search(q(tenant, vector=unit(0, 0, 1), vector_model="m-b"))
    assert b.vector_error or ids(b.vector) == ["chunk:m/b#0"]
    unknown = search.search(q(tenant, "chunk", vector=unit(1), vector_model="m-unknown"))
    assert unknown.vector_error or unknown.vector == ()
    assert {"chunk:m/b#0", "chunk:m/none#0"} <= set(ids(unknown.keyword))


def test_a_malformed_query_vector_reports_and_keeps_the_keyword_arm(search, corpus, tenant):
    hits = search.search(q(tenant, "coffee", vector=b"\x00\x00", vector_model=MODEL))
    assert hits.vector_error and hits.vector is None
    assert set(ids(hits.keyword)) == {"chunk:drinks/coffee#0", "chunk:drinks/coffee#1"}


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_query_text_is_searched_as_plain_words(search, corpus, tenant, text, vector_search):
    hits = search.search(q(tenant, text, vector=unit(1, 0), vector_model=MODEL, kinds=("chunk", "fact")))
    assert all(h.score > 0 for h in hits.keyword)
    vec(hits, vector_search)


@pytest.mark.parametrize(
    "text",
    [
        "What did Maya do and how did it go? " * 200 + "espresso",  # 1,800 words, 9 distinct
        " ".join(f"w{i}" for i in range(1500)) + " espresso",  # 1,500 distinct words
        "中文日本語" * 300 + " espresso",  # 1,500 ideographs, each a word to the standard tokenizer
    ],
    ids=["repeated", "distinct", "ideographs"],
)
def test_a_query_of_thousands_of_words_is_answered_not_refused(search, corpus, tenant, text, vector_search):
    """A pasted transcript as the query: every backend answers it (OpenSearch refuses a query of more
    than 1,024 clauses, so its keyword arm keeps the query's first distinct words)."""
    hits = search.search(q(tenant, text, vector=unit(1, 0), vector_model=MODEL, kinds=("chunk", "fact")))
    assert all(h.score > 0 for h in hits.keyword)
    vec(hits, vector_search)


def test_a_real_word_inside_fts_syntax_still_matches(search, corpus, tenant):
    for text in ['NEAR("espresso', "espresso*", "-espresso", "title:espresso", '"espresso" AND OR']:
        assert ids(search.search(q(tenant, text)).keyword) == ["chunk:drinks/coffee#1"], text


def test_upsert_replaces_a_doc(search, settle, corpus, tenant, vector_search):
    search.upsert(
        [
            doc(
                tenant,
                "chunk:drinks/tea#0",
                "Oolong leaves",
                title="Tea",
                vector=unit(0, 0, 1),
                vector_model=MODEL,
            )
        ]
    )
    settle()
    assert "chunk:drinks/tea#0" not in ids(search.search(q(tenant, "hills")).keyword)
    assert ids(search.search(q(tenant, "oolong")).keyword) == ["chunk:drinks/tea#0"]
    top = vec(search.search(q(tenant, vector=unit(0, 0, 1), vector_model=MODEL)), vector_search)
    if top is not None:
        assert (top[0].doc_id, top[0].text) == ("chunk:drinks/tea#0", "Oolong leaves")


def test_new_docs_are_visible_to_the_vector_arm_after_a_search(search, settle, corpus, tenant, vector_search):
    search.search(q(tenant, vector=unit(0, 0, 0, 1), vector_model=MODEL))
    search.upsert([doc(tenant, "chunk:late/x#0", "late", vector=unit(0, 0, 0, 1), vector_model=MODEL)])
    settle()
    hits = vec(search.search(q(tenant, "late", vector=unit(0, 0, 0, 1), vector_model=MODEL)), vector_search)
    assert hits is None or ids(hits)[0] == "chunk:late/x#0"


def test_delete_removes_docs_from_both_arms(search, settle, corpus, tenant, other_tenant, vector_search):
    search.delete(tenant, ["chunk:drinks/tea#0", "chunk:missing#0"])
    settle()
    hits = search.search(q(tenant, "tea", vector=unit(1, 0), vector_model=MODEL))
    assert "chunk:drinks/tea#0" not in ids(hits.keyword) + ids(vec(hits, vector_search) or ())
    assert ids(search.search(q(other_tenant, "tea")).keyword) == ["chunk:drinks/tea#0"]


def test_delete_page_removes_every_chunk_of_that_page_only(search, settle, corpus, tenant, other_tenant, vector_search):
    search.upsert([doc(tenant, "fact:f_2", "coffee fact", slug="drinks/coffee", vector=unit(0, 1), vector_model=MODEL)])
    settle()
    search.delete_page(tenant, "drinks/coffee")
    settle()
    hits = search.search(q(tenant, "coffee espresso", kinds=("chunk", "fact"), vector=unit(0, 1), vector_model=MODEL))
    found = hits.keyword + (vec(hits, vector_search) or ())
    assert not [h for h in found if h.kind == "chunk" and h.slug == "drinks/coffee"]
    assert "fact:f_2" in ids(hits.keyword)
    search.delete_page(other_tenant, "drinks/tea")
    settle()
    assert "chunk:drinks/tea#0" in ids(search.search(q(tenant, "tea")).keyword)


def test_replace_page_makes_the_given_chunks_the_pages_only_chunks(
    search, settle, corpus, tenant, other_tenant, vector_search
):
    search.upsert([doc(tenant, "fact:f_2", "coffee fact", slug="drinks/coffee")])
    settle()
    search.replace_page(
        tenant,
        "drinks/coffee",
        [
            doc(tenant, "chunk:drinks/coffee#0", "Coffee beans are ground", vector=unit(0, 1), vector_model=MODEL),
            doc(tenant, "chunk:drinks/coffee#2", "Decaf coffee at night", vector=unit(0, 1, 0.3), vector_model=MODEL),
        ],
    )
    settle()
    words = "coffee espresso decaf ground"
    hits = search.search(q(tenant, words, kinds=("chunk", "fact"), k=20, vector=unit(0, 1), vector_model=MODEL))
    found = hits.keyword + (vec(hits, vector_search) or ())
    chunk_ids = sorted({h.doc_id for h in found if h.kind == "chunk" and h.slug == "drinks/coffee"})
    assert chunk_ids == ["chunk:drinks/coffee#0", "chunk:drinks/coffee#2"]  # #1 (espresso) is gone
    assert [h.text for h in hits.keyword if h.doc_id == "chunk:drinks/coffee#0"] == ["Coffee beans are ground"]
    assert "fact:f_2" in ids(hits.keyword)  # the page's facts are not its chunks
    assert ids(search.search(q(tenant, "tea")).keyword)[0] == "chunk:drinks/tea#0"  # other pages stay
    assert ids(search.search(q(other_tenant, "tea")).keyword) == ["chunk:drinks/tea#0"]
    search.replace_page(tenant, "drinks/coffee", [])
    settle()
    assert not [h for h in search.search(q(tenant, "coffee", k=20)).keyword if h.slug == "drinks/coffee"]


def test_replace_page_refuses_docs_that_are_not_chunks_of_that_page(search, settle, corpus, tenant, other_tenant):
    for wrong in (
        doc(tenant, "chunk:drinks/tea#5", "tea"),  # another page
        doc(other_tenant, "chunk:drinks/coffee#5", "coffee"),  # another tenant
        doc(tenant, "fact:f_9", "a fact", slug="drinks/coffee"),  # not a chunk
    ):
        with pytest.raises(ValueError, match="is not a chunk of page 'drinks/coffee'"):
            search.replace_page(tenant, "drinks/coffee", [wrong])
    settle()
    assert "chunk:drinks/coffee#1" in ids(search.search(q(tenant, "espresso")).keyword)  # untouched


def test_an_empty_index_answers_empty(search, settle, tenant, vector_search):
    settle()
    hits = search.search(q(tenant, "anything", vector=unit(1), vector_model=MODEL))
    assert hits.keyword == ()
    assert vec(hits, vector_search) in (None, ())


def test_search_many_answers_each_query_as_search_does_in_order(search, corpus, tenant, other_tenant, vector_search):
    """One call for the whole query, its parts and its topic (recall's searches): every answer is
    the one `search` gives for that query alone, in the order asked, whatever mix of arms, tenants,
    kinds and models the batch holds."""
    batch = [
        q(tenant, "tea", vector=unit(1, 0), vector_model=MODEL),
        q(tenant, "coffee espresso", kinds=("chunk", "fact"), k=2),
        q(tenant, "", vector=unit(0, 1), vector_model=MODEL),
        q(other_tenant, "tea", vector=unit(1, 0), vector_model=MODEL),
        q(tenant, "tea", vector=unit(1, 0), vector_model="another-model-8"),
        q(tenant, "   "),
        q(tenant, "tea secret", vector=unit(1, 0.1), vector_model=MODEL, world_only=False),
    ]
    many = search.search_many(batch)
    assert many == [search.search(one) for one in batch]
    assert ids(many[0].keyword) == ids(search.search(batch[0]).keyword) != []
    assert not many[4].vector  # a foreign model's vector is compared with nothing
    assert many[5].keyword == ()
    assert search.search_many([]) == []
