"""RRF fusion and vector helpers shared by both backends."""

from __future__ import annotations

import math

import pytest

from fleetmem.memory.ranking import rrf
from fleetmem.memory.vectors import cosine, pack, unpack


def test_rrf_rewards_items_found_by_both_arms():
    fused = rrf([["a", "b", "c"], ["c", "d"]])
    ids = [d for d, _ in fused]
    assert ids[0] == "c"  # 1/63 + 1/61 beats 1/61 alone
    assert set(ids) == {"a", "b", "c", "d"}
    assert dict(fused)["a"] == pytest.approx(1 / 61)


def test_rrf_ties_keep_first_seen_order_and_repeats_count_once():
    fused = rrf([["x", "x", "y"], ["y2", "x2"]])
    assert [d for d, _ in fused][:2] == ["x", "y2"]
    assert dict(fused)["x"] == pytest.approx(1 / 61)


def test_rrf_of_no_arms_is_empty():
    assert rrf([[], []]) == []


def test_pack_round_trips_float32():
    v = [0.5, -0.25, 1.0]
    assert unpack(pack(v)) == v


def test_cosine_works_on_lists_and_bytes_and_refuses_mismatched_dimensions():
    a, b = [1.0, 0.0], [1.0, 1.0]
    assert cosine(a, b) == pytest.approx(1 / math.sqrt(2))
    assert cosine(pack(a), pack(b)) == pytest.approx(1 / math.sqrt(2))
    assert cosine([1.0, 0.0], [1.0, 0.0, 0.0]) == 0.0
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0
