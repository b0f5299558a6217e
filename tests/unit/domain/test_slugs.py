"""Slug and alias normal forms used by entity resolution and page writes."""

from __future__ import annotations

import unicodedata

import pytest

from fleetmem.errors import VerbError
from fleetmem.memory.slugs import (
    ascii_slug,
    is_canonical_slug,
    is_path_like,
    last_segment,
    match_key,
    normalize_alias,
    path_slug_error,
    slug_size_problem,
    slugify,
    slugify_segment,
)


@pytest.mark.parametrize(
    ("raw", "slug"),
    [
        ("Alice Example", "alice-example"),
        ("People/Alice Example", "people/alice-example"),
        ("Zoë Müller!", "zoë-müller"),
        ("Łukasz Müller", "łukasz-müller"),
        ("北京办公室", "北京办公室"),
        ("Сергей Иванов", "сергей-иванов"),
        ("محمد علي", "محمد-علي"),
        ("नमस्ते दुनिया", "नमस्ते-दुनिया"),  # combining marks (virama, vowel signs) stay in their word
        ("Offices/北京 办公室", "offices/北京-办公室"),
        ("ＡＢＣ１２３", "abc123"),  # NFKC: full-width forms
        ("Straße", "strasse"),  # casefolded
        ("!!!///???", ""),
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


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        (unicodedata.normalize("NFD", "René Lefèvre"), "René Lefèvre"),  # NFD and NFC
        ("JÜRGEN STRASSE", "Jürgen Straße"),  # casefold, not lower
        ("ilker işık", "İlker Işık"),  # "İ" casefolds to "i" + combining dot above
        ("Ka\u200dren\u00a0 Smith", "Karen Smith"),  # ZWJ dropped, NBSP and runs of spaces folded
        ("Ka\u200cren\u200b Smith\u00ad", "  karen smith "),  # ZWNJ, ZWSP, soft hyphen
        ("ＡＢＣ", "abc"),  # NFKC
    ],
)
def test_names_written_differently_share_one_match_key(written, stored):
    assert match_key(written) == match_key(stored)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("Anna Müller", "Anna Muller"),
        ("Ayşe Işık", "Ayse Isik"),
        ("Işık", "Isik"),
        ("René", "Rene"),
        ("Łukasz", "Lukasz"),
        ("Karen Smith", "Karens Mith"),
        ("Jürgen", "Jurgen"),
    ],
)
def test_names_that_differ_in_a_letter_keep_different_match_keys(one, other):
    assert match_key(one) != match_key(other)


def test_an_ascii_names_match_key_is_the_alias_key_it_had():
    for name in ("Alice Example", "  ACME,  Inc.\t", "o'neil-smith", "x"):
        assert match_key(name) == normalize_alias(name)
    assert match_key("Priya Raman") == "Priya Raman".lower()


def test_a_format_character_inside_a_word_never_splits_its_slug():
    assert slugify("Ka\u200dren Smith") == slugify("Karen Smith") == "karen-smith"
    assert slugify("Ka\u200cren\u200b\u00adSmith") == "karensmith"
    assert slugify("people/Ka\u200dren") == "people/karen"
    assert slugify(unicodedata.normalize("NFD", "René Lefèvre")) == slugify("René Lefèvre") == "rené-lefèvre"


def test_last_segment_is_the_leaf_of_the_path():
    assert last_segment("people/alice-example") == "alice-example"
    assert last_segment("acme") == "acme"


def test_slugify_is_idempotent_over_the_first_three_planes():
    # canonical means "equal to its slugified form": that must hold for whatever slugify returns
    # (the planes past 0x2FFFF hold no letters whose NFKC or case folding changes)
    for cp in range(0x30000):
        if 0xD800 <= cp < 0xE000:
            continue
        for text in ("a" + chr(cp) + chr(cp),):
            slug = slugify(text)
            assert slugify(slug) == slug, (hex(cp), text, slug)
            assert not slug or is_canonical_slug(slug)


def test_a_slug_keeps_only_letters_digits_and_marks_after_them():
    for ch in slugify("Ünïcödé — 東京/Ωμέγα 42 ✓ 🚀 نص"):
        assert ch in "-/" or unicodedata.category(ch)[0] in "LNM"
    assert slugify("\u0301x") == "x"  # a combining mark with no base letter is not a word


def test_the_ascii_spelling_folds_accents_and_drops_other_scripts():
    assert ascii_slug("Zoë Müller") == "zoe-muller"
    assert ascii_slug("Сергей") == ""


def test_size_limits_count_characters_not_bytes():
    assert slug_size_problem("北" * 100) is None  # 300 UTF-8 bytes, 100 characters
    assert slug_size_problem("北" * 101) is not None
    assert slug_size_problem("/".join(["北" * 100, "京" * 99])) is None
    assert slug_size_problem("/".join(["北" * 100, "京" * 100])) is not None  # 201 characters


@pytest.mark.parametrize("slug", ["../../etc/passwd", "./x", "people/../x", "a\\b", "people/ .. /x"])
def test_paths_are_recognised(slug):
    assert is_path_like(slug)


@pytest.mark.parametrize("slug", ["people/alice", "a.b/c", "...", "notes/v1.2"])
def test_dots_inside_a_segment_are_not_a_path(slug):
    assert not is_path_like(slug)


def test_a_path_is_refused_with_the_grammar_and_no_call_to_run():
    err = path_slug_error("slug", "../../etc/passwd")
    assert isinstance(err, VerbError) and err.code == "invalid_params"
    assert err.fix is not None and err.fix.mcp is None and err.fix.amend is None and err.fix.argv is None
    assert "etc/passwd'" not in err.suggestion.replace("../../etc/passwd", "")  # no guessed slug
    assert "any script" in err.suggestion
