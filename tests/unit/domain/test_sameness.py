"""The dedup/supersession rule (`fleetmem.memory.sameness`), a pure function of two texts, their
kinds and their cosine similarity. The real-model measurement over the labelled pairs is in
tests/unit/embedder/test_fact_sameness_pairs.py."""

from __future__ import annotations

import pytest

from fleetmem.memory.sameness import decide, distinguishing_tokens


def test_distinguishing_tokens_cover_numbers_dates_ids_quotes_and_names():
    tokens = distinguishing_tokens('Invoice 2026-118 to Orchid Health for $12,400 on June 3, flag "fast-refunds", SKU')
    assert {"2026-118", "p:orchid", "p:health", "12400", "date_jun_3", "q:fast-refunds", "sku"} <= tokens
    assert not {"p:invoice", "invoice", "p:to"} & tokens


def test_identical_text_is_a_duplicate_whatever_the_similarity():
    assert decide("Alice likes tea", "fact", "alice likes  TEA", "preference", None) == "duplicate"


def test_below_the_threshold_two_facts_are_distinct():
    assert decide("Alice works at Acme", "fact", "Alice left Acme", "fact", 0.94) == "distinct"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Invoice 2026-118 to Orchid Health was paid", "Invoice 2026-119 to Orchid Health was paid"),
        ("Invoice 2026-118 to Orchid Health is now paid", "Invoice 2026-119 to Orchid Health is now paid"),
        ("Orchid Health has paid invoice 2026-118", "Orchid Health has now paid invoice 2026-119"),
        ("Stand-up 2026-06-03: Priya shipped it", "Stand-up 2026-06-04: Priya shipped it"),
        ("Stand-up Monday: Daniel reviewed refunds", "Stand-up Tuesday: Daniel reviewed refunds"),
        ('Feature flag "fast-refunds" is on', 'Feature flag "fast-payouts" is on'),
        ("Alice's phone is 555-0100", "Alice's phone is 555-0199"),  # no update marker: keep both
        ("Priya owns the migration", "Daniel owns the migration"),
    ],
)
def test_differing_distinguishing_tokens_keep_two_facts(old, new):
    assert decide(new, "fact", old, "fact", 0.99) == "distinct"


def test_events_with_a_different_date_are_two_events_even_with_a_marker():
    old, new = "The review is on 2026-07-01", "The review is now on 2026-07-08"
    assert decide(new, "event", old, "event", 0.99) == "distinct"
    assert decide(new, "fact", old, "fact", 0.99) == "supersede"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Alice's phone is 555-0100", "Alice's phone is now 555-0199"),
        ("Alice lives in Berlin", "Alice now lives in Lisbon"),
        ("Acme's renewal call is on June 3", "Acme's renewal call is now on June 10"),
        ("The daily stand-up is at 09:30", "The daily stand-up is now at 10:00"),
        ("Acme's contract value is $120,000", "Acme's contract value is now $135,000"),
    ],
)
def test_a_marked_new_value_of_the_same_attribute_is_an_update(old, new):
    assert decide(new, "fact", old, "fact", 0.96) == "supersede"
    assert decide(new, "fact", old, "preference", 0.96) == "distinct"  # another kind: not the same attribute


def test_a_restatement_supersedes_within_a_kind_and_is_a_duplicate_across_kinds():
    old, new = "Alice works at Acme as a staff engineer", "Alice works at Acme as a Staff Engineer."
    assert decide(new, "fact", old, "fact", 0.99) == "supersede"
    assert decide(new, "belief", old, "fact", 0.99) == "duplicate"
