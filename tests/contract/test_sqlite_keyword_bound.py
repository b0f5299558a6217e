"""The local keyword arm bounds its work on common words (`bound_terms`, `TermCounts`).

A query whose words together occur in more docs than `KEYWORD_MAX_ROWS` leaves the most common
words out of the FTS5 MATCH; the rare word still finds the right doc, and queries under the bound
match every word as before. Real SQLite + FTS5 on a temporary file.
"""

from __future__ import annotations

import pytest
from tests.contract.builders import doc

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
