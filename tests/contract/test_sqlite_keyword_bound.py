"""The local keyword arm bounds its work on common words (`bound_terms`, `TermCounts`).

A query whose words together occur in more docs than `KEYWORD_MAX_ROWS` leaves the most common
words out of the FTS5 MATCH; the rare word still finds the right doc, and queries under the bound
match every word as before. Beside a vector arm, over a large enough tenant, a word in more than
`COMMON_SHARE` of the visible docs is left out altogether (keyword-only searches keep their rarest
word). The vector arm's cosine scores are shared by the searches of one query vector. Real SQLite +
FTS5 on a temporary file.
"""

from __future__ import annotations

import pytest
from tests.contract.builders import doc, unit

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.sqlite import search as local_sqlite
from fleetmem.adapters.local.sqlite.search import bound_terms, docs_match, match_tokens, partition_key
from fleetmem.models import SearchQuery

TENANT = "t1"


def test_bound_terms_keeps_every_word_under_the_bound() -> None:
    counts = {"person": 40, "tea": 2, "prefer": 0}
    assert bound_terms(["which", "person", "tea", "prefer"], lambda t: counts.get(t, 0), 100) == [
        "which",
        "person",
        "tea",
        "prefer",
    ]


def test_bound_terms_drops_the_most_common_words_first_and_keeps_the_rarest() -> None:
    counts = {"person": 900, "pricing": 600, "tea": 3, "prefer": 0, "budget": 200}
    kept = bound_terms(["person", "pricing", "tea", "prefer", "budget"], counts.__getitem__, 250)
    assert kept == ["tea", "prefer", "budget"]
    # only common words: the rarest one with any match stays
    assert bound_terms(["person", "pricing"], counts.__getitem__, 250) == ["pricing"]


@pytest.fixture
def stores(tmp_path):
    with open_local(tmp_path / "data") as s:
        yield s


def _seed(stores, n: int) -> None:
    docs = [
        doc(TENANT, f"chunk:people/p{i}#0", f"Person {i} works on pricing and the roadmap with a target person")
        for i in range(n)
    ]
    docs.append(doc(TENANT, "chunk:people/ann#0", "Ann the target person prefers green tea at every meeting"))
    stores.search.upsert(docs)


def test_a_common_word_query_leaves_the_common_words_out_and_still_finds_the_doc(stores, monkeypatch) -> None:
    _seed(stores, 400)
    monkeypatch.setattr(local_sqlite, "KEYWORD_MAX_ROWS", 100)
    query = "which tea does the target person prefer"
    tokens = match_tokens(query, TENANT, ("chunk",), True)
    counts = stores.search.db.read(lambda c: local_sqlite.TermCounts.of(stores.search.db).get(c, tokens))
    prefix = partition_key(TENANT, "chunk", "world")
    assert counts[prefix + "person"] == 401 and counts[prefix + "tea"] == 1
    match = docs_match(query, TENANT, ("chunk",), True, counts)
    assert match is not None
    assert f'"{prefix}tea"' in match
    assert "person" not in match and "target" not in match  # the words in (nearly) every doc

    hits = stores.search.search(SearchQuery(tenant=TENANT, text=query, kinds=("chunk",), k=5)).keyword
    assert [h.slug for h in hits][:1] == ["people/ann"]


def test_under_the_bound_every_word_is_matched(stores) -> None:
    _seed(stores, 20)
    query = "target person"
    tokens = match_tokens(query, TENANT, ("chunk",), True)
    counts = stores.search.db.read(lambda c: local_sqlite.TermCounts.of(stores.search.db).get(c, tokens))
    assert docs_match(query, TENANT, ("chunk",), True, counts) == docs_match(query, TENANT, ("chunk",), True)
    hits = stores.search.search(SearchQuery(tenant=TENANT, text=query, kinds=("chunk",), k=50)).keyword
    assert len(hits) == 21


def test_bound_terms_drops_words_in_a_large_share_of_the_visible_docs() -> None:
    counts = {"person": 900, "pricing": 300, "tea": 3}
    terms = ["person", "pricing", "tea"]
    # 2,000 visible docs: "person" (45 %) is over the 25 % share, the others stay
    assert bound_terms(terms, counts.__getitem__, 1000, visible=2000) == ["pricing", "tea"]
    # nothing but common words: no term at all (the vector arm carries the search)
    assert bound_terms(["person"], counts.__getitem__, 1000, visible=2000) == []
    # a small tenant (fewer visible docs than the bound) is never cut by share
    assert bound_terms(["person"], counts.__getitem__, 1000, visible=999) == ["person"]
    # keyword-only (no visible count): the rarest word stays
    assert bound_terms(["person"], counts.__getitem__, 100) == ["person"]


def _seed_vectors(stores, n: int) -> None:
    docs = [
        doc(
            TENANT,
            f"chunk:people/p{i}#0",
            f"Person {i} works on pricing and the roadmap with a target person",
            vector=unit(0, 1),
            vector_model="m-8",
        )
        for i in range(n)
    ]
    docs.append(
        doc(
            TENANT,
            "chunk:people/ann#0",
            "Ann the target person prefers green tea",
            vector=unit(1, 0),
            vector_model="m-8",
        )
    )
    stores.search.upsert(docs)


def test_beside_a_vector_arm_a_query_of_only_common_words_skips_the_keyword_arm(stores, monkeypatch) -> None:
    _seed_vectors(stores, 400)
    monkeypatch.setattr(local_sqlite, "KEYWORD_MAX_ROWS", 100)
    keyword_only = stores.search.search(SearchQuery(tenant=TENANT, text="target person", kinds=("chunk",), k=5))
    assert len(keyword_only.keyword) == 5  # no vector arm: the rarest common word still matches
    hybrid = stores.search.search(
        SearchQuery(tenant=TENANT, text="target person", kinds=("chunk",), k=5, vector=unit(1, 0), vector_model="m-8")
    )
    assert hybrid.keyword == ()  # both words are in every doc: no keyword evidence
    assert hybrid.vector is not None and [h.slug for h in hybrid.vector][:1] == ["people/ann"]
    # a rare word beside them is still searched
    rare = stores.search.search(
        SearchQuery(
            tenant=TENANT, text="target person tea", kinds=("chunk",), k=5, vector=unit(0, 1), vector_model="m-8"
        )
    )
    assert [h.slug for h in rare.keyword] == ["people/ann"]


def test_searches_of_one_query_vector_share_scores_and_still_see_new_docs(stores) -> None:
    _seed_vectors(stores, 30)
    query = SearchQuery(tenant=TENANT, text="", kinds=("chunk",), k=3, vector=unit(1, 0), vector_model="m-8")
    first = stores.search.search(query).vector
    assert first is not None and first[0].slug == "people/ann"
    assert stores.search.search(query).vector == first  # the second search reuses the scores
    stores.search.upsert([doc(TENANT, "chunk:people/bo#0", "Bo", vector=unit(1, 0), vector_model="m-8", title="Bo")])
    again = stores.search.search(query).vector
    assert again is not None and {"people/ann", "people/bo"} <= {h.slug for h in again[:2]}
    facts = stores.search.search(query.model_copy(update={"kinds": ("fact",)})).vector
    assert facts == ()  # same vector, other kinds: the shared scores are filtered per search


@pytest.mark.parametrize("rows", [10, local_sqlite.SPLIT_ROWS - 1, local_sqlite.SPLIT_ROWS, 40_001])
def test_the_cosine_scan_gives_every_row_its_dot_product_whether_split_or_not(rows: int) -> None:
    """Above SPLIT_ROWS the scan runs in two halves at once; every row still gets its own score
    (an odd row count, a half boundary, spare capacity beyond n left out)."""
    import numpy as np

    rng = np.random.default_rng(rows)
    vectors = rng.standard_normal((rows + 7, 16)).astype(np.float32)  # 7 spare rows past n
    q = rng.standard_normal(16).astype(np.float32)
    scores = local_sqlite._cosines(vectors, rows, q)
    assert scores.shape == (rows,) and scores.dtype == np.float32
    expected = vectors[:rows].astype(np.float64) @ q.astype(np.float64)
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-5)


def test_a_split_scan_does_not_wait_for_a_busy_helper() -> None:
    """Concurrent scans: while the helper thread is held by another search, a scan computes both
    halves itself and its scores are still exact."""
    import threading

    import numpy as np

    rows = local_sqlite.SPLIT_ROWS + 101
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((rows, 16)).astype(np.float32)
    q = rng.standard_normal(16).astype(np.float32)
    release = threading.Event()
    held = local_sqlite._SCAN_HELPER.submit(release.wait, 30)  # the helper is busy elsewhere
    try:
        scores = local_sqlite._cosines(vectors, rows, q)
        assert not held.done()  # the scan finished while the helper was still held
    finally:
        release.set()
        held.result()
    np.testing.assert_allclose(scores, vectors.astype(np.float64) @ q.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_the_cosine_scan_runs_while_the_keyword_arm_does_and_finds_the_same_hits(stores) -> None:
    """A hybrid search starts its vector arm's scan on the prefetch thread before its keyword arm
    runs (FTS5 and the scan both release the interpreter lock); the hits are those of a search that
    finds the scores already kept."""
    import threading

    _seed_vectors(stores, 30)
    index = stores.search
    scanned, during = threading.Event(), []
    real_scores, real_keyword = index._all_scores, index._keyword

    def all_scores(key, m, q):
        out = real_scores(key, m, q)
        scanned.set()
        return out

    def keyword(query, kinds, k):
        during.append(scanned.wait(10))  # the scan lands while this arm still runs
        return real_keyword(query, kinds, k)

    index._all_scores, index._keyword = all_scores, keyword
    query = SearchQuery(
        tenant=TENANT, text="person pricing", kinds=("chunk",), k=5, vector=unit(1, 0), vector_model="m-8"
    )
    first = index.search(query)
    again = index.search(query)  # scores kept: no scan to start
    assert during == [True, True]
    assert first == again and first.vector and first.vector[0].slug == "people/ann" and first.keyword
