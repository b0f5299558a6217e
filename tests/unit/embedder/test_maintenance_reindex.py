"""`fleetmem.maintenance.reindex` over the real local SQLite store.

The embedders here are the deterministic HashEmbedder (tests only) and, in one slow test, the real
MiniLM model; the failing embedder wraps HashEmbedder to simulate an interruption mid-run.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime

import numpy as np
import pytest

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.embedder import MiniLMEmbedder
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.errors import Unavailable
from fleetmem.maintenance import reindex, unembedded
from fleetmem.memory.vectors import unpack
from fleetmem.models import Fact, SearchDoc

NOW = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)


def _seed(stores, *, docs: int, facts: int, tenant: str = "t1") -> None:
    stores.search.upsert(
        [
            SearchDoc(
                tenant=tenant,
                doc_id=f"chunk:page-{i}#0",
                kind="chunk",
                slug=f"page-{i}",
                title=f"Page {i}",
                text=f"Page {i}: notes about topic number {i}",
                updated_at=NOW,
            )
            for i in range(docs)
        ]
    )
    for i in range(facts):
        stores.facts.put(
            Fact(
                tenant=tenant,
                fact_id=f"f_{tenant}_{i:04d}",
                seq=i + 1,
                text=f"Fact {i} about the deployment schedule",
                provenance="test",
                client_id="agent-a",
                created_at=NOW,
            )
        )


class FailingAfter:
    """Embeds like `inner` for `ok_batches` calls, then raises Unavailable (a crash mid-reindex)."""

    def __init__(self, inner, ok_batches: int) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.left = ok_batches

    def embed(self, texts):
        if self.left == 0:
            raise Unavailable("simulated failure", reason="test")
        self.left -= 1
        return self.inner.embed(texts)


@pytest.fixture
def local():
    s = open_local(":memory:")
    yield s
    s.close()


def test_unembedded_counts_docs_and_facts_lacking_the_models_vectors(local):
    _seed(local, docs=5, facts=3)
    assert unembedded(local.maintenance, HashEmbedder()) == {"model_id": "hash-384", "docs": 5, "facts": 3, "total": 8}


def test_reindex_embeds_everything_in_batches(local):
    _seed(local, docs=7, facts=5)
    embedder = HashEmbedder()

    result = reindex(local.maintenance, embedder, progress=False, batch=3)

    assert (result["docs"], result["facts"], result["remaining"]) == (7, 5, 0)
    assert unembedded(local.maintenance, embedder)["total"] == 0
    fact = local.facts.get("t1", "f_t1_0002")
    assert fact.vector_model == "hash-384"
    assert unpack(fact.vector) == pytest.approx(embedder.embed([fact.text])[0], abs=1e-6)


def test_interrupted_reindex_keeps_finished_batches_and_resumes(local):
    _seed(local, docs=10, facts=6)
    embedder = HashEmbedder()

    with pytest.raises(Unavailable):
        reindex(local.maintenance, FailingAfter(embedder, ok_batches=2), progress=False, batch=4)
    after_crash = unembedded(local.maintenance, embedder)
    assert (after_crash["docs"], after_crash["facts"]) == (2, 6)  # the two finished batches stayed

    result = reindex(local.maintenance, embedder, progress=False, batch=4)

    assert (result["docs"], result["facts"], result["remaining"]) == (2, 6, 0)


def test_reindex_for_a_new_model_replaces_other_models_vectors(local):
    _seed(local, docs=3, facts=2)
    reindex(local.maintenance, HashEmbedder(384), progress=False)
    other = HashEmbedder(256)
    assert unembedded(local.maintenance, other)["total"] == 5

    reindex(local.maintenance, other, progress=False)

    assert unembedded(local.maintenance, other)["total"] == 0
    assert local.facts.get("t1", "f_t1_0000").vector_model == "hash-256"


def test_reindex_covers_every_tenant(local):
    _seed(local, docs=2, facts=2, tenant="t1")
    _seed(local, docs=2, facts=2, tenant="t2")
    result = reindex(local.maintenance, HashEmbedder(), progress=False)
    assert (result["docs"], result["facts"], result["remaining"]) == (4, 4, 0)


def test_reindex_draws_a_text_progress_bar(local):
    _seed(local, docs=4, facts=1)
    stream = io.StringIO()
    reindex(local.maintenance, HashEmbedder(), progress=stream, batch=2)
    out = stream.getvalue()
    assert "5/5" in out
    assert out.endswith("\n")


def test_reindex_reports_progress_to_a_callable(local):
    _seed(local, docs=3, facts=2)
    seen: list[tuple[int, int]] = []
    reindex(local.maintenance, HashEmbedder(), progress=lambda done, total: seen.append((done, total)), batch=2)
    assert seen[-1] == (5, 5)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_reindex_of_an_embedded_store_does_nothing(local):
    _seed(local, docs=2, facts=2)
    reindex(local.maintenance, HashEmbedder(), progress=False)
    result = reindex(local.maintenance, HashEmbedder(), progress=False)
    assert (result["docs"], result["facts"], result["remaining"]) == (0, 0, 0)


@pytest.mark.slow
def test_reindex_with_minilm_stores_the_models_vectors(local, minilm_model_dir):
    _seed(local, docs=3, facts=3)
    embedder = MiniLMEmbedder(minilm_model_dir)
    reindex(local.maintenance, embedder, progress=False)
    fact = local.facts.get("t1", "f_t1_0001")
    assert fact.vector_model == "all-MiniLM-L6-v2"
    stored = np.array(unpack(fact.vector))
    fresh = np.array(embedder.embed([fact.text])[0])
    assert float(stored @ fresh) >= 0.99999
