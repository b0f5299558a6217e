"""Vector encoding and similarity in pure Python (the domain never needs numpy for one query).

Public functions:
- `pack(vec: Sequence[float]) -> bytes`: float32 little-endian, the form stores and indexes hold.
- `unpack(b: bytes) -> list[float]`: the inverse.
- `cosine(a, b) -> float`: cosine similarity of two vectors (lists or packed bytes); 0.0 when
  either is empty or zero-length, or when the dimensions differ (vectors of different models are
  never comparable).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from operator import mul


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
