"""The dedup/supersession rule (`fleetmem.memory.sameness`), a pure function of two texts, their
kinds and their cosine similarity. The real-model measurement over the labelled pairs is in
tests/unit/embedder/test_fact_sameness_pairs.py."""

from __future__ import annotations

import pytest

from fleetmem.memory.sameness import decide, distinguishing_tokens, probable_update


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


ORION = "The Orion launch deadline is 2027-01-15"


@pytest.mark.parametrize(
    "new",
    [
        "The Orion launch deadline moved to 2027-02-01",
        "The Orion launch deadline is now 2027-02-01",
        "The Orion launch deadline changed to 2027-02-01",
        "The Orion launch deadline was pushed to 2027-02-01",
        "The Orion launch deadline is no longer 2027-01-15; it is now 2027-02-01",
        "The Orion launch deadline was rescheduled for 2027-02-01",
        "The Orion launch deadline was updated to 2027-02-01",
        "The Orion launch deadline is 2027-02-01 instead of 2027-01-15",
        "The Orion launch deadline was changed from 2027-01-15 to 2027-02-01",
        "The Orion launch deadline has been postponed until 2027-02-01",
    ],
)
def test_natural_update_phrasings_supersede_below_the_dedup_gate(new):
    # MiniLM scores these 0.91-0.96 against the old fact: an update must not need 0.95.
    assert decide(new, "fact", ORION, "fact", 0.90) == "supersede"
    assert decide(new, "fact", ORION, "fact", 0.90, attributed=False) == "supersede"  # "Orion" names it


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Alice lives in Berlin", "Alice no longer lives in Berlin; she now lives in Lisbon"),
        ("Bob's desk is in room 4B", "Bob's desk was moved to room 5A"),
        ("The payments service runs on port 8443", "The payments service now runs on port 9443"),
        ("Alice has 2 direct reports", "Alice now has 5 direct reports"),
        ("Acme's main office is in Austin", "Acme's main office is now in Denver"),
        ("The demo is scheduled for Friday", "The demo has been postponed to next Tuesday"),
        ("Priya's role is tech lead", "Priya's role changed to engineering manager"),
    ],
)
def test_updates_of_one_attribute_supersede_far_below_the_dedup_gate(old, new):
    assert decide(new, "fact", old, "fact", 0.70) == "supersede"
    assert decide(new, "event", old, "event", 0.70) == "distinct"  # events are never updates
    assert decide(new, "fact", old, "fact", 0.50) == "distinct"  # below UPDATE_THRESHOLD nothing merges


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Alice moved to Berlin in 2019", "Alice moved to the platform team"),
        ("Alice is allergic to peanuts", "Alice is now on parental leave"),
        ("Alice Chen is a staff engineer", "Alice Chen is now in Dublin"),
        ("Alice speaks Spanish", "Alice now also speaks Portuguese"),
        ("Acme has an office in Austin", "Acme now has an office in Denver too"),
        ("Alice works at Acme", "Alice now works with Bob on the billing project"),
        ("The payments service is owned by Priya", "The payments service is now deployed on Kubernetes"),
        ("The payments service has 3 owners", "The payments service now has 12 replicas"),
        ("Alice prefers email for status updates", "Alice now prefers Teams for urgent questions"),
        ("The payments service is written in Go", "The payments service is now healthy"),
        ("The Orion beta deadline is 2027-01-15", "The Orion launch deadline moved to 2027-02-01"),
        (ORION, "The Orion launch deadline moved to 2027-02-01 for the EU region"),
        ("The office closes at 18:00", "The office now closes at 20:00 on Fridays"),
        ("Alice's phone is 555-0100", "Alice's work phone is now 555-0199"),
    ],
)
def test_a_marker_alone_never_merges_two_facts(old, new):
    # (at 0.95 or more, texts whose distinguishing tokens agree are restatements: rule 3)
    for similarity in (0.6, 0.75, 0.9, 0.949):
        assert decide(new, "fact", old, "fact", similarity) == "distinct", similarity


def test_on_no_entity_an_update_below_the_gate_needs_a_named_subject():
    old, new = "The launch deadline is 2027-01-15", "The launch deadline moved to 2027-02-01"
    assert decide(new, "fact", old, "fact", 0.9) == "supersede"  # both on one entity
    assert decide(new, "fact", old, "fact", 0.9, attributed=False) == "distinct"  # whose deadline?
    assert decide(new, "fact", old, "fact", 0.96, attributed=False) == "supersede"  # the dedup gate as before


# --------------------------------------------------------------------------- probable_update (a notice, never a merge)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The Orion launch deadline is 2027-01-15", "The Orion launch deadline is 2027-02-01"),
        ("The ledger migration status: green", "The ledger migration status is red"),
        ("Priya Raman is the product manager for Atlas", "Priya Raman is now the engineering director"),
        ("Tom's working hours are 9 to 5", "Tom's working hours are now 10 to 6"),
    ],
)
def test_one_value_of_one_attribute_is_a_probable_update_that_decide_keeps_apart(old, new):
    assert decide(new, "fact", old, "fact", 0.8) == "distinct"  # never merged by the rule
    assert probable_update(new, "fact", old, "fact", 0.8)


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        ("Priya owns the ledger migration", "Daniel owns the ledger migration", "fact"),  # another subject
        ("Alice's work phone is 555-0100", "Alice's home phone is 555-0123", "fact"),  # another attribute
        ("Alice speaks Spanish", "Alice speaks Portuguese", "fact"),  # a verb, no subject noun: a list
        ("Alice likes Python", "Alice likes Rust", "preference"),
        ("Alice speaks Spanish", "Alice now also speaks Portuguese", "fact"),  # additive
        ("Alice Chen is a staff engineer", "Alice Chen is now in Dublin", "fact"),  # no attribute named
        ("Ravi is the tech lead", "Ravi is now out sick", "fact"),
        ("The office closes at 18:00", "The office now closes at 20:00 on Fridays", "fact"),  # qualified
        ("Stand-up 2026-06-01: Priya shipped it", "Stand-up 2026-06-02: Priya shipped it", "event"),
    ],
)
def test_distinct_near_twins_are_no_probable_update(old, new, kind):
    assert not probable_update(new, kind, old, kind, 0.9)


def test_a_probable_update_needs_the_same_kind_and_a_similar_text():
    old, new = "The Orion launch deadline is 2027-01-15", "The Orion launch deadline is 2027-02-01"
    assert not probable_update(new, "fact", old, "belief", 0.9)
    assert not probable_update(new, "fact", old, "fact", 0.5)
    assert not probable_update(old, "fact", old, "fact", 1.0)  # the same text is a duplicate


def test_a_label_colon_reads_as_the_copula():
    old = "The ledger migration status: green"
    assert decide("The ledger migration status is now red", "fact", old, "fact", 0.8) == "supersede"
    assert decide("The ledger migration status: now red", "fact", old, "fact", 0.8) == "supersede"
