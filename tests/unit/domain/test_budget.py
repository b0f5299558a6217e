"""Budget packing (PROTOCOL_NOTES §3): ceil(len/4) costs, prefix walk across arms, stop at first miss."""

from __future__ import annotations

from fleetmem.memory.budget import Packer, cost, costs


def test_cost_is_ceiling_of_a_quarter_of_the_length():
    assert cost("") == 0
    assert cost(None) == 0
    assert cost("a") == 1
    assert cost("abcd") == 1
    assert cost("abcde") == 2
    assert costs("abcde", "", "xyz") == 3


def test_without_a_budget_everything_is_kept_and_no_fields_are_reported():
    p = Packer(None)
    assert p.take(["a", "b"], cost) == ["a", "b"]
    assert p.fields() == {}


def test_packing_stops_at_the_first_item_that_does_not_fit_even_if_a_later_one_would():
    p = Packer(3)
    kept = p.take(["aaaa", "aaaaaaaaaaaa", "a"], cost)  # costs 1, 3, 1
    assert kept == ["aaaa"]
    assert p.fields() == {"budget_tokens": 3, "budget_used": 1, "dropped_count": 2}


def test_a_stop_in_the_first_arm_drops_the_whole_second_arm():
    p = Packer(2)
    assert p.take(["aaaa", "a" * 40], cost) == ["aaaa"]
    assert p.take(["a"], cost) == []
    assert p.fields() == {"budget_tokens": 2, "budget_used": 1, "dropped_count": 2}


def test_second_arm_takes_the_remainder_and_an_exhausted_budget_drops_it():
    p = Packer(4)
    assert p.take(["aaaa", "aaaa"], cost) == ["aaaa", "aaaa"]
    assert p.take(["aaaaaaaa", "aaaa"], cost) == ["aaaaaaaa"]
    assert p.take(["a"], cost) == []
    assert p.used == 4
    assert p.dropped == 2
