"""The vector arm's cached matrix (`_Matrix`) and its exact-cosine scan, split in two halves over a
helper thread from `SPLIT_ROWS` vectors on."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

#: From this many vectors on, the scan is split in two halves computed at once.
SPLIT_ROWS = 16_384


_SCAN_HELPER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vector-scan")
#: Where a hybrid search starts its cosine scan while its keyword arm runs in the caller's thread
#: (`SqliteSearchIndex.search`): FTS5 and einsum both release the interpreter lock.
_PREFETCH = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vector-prefetch")


def _cosines(vectors: np.ndarray, n: int, q: np.ndarray) -> np.ndarray:
    """Rows [0, n) of `vectors` dotted with `q` (both unit length: the cosines).

    einsum, not BLAS: the product is memory-bound, and multi-threaded BLAS on a busy machine costs
    tens of milliseconds waiting for its spinning threads. A large matrix is scanned in two halves
    at once instead (the caller takes one, a helper thread the other; einsum releases the
    interpreter lock): one core's memory bandwidth is the limit of a single scan (62,000 x 384
    float32 rows, 95 MB: 8.5 ms alone, ~5.5 ms in two halves on the 2-core machine). When the
    helper is still busy with another search's half, the caller scans both halves itself rather
    than wait for it."""
    if n < SPLIT_ROWS:
        return np.einsum("ij,j->i", vectors[:n], q)
    out = np.empty(n, dtype=np.float32)
    half = n // 2
    other = _SCAN_HELPER.submit(np.einsum, "ij,j->i", vectors[half:n], q, out=out[half:])
    np.einsum("ij,j->i", vectors[:half], q, out=out[:half])
    if other.cancel():  # not started: the helper is busy elsewhere
        np.einsum("ij,j->i", vectors[half:n], q, out=out[half:])
    else:
        other.result()
    return out


@dataclass
class _Matrix:
    """One (tenant, model, dim) vector matrix at search generation `gen`.

    The arrays are buffers with spare capacity: rows [0, n) are valid. A catch-up appends new rows
    in place and clears `alive` for replaced or deleted rows, then publishes a new `_Matrix` over
    the same buffers with a larger `n`; holders of the older object keep reading their prefix.
    Catch-ups are serialised (`SqliteSearchIndex._refresh_lock`).
    """

    gen: int
    n: int
    ids: np.ndarray  # int64 docs.id
    is_fact: np.ndarray  # bool
    is_world: np.ndarray  # bool
    alive: np.ndarray  # bool: False once the row was replaced or deleted
    vectors: np.ndarray  # float32 (capacity, dim), rows unit-normalised

    @property
    def nbytes(self) -> int:
        return int(self.vectors.nbytes + self.ids.nbytes * 2)

    @property
    def dead(self) -> int:
        return int(self.n - np.count_nonzero(self.alive[: self.n]))
