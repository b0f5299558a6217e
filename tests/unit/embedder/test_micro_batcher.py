"""The embedder's micro-batcher: concurrent embed calls combined into one forward pass give every
caller exactly its own vectors, equal to embedding alone (real MiniLM), and stay correct under
many threads; failures reach every caller of the batch."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from fleetmem.adapters.local.embedder import MicroBatcher, MiniLMEmbedder

TEXTS = [
    "Alice prefers async standups",
    "The quarterly offsite moved to Lisbon",
    "which tea does target person 7 prefer",
    "Invoice 2026-118 for Orchid Health is now paid",
    "a",
    "Bob's phone number changed to 555-0199 after the move to Berlin last spring",
    "Person 000042 works on pricing roadmap hiring churn onboarding security audit migration",
    "deploy to staging",
]


def _rows(texts: list[str]) -> list[list[float]]:
    """A deterministic stand-in vector per text (its length and first character), for the
    batcher's own bookkeeping; the model's vectors are checked below with the real embedder."""
    return [[float(len(t)), float(ord(t[0]) if t else 0)] for t in texts]


def test_concurrent_calls_wait_for_the_running_batch_and_are_combined_into_one() -> None:
    calls: list[list[str]] = []
    first_started = threading.Event()
    release = threading.Event()

    def embed_now(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        if len(calls) == 1:
            first_started.set()
            assert release.wait(10)
        return _rows(texts)

    batcher = MicroBatcher(embed_now, max_texts=64)
    with ThreadPoolExecutor(6) as pool:
        first = pool.submit(batcher.run, ["lead"])
        assert first_started.wait(10)
        rest = [pool.submit(batcher.run, [f"t{i}", f"u{i}"]) for i in range(5)]
        while len(batcher._pending) < 5:  # the five wait behind the running pass
            threading.Event().wait(0.01)
        release.set()
        assert first.result(10) == _rows(["lead"])
        for i, future in enumerate(rest):
            assert future.result(10) == _rows([f"t{i}", f"u{i}"])
    assert len(calls) == 2 and sorted(calls[1]) == sorted(t for i in range(5) for t in (f"t{i}", f"u{i}"))
    assert batcher.batches == 2


def test_a_batch_never_exceeds_max_texts_and_large_requests_bypass_it() -> None:
    sizes: list[int] = []

    def embed_now(texts: list[str]) -> list[list[float]]:
        sizes.append(len(texts))
        return _rows(texts)

    batcher = MicroBatcher(embed_now, max_texts=4)
    assert batcher.run([f"x{i}" for i in range(10)]) == _rows([f"x{i}" for i in range(10)])
    assert batcher.batches == 0 and sizes == [10]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: batcher.run([f"a{i}", f"b{i}", f"c{i}"]), range(40)))
    assert results == [_rows([f"a{i}", f"b{i}", f"c{i}"]) for i in range(40)]
    assert max(sizes[1:]) <= 4


def test_a_failing_pass_fails_every_caller_of_its_batch_and_the_next_call_works() -> None:
    fail = [True]

    def embed_now(texts: list[str]) -> list[list[float]]:
        if fail[0]:
            raise RuntimeError("model broke")
        return _rows(texts)

    batcher = MicroBatcher(embed_now, max_texts=8)
    with pytest.raises(RuntimeError, match="model broke"):
        batcher.run(["x"])
    fail[0] = False
    assert batcher.run(["y"]) == _rows(["y"])


@pytest.mark.slow
def test_batched_vectors_equal_embedding_each_text_alone_under_many_threads(minilm_model_dir) -> None:
    alone = MiniLMEmbedder(minilm_model_dir, backend="onnx")
    reference = {t: np.array(alone._embed_now([t])[0]) for t in TEXTS}
    shared = MiniLMEmbedder(minilm_model_dir, backend="onnx")
    jobs = [[TEXTS[(i + j) % len(TEXTS)] for j in range(1 + i % 3)] for i in range(96)]
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(shared._embed_many, jobs))
    for texts, vectors in zip(jobs, results, strict=True):
        assert len(vectors) == len(texts)
        for text, vector in zip(texts, vectors, strict=True):
            np.testing.assert_allclose(np.array(vector), reference[text], atol=1e-5)
    assert 0 < shared._batcher.batches <= len(jobs)
