"""`vectors.cosines`, the pool scorer remember's dedup and forget's `similar_active` use: for every
packed vector the value `vectors.cosine` gives, on both of its paths (numpy's matrix product from
`MATRIX_MIN` vectors, the per-vector product below it or without numpy), including the vectors
`cosine` scores 0.0 (another dimension, a zero vector, an empty one)."""

from __future__ import annotations

import random

import pytest

from fleetmem.memory import vectors
from fleetmem.memory.vectors import cosine, cosines, pack


def _pool(rng: random.Random, n: int, dim: int = 384) -> list[bytes]:
    out = [pack([rng.gauss(0, 1) for _ in range(dim)]) for _ in range(n)]
    out[1] = pack([0.0] * dim)  # a zero vector
    out[2] = pack([rng.gauss(0, 1) for _ in range(dim - 1)])  # another model's dimension
    out[3] = b""  # no vector
    out[4] = out[0]  # the same vector twice: equal scores
    return out


@pytest.mark.parametrize("size", [5, vectors.MATRIX_MIN - 1, vectors.MATRIX_MIN, 300])
@pytest.mark.parametrize("numpy_installed", [True, False])
def test_cosines_agree_with_cosine_for_every_vector(size, numpy_installed, monkeypatch):
    if not numpy_installed:
        monkeypatch.setattr(vectors, "_numpy", lambda: None)
    rng = random.Random(size)
    query = [rng.gauss(0, 1) for _ in range(384)]
    pool = _pool(rng, size)
    got = cosines(query, pool)
    want = [cosine(query, v) for v in pool]
    assert got == pytest.approx(want, abs=1e-12)
    assert got[1] == got[2] == got[3] == 0.0
    assert got[0] == got[4]
    packed = pack(query)  # a packed query too (float32: its own values)
    assert cosines(packed, pool) == pytest.approx([cosine(packed, v) for v in pool], abs=1e-12)


def test_cosines_of_nothing_or_a_zero_query_are_zeros():
    pool = _pool(random.Random(1), 20)
    assert cosines([1.0, 0.0], []) == []
    assert cosines([0.0] * 384, pool) == [0.0] * 20
    assert cosines([], pool) == [0.0] * 20


def test_without_numpy_the_per_vector_path_gives_cosine_exactly(monkeypatch):
    """Below `MATRIX_MIN`, or where numpy is missing (the Lambda asset), each value is computed as
    `cosine` computes it, so on the same Python the two agree to the bit."""
    monkeypatch.setattr(vectors, "_dot", vectors._dot_pure)  # the product `cosine` uses
    monkeypatch.setattr(vectors, "_numpy", lambda: None)
    rng = random.Random(7)
    query = [rng.gauss(0, 1) for _ in range(384)]
    pool = _pool(rng, 40)
    assert cosines(query, pool) == [cosine(query, v) for v in pool]
