"""Page content format: YAML frontmatter, privacy fences, mentions and the first prose sentence."""

from __future__ import annotations

import pytest

from fleetmem.memory.pagefmt import (
    PageFormatError,
    clip,
    first_h1,
    first_sentence,
    mentions,
    parse_page_content,
    render_page_content,
    strip_private,
)


def test_frontmatter_is_split_from_the_body():
    meta, body = parse_page_content("---\ntitle: Acme\naliases: [Acme Inc]\n---\n# Acme\nText.")
    assert meta == {"title": "Acme", "aliases": ["Acme Inc"]}
    assert body == "# Acme\nText."


def test_content_without_frontmatter_is_all_body():
    assert parse_page_content("Just text.\n---\nnot frontmatter") == ({}, "Just text.\n---\nnot frontmatter")


def test_empty_frontmatter_is_an_empty_mapping():
    assert parse_page_content("---\n---\nbody") == ({}, "body")


@pytest.mark.parametrize("yaml_text", ["title: [unclosed", "- just\n- a list", "key: value: other"])
def test_frontmatter_that_is_not_a_yaml_mapping_is_rejected(yaml_text):
    with pytest.raises(PageFormatError):
        parse_page_content(f"---\n{yaml_text}\n---\nbody")


def test_rendered_content_parses_back_to_the_same_frontmatter_and_body():
    meta = {"title": "Acme", "aliases": ["Acme Inc", "ACME"], "owner": {"name": "Alice"}}
    assert parse_page_content(render_page_content(meta, "Body text.\n")) == (meta, "Body text.\n")
    assert render_page_content({}, "only body") == "only body"


def test_private_blocks_are_removed_and_an_unclosed_block_hides_the_rest():
    text = "Public.\n<!-- private -->secret one<!-- /private -->\nStill public.\n<!-- PRIVATE -->secret two"
    stripped = strip_private(text)
    assert "secret" not in stripped
    assert "Public." in stripped and "Still public." in stripped


def test_a_private_marked_section_hides_until_the_next_heading_of_its_level():
    text = "# Alice\nIntro.\n## Health (private)\nsecret\n### Details\nmore secret\n## Work\nPayments.\n"
    stripped = strip_private(text)
    assert "secret" not in stripped and "Health" not in stripped
    assert "Intro." in stripped and "## Work\nPayments." in stripped


def test_mentions_are_distinct_slugs_in_order_of_appearance():
    body = "Met [[people/bob]] at [[companies/acme|Acme]]; [[people/bob]] again."
    assert mentions(body) == ["people/bob", "companies/acme"]


def test_first_h1_ignores_code_fences_and_lower_headings():
    assert first_h1("## Sub\n```\n# not a heading\n```\n# Real Title\n") == "Real Title"
    assert first_h1("no heading") is None


def test_first_sentence_skips_headings_and_reduces_markdown_to_text():
    body = "# Alice\n\n```\ncode. block.\n```\n**Alice** works at [[companies/acme|Acme]]. She likes tea.\n"
    assert first_sentence(body) == "Alice works at Acme."


def test_first_sentence_falls_back_to_list_items_when_there_is_no_prose():
    assert first_sentence("# T\n- First item here\n- Second") == "First item here"


def test_clip_ends_with_an_ellipsis_only_when_it_cuts():
    assert clip("short", 10) == "short"
    clipped = clip("x" * 200, 160)
    assert len(clipped) == 160 and clipped.endswith("…")
