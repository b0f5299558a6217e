"""Vector encoding and similarity in pure Python (the domain never needs numpy for one query).

Public functions:
- `pack(vec: Sequence[float]) -> bytes`: float32 little-endian, the form stores and indexes hold.
- `unpack(b: bytes) -> list[float]`: the inverse.
- `cosine(a, b) -> float`: cosine similarity of two vectors (lists or packed bytes); 0.0 when
  either is empty or zero-length, or when the dimensions differ (vectors of different models are
  never comparable).
- `cosines(query, packed) -> list[float]`: `cosine(query, v)` for each packed vector, the query's
  norm taken once: what scores a decision pool (up to 500 facts of one entity) against a new fact.
  Where numpy is installed (the local install; the Lambda asset has none) a pool of
  `MATRIX_MIN` or more vectors is scored as one matrix product in float64, the same products summed
  in another order (differences in the last bits only); elsewhere `math.sumprod` (Python 3.12+) or
  the pure-Python product.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from functools import cache
from operator import mul
from typing import Any

#: From this many vectors `cosines` takes numpy's matrix product when numpy is installed.
MATRIX_MIN = 16


def pack(vec: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vec)}f", *vec)


def unpack(b: bytes) -> list[float]:
    n = len(b) // 4
    return list(struct.unpack(f"<{n}f", b[: n * 4]))


def _as_list(v: Sequence[float] | bytes) -> Sequence[float]:
    return unpack(v) if isinstance(v, bytes | bytearray) else v


def cosine(a: Sequence[float] | bytes, b: Sequence[float] | bytes) -> float:
    x, y = _as_list(a), _as_list(b)
    if not x or len(x) != len(y):
        return 0.0
    # map(mul) runs the products in C: several times faster than a generator expression.
    dot = sum(map(mul, x, y))
    nx = math.sqrt(sum(map(mul, x, x)))
    ny = math.sqrt(sum(map(mul, y, y)))
    if nx == 0.0 or ny == 0.0:
        return 0.0
    cosine: float = dot / (nx * ny)
    return cosine


def _dot_pure(x: Sequence[float], y: Sequence[float]) -> float:
    # map(mul) runs the products in C: several times faster than a generator expression.
    return float(sum(map(mul, x, y)))


_dot: Callable[[Sequence[float], Sequence[float]], float] = getattr(math, "sumprod", _dot_pure)


@cache
def _floats(n: int) -> struct.Struct:
    return struct.Struct(f"<{n}f")


@cache
def _numpy() -> Any:
    """numpy when it is installed (imported on first use, so no process pays for it up front)."""
    try:
        import numpy
    except ImportError:  # the Lambda asset: the pure-Python path
        return None
    return numpy


def cosines(query: Sequence[float] | bytes, packed: Sequence[bytes]) -> list[float]:
    """`cosine(query, v)` for every packed vector `v` (0.0 where `cosine` gives 0.0)."""
    q = _as_list(query)
    n = len(q)
    nq = math.sqrt(_dot(q, q)) if n else 0.0
    if not n or nq == 0.0 or not packed:
        return [0.0] * len(packed)
    np = _numpy() if len(packed) >= MATRIX_MIN else None
    if np is None:
        read = _floats(n).unpack_from  # a tuple of the first n floats: no slice, no list
        out = []
        for v in packed:
            if len(v) // 4 != n:
                out.append(0.0)
                continue
            y = read(v)
            ny = math.sqrt(_dot(y, y))
            out.append(_dot(q, y) / (nq * ny) if ny != 0.0 else 0.0)
        return out
    same = [i for i, v in enumerate(packed) if len(v) // 4 == n]
    result = [0.0] * len(packed)
    if not same:
        return result
    m = np.frombuffer(b"".join(packed[i][: n * 4] for i in same), dtype="<f4").reshape(len(same), n)
    m = m.astype(np.float64)
    dots = m @ np.asarray(q, dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", m, m))
    for i, d, ny in zip(same, dots.tolist(), norms.tolist(), strict=True):
        result[i] = d / (nq * ny) if ny != 0.0 else 0.0
    return result
