"""Slug and alias normal forms used by entity resolution and page writes."""

from __future__ import annotations

import pytest

from fleetmem.memory.slugs import is_canonical_slug, last_segment, normalize_alias, slugify, slugify_segment


@pytest.mark.parametrize(
    ("raw", "slug"),
    [
        ("Alice Example", "alice-example"),
        ("People/Alice Example", "people/alice-example"),
        ("Zoë Müller!", "zoe-muller"),
        ("  --Acme,  Inc.--  ", "acme-inc"),
        ("companies//acme/", "companies/acme"),
        ("a___b...c", "a-b-c"),
        ("!!!", ""),
    ],
)
def test_slugify_folds_each_path_segment(raw, slug):
    assert slugify(raw) == slug


def test_a_segment_never_contains_a_slash():
    assert slugify_segment("a/b") == "a-b"


def test_canonical_slugs_are_exactly_their_slugified_form():
    assert is_canonical_slug("people/alice-example")
    assert not is_canonical_slug("People/Alice")
    assert not is_canonical_slug("people/alice-")
    assert not is_canonical_slug("")


def test_aliases_are_casefolded_and_whitespace_collapsed():
    assert normalize_alias("  Alice\t  EXAMPLE \n") == "alice example"
    assert normalize_alias("Straße") == "strasse"


def test_last_segment_is_the_leaf_of_the_path():
    assert last_segment("people/alice-example") == "alice-example"
    assert last_segment("acme") == "acme"
