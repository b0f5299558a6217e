"""The local all-MiniLM-L6-v2 embedder (Embedder port): tokenizers + onnxruntime, numpy fallback.

The model is built once into the cache directory by `fleetmem embedder build`
(`fleetmem.embedder_build`). At run time only `tokenizers` and `onnxruntime` (or, without
onnxruntime, numpy alone) are needed; nothing is downloaded.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fleetmem.embedder_build import (
    DIM,
    MAX_SEQ_LENGTH,
    MODEL_ID,
    ONNX_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    model_path,
    read_manifest,
)
from fleetmem.errors import Unavailable

BATCH_SIZE = 32
INTRA_OP_THREADS = 2
#: Recent single-text (query) vectors kept in memory: one recall embeds its query once per search
#: arm, and agents repeat queries. The model is deterministic, so a cached vector is exact.
QUERY_CACHE_SIZE = 256
QUERY_CACHE_MAX_CHARS = 2000
#: A batch may hold at most this many times its real tokens once padded to its longest text.
PAD_FACTOR = 2
#: Concurrent embed calls of at most this many texts each are combined into one forward pass.
COMBINE_MAX_TEXTS = 64
BUILD_FIX = "run `fleetmem embedder build` (or scripts/build-embedder)"


class MiniLMEmbedder:
    """Unit-length 384-d sentence embeddings, identical to sentence-transformers' all-MiniLM-L6-v2.

    `model_dir` is the cache directory given to the builder (`Settings.model_dir`). The tokenizer
    and the onnxruntime session are created on first use and reused; `backend` is "onnx" when
    onnxruntime imports, else "numpy" (same weights, same vectors, slower).
    """

    model_id = MODEL_ID
    dim = DIM

    def __init__(self, model_dir: Path | str, *, backend: str | None = None) -> None:
        self.path = model_path(model_dir)
        if backend is None:
            backend = "onnx" if _onnxruntime_available() else "numpy"
        if backend not in ("onnx", "numpy"):
            raise ValueError(f"unknown backend {backend!r}")
        self.backend = backend
        self._lock = threading.Lock()
        self._tokenizer: Any = None
        self._session: Any = None
        self._numpy: _NumpyBert | None = None
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._batcher = MicroBatcher(self._embed_now, max_texts=COMBINE_MAX_TEXTS)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if not texts:
            return []
        if len(texts) == 1 and len(str(texts[0])) <= QUERY_CACHE_MAX_CHARS:
            return [self._embed_one(str(texts[0]))]
        return self._embed_many(texts)

    def _embed_one(self, text: str) -> list[float]:
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return list(hit)
        vector = self._embed_many([text])[0]
        with self._lock:
            self._cache[text] = vector
            if len(self._cache) > QUERY_CACHE_SIZE:
                self._cache.popitem(last=False)
        return list(vector)

    def _embed_many(self, texts: Sequence[str]) -> list[list[float]]:
        return self._batcher.run([str(t) for t in texts])

    def _embed_now(self, texts: list[str]) -> list[list[float]]:
        try:
            tokenizer = self._get_tokenizer()
            encodings = tokenizer.encode_batch([str(t) for t in texts])
            out = np.empty((len(encodings), DIM), dtype=np.float32)
            for idx in _batches([len(e.ids) for e in encodings]):
                out[idx] = self._forward([encodings[i] for i in idx])
        except Unavailable:
            raise
        except Exception as exc:
            raise Unavailable(f"local embedder failed: {type(exc).__name__}", reason="embedder_failed") from exc
        if not np.all(np.isfinite(out)):
            raise Unavailable("local embedder produced non-finite vectors", reason="embedder_failed")
        return out.tolist()

    # -- internals ---------------------------------------------------------------------------

    def _forward(self, encodings: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = enc.attention_mask
            types[row, :n] = enc.type_ids
        if self.backend == "onnx":
            session = self._get_session()
            (vectors,) = session.run(
                ["sentence_embedding"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            )
            return np.asarray(vectors, dtype=np.float32)
        return self._get_numpy().encode(ids, mask, types)

    def _require(self, name: str) -> Path:
        if read_manifest(self.path) is None:
            raise Unavailable(f"the local embedder model is missing or incomplete: {BUILD_FIX}", reason="model_missing")
        return self.path / name

    def _get_tokenizer(self) -> Any:
        if self._tokenizer is None:
            with self._lock:
                if self._tokenizer is None:
                    from tokenizers import Tokenizer

                    tok = Tokenizer.from_file(str(self._require(TOKENIZER_FILE)))
                    # The shipped tokenizer.json pads every input to 128; sentence-transformers
                    # truncates at 256 and pads to the longest text of the batch.
                    tok.enable_truncation(max_length=MAX_SEQ_LENGTH)
                    tok.no_padding()
                    self._tokenizer = tok
        return self._tokenizer

    def _get_session(self) -> Any:
        if self._session is None:
            with self._lock:
                if self._session is None:
                    import onnxruntime as ort

                    opts = ort.SessionOptions()
                    opts.intra_op_num_threads = INTRA_OP_THREADS
                    opts.inter_op_num_threads = 1
                    opts.log_severity_level = 3
                    # Idle worker threads sleep instead of spinning: the server shares its two
                    # cores with the store and other requests (measured 3x lower p50 under load).
                    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
                    self._session = ort.InferenceSession(
                        str(self._require(ONNX_FILE)), sess_options=opts, providers=["CPUExecutionProvider"]
                    )
        return self._session

    def _get_numpy(self) -> _NumpyBert:
        if self._numpy is None:
            with self._lock:
                if self._numpy is None:
                    path = self._require(WEIGHTS_FILE)
                    config = json.loads((self.path / "config.json").read_text(encoding="utf-8"))
                    self._numpy = _NumpyBert(path, config)
        return self._numpy


class _Request:
    __slots__ = ("error", "finished", "texts", "vectors", "wake")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.wake = threading.Event()  # set when finished, or when promoted to lead
        self.finished = False
        self.vectors: list[list[float]] = []
        self.error: BaseException | None = None


class MicroBatcher:
    """Combines concurrent `run(texts)` calls into one call of `embed_now` (flat combining).

    The first caller to find no batch running becomes the leader: it embeds everything pending in
    one call and hands each caller its own rows, until its own request is done; then it passes the
    lead to the oldest waiting caller, if any. So a lone request runs at once (no added delay), and
    N concurrent requests on the server threads cost one padded forward pass instead of N passes
    competing for the cores. Requests of more than `max_texts` texts (imports, reindex) bypass it.
    """

    def __init__(self, embed_now: Callable[[list[str]], list[list[float]]], *, max_texts: int) -> None:
        self.embed_now = embed_now
        self.max_texts = max_texts
        self._lock = threading.Lock()
        self._pending: list[_Request] = []
        self._leading = False
        self.batches = 0  # combined forward calls made (read by tests and the bench)

    def run(self, texts: list[str]) -> list[list[float]]:
        if len(texts) > self.max_texts:
            return self.embed_now(texts)
        request = _Request(texts)
        with self._lock:
            self._pending.append(request)
            lead = not self._leading
            self._leading = True
        while True:
            if lead:
                self._lead(request)
            request.wake.wait()
            if request.finished:
                break
            request.wake.clear()  # promoted: lead the next batches
            lead = True
        if request.error is not None:
            raise request.error
        return request.vectors

    def _take(self) -> list[_Request]:
        """Pending requests up to max_texts texts (always at least one); the lock is held."""
        taken: list[_Request] = []
        count = 0
        while self._pending and (not taken or count + len(self._pending[0].texts) <= self.max_texts):
            request = self._pending.pop(0)
            taken.append(request)
            count += len(request.texts)
        return taken

    def _lead(self, own: _Request) -> None:
        while True:
            with self._lock:
                if own.finished:
                    if self._pending:
                        self._pending[0].wake.set()  # hand over the lead; _leading stays True
                    else:
                        self._leading = False
                    return
                batch = self._take()
                self.batches += 1
            error: BaseException | None = None
            try:
                vectors = self.embed_now([t for r in batch for t in r.texts])
            except BaseException as exc:  # every caller of the batch gets the failure
                vectors, error = [], exc
            at = 0
            for r in batch:
                r.error = error
                r.vectors = vectors[at : at + len(r.texts)] if error is None else []
                at += len(r.texts)
                r.finished = True
                r.wake.set()


def _batches(lengths: list[int]) -> list[list[int]]:
    """Indices grouped into batches of at most BATCH_SIZE texts of similar token length.

    Texts are sorted by length and a batch is closed early when padding would more than double
    its work, so one long text does not make 31 short ones cost 256 tokens each.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    real = 0
    for i in order:
        n = lengths[i]
        if current and (len(current) >= BATCH_SIZE or n * (len(current) + 1) > PAD_FACTOR * (real + n)):
            batches.append(current)
            current, real = [], 0
        current.append(i)
        real += n
    if current:
        batches.append(current)
    return batches


def load_local_embedder(model_dir: Path | str, *, warm: bool = True) -> tuple[MiniLMEmbedder | None, str | None]:
    """The MiniLM embedder if its model is built and loads, else (None, what is wrong + the fix).

    `warm=True` loads the tokenizer and the session now (about half a second) so a broken model
    is reported at start-up and the first query is fast; one-shot commands may pass False and
    rely on `embed` raising Unavailable later.
    """
    path = model_path(model_dir)
    if read_manifest(path) is None:
        return None, f"the local embedding model is not built at {path}: {BUILD_FIX}"
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        return None, "the `tokenizers` package is missing: reinstall fleetmem (`pip install fleetmem`)"
    embedder = MiniLMEmbedder(model_dir)
    if warm:
        try:
            embedder.embed(["ok"])
        except Unavailable as exc:
            return None, f"the local embedding model at {path} does not load ({exc}): {BUILD_FIX}"
    return embedder, None


def _onnxruntime_available() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


# -- pure-numpy forward pass ----------------------------------------------------------------------

_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (max abs error 1.5e-7); numpy has no erf of its own."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + _ERF_P * a)
    a1, a2, a3, a4, a5 = _ERF_A
    poly = ((((a5 * t + a4) * t + a3) * t + a2) * t + a1) * t
    return sign * (1.0 - poly * np.exp(-a * a))


class _NumpyBert:
    """The same forward pass as the ONNX graph, on the same fp16 weights, in numpy (fp32)."""

    def __init__(self, weights_path: Path, config: dict[str, Any]) -> None:
        with np.load(weights_path) as npz:
            self.w = {k: npz[k].astype(np.float32) for k in npz.files}
        # linear layers as (in, out) so the forward pass is `x @ W`, as in the ONNX graph
        for key, value in self.w.items():
            if key.startswith("encoder.") and value.ndim == 2:
                self.w[key] = np.ascontiguousarray(value.T)
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))

    def _ln(self, x: np.ndarray, prefix: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[prefix + ".weight"] + self.w[prefix + ".bias"]

    def _linear(self, x: np.ndarray, prefix: str) -> np.ndarray:
        # one 2-D GEMM instead of a stack of per-text products
        out = x.reshape(-1, x.shape[-1]) @ self.w[prefix + ".weight"] + self.w[prefix + ".bias"]
        return out.reshape(*x.shape[:-1], out.shape[-1])

    def encode(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        w = self.w
        batch, seq = ids.shape
        h = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:seq][None]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        h = self._ln(h, "embeddings.LayerNorm")
        mask_f = mask.astype(np.float32)
        ext = ((1.0 - mask_f) * -10000.0)[:, None, None, :]
        head_dim = h.shape[-1] // self.heads
        scale = np.float32(1.0 / np.sqrt(head_dim))

        def split(x: np.ndarray) -> np.ndarray:
            return x.reshape(batch, seq, self.heads, head_dim).transpose(0, 2, 1, 3)

        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            q = split(self._linear(h, f"{p}.attention.self.query"))
            k = split(self._linear(h, f"{p}.attention.self.key"))
            v = split(self._linear(h, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) * scale + ext
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            probs = scores / scores.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, -1)
            attn = self._linear(ctx, f"{p}.attention.output.dense")
            h = self._ln(attn + h, f"{p}.attention.output.LayerNorm")
            inter = self._linear(h, f"{p}.intermediate.dense")
            gelu = 0.5 * inter * (1.0 + erf(inter / np.float32(np.sqrt(2.0))))
            out = self._linear(gelu.astype(np.float32), f"{p}.output.dense")
            h = self._ln(out + h, f"{p}.output.LayerNorm")
        summed = (h * mask_f[:, :, None]).sum(1)
        mean = summed / np.maximum(mask_f.sum(1, keepdims=True), 1e-9)
        norm = np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
        return (mean / norm).astype(np.float32)
