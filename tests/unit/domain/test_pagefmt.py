"""Page content format: YAML frontmatter, privacy fences, mentions and the first prose sentence.

Also put_page's limits on what a frontmatter becomes once stored, over both adapter sets (SQLite,
and DynamoDB Local + the OpenSearch node), since each store measures a page differently."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from tests.unit.domain.delta_backends import BACKENDS, open_deps

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.errors import VerbError
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
from fleetmem.memory.verbs import get_page, put_page
from fleetmem.models import Caller
from fleetmem.ports import CallContext
from fleetmem.protocol import PAGE_BODY_MAX_BYTES


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


def alias_bomb(levels: int, width: int = 9) -> str:
    """Nested YAML aliases ("billion laughs"): a few hundred bytes that expand to width**levels
    strings. Six levels of nine expand to about 4 MB of JSON, enough to pass every page limit."""
    lines = ["a0: &a0 [" + ",".join(['"lol"'] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines)


def test_frontmatter_aliases_are_refused_before_they_expand():
    content = f"---\ntitle: Bomb\n{alias_bomb(6)}\n---\nBody."
    assert len(content) < 400
    with pytest.raises(PageFormatError) as err:
        parse_page_content(content)
    assert "alias *a0" in str(err.value) and "line 4" in str(err.value)
    assert err.value.instead and "write the value out" in err.value.instead


@pytest.mark.parametrize(
    "yaml_text",
    ["a: &x hello\nb: *x", "base: &b {k: 1}\nother:\n  <<: *b\n  j: 2", "list: [&i 1, *i]"],
)
def test_every_kind_of_alias_is_refused(yaml_text):
    with pytest.raises(PageFormatError, match="alias"):
        parse_page_content(f"---\n{yaml_text}\n---\nbody")


def test_an_anchor_without_an_alias_is_plain_yaml():
    assert parse_page_content("---\nowner: &o Alice\n---\nbody") == ({"owner": "Alice"}, "body")


# -- put_page: what is stored, on both adapter sets -------------------------------------------

CTX = CallContext("t")
STORED_MAX = 384 * 1024  # put_page.PAGE_STORED_MAX_BYTES (asserted below)


@pytest.fixture
def clock() -> FixedClock:
    """Fixed, but at the real time (DynamoDB Local runs table TTLs on the wall clock)."""
    return FixedClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture(params=BACKENDS)
def bdeps(request: pytest.FixtureRequest, clock: FixedClock):
    with open_deps(request.param, request, clock) as d:
        yield d


@pytest.fixture
def bcaller() -> Caller:
    tenant = "t-" + uuid.uuid4().hex[:12]  # a fresh tenant per test (the AWS tables are shared)
    return Caller(tenant=tenant, client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)


def put(deps, caller, slug, content):
    return put_page.run(deps, caller, put_page.PutPageParams(slug=slug, content=content), CTX).body


def test_put_page_refuses_an_alias_bomb_and_stores_nothing(bdeps, bcaller):
    with pytest.raises(VerbError) as err:
        put(bdeps, bcaller, "notes/bomb", f"---\ntitle: Bomb\n{alias_bomb(6)}\nsummary: *a5\n---\nBody.")
    assert err.value.code == "invalid_params"
    assert err.value.detail == {"field": "content", "reason": "frontmatter_yaml"}
    assert "alias" in err.value.message
    assert err.value.fix is not None and "write the value out" in err.value.fix.why
    assert bdeps.pages.get(bcaller.tenant, "notes/bomb") is None


def test_put_page_measures_the_page_as_stored_not_the_body_alone(bdeps, bcaller):
    """A frontmatter value larger than any page, under the 4 MiB request limit and without an
    alias: refused by the stored-size limit on both backends, nothing written."""
    notes = "n" * (STORED_MAX + 1)
    with pytest.raises(VerbError) as err:
        put(bdeps, bcaller, "notes/huge-meta", f"---\ntitle: Huge\nnotes: {notes}\n---\nBody.")
    assert err.value.code == "invalid_params"
    assert err.value.detail["max_stored_bytes"] == STORED_MAX == put_page.PAGE_STORED_MAX_BYTES
    assert err.value.detail["stored_bytes"] > STORED_MAX
    assert bdeps.pages.get(bcaller.tenant, "notes/huge-meta") is None


def test_the_largest_body_with_ordinary_frontmatter_fits_and_reads_back(bdeps, bcaller):
    content = "---\ntitle: Full\naliases: [Fully]\nowner: Alice\n---\n" + "x" * PAGE_BODY_MAX_BYTES
    assert put(bdeps, bcaller, "notes/full", content)["status"] == "created"
    got = get_page.run(bdeps, bcaller, get_page.GetPageParams(slug="notes/full"), CTX).body
    assert got["content"].endswith("x" * PAGE_BODY_MAX_BYTES) and "owner: Alice" in got["content"]


def test_first_sentence_reduces_a_bounded_prefix_of_each_paragraph(monkeypatch):
    """The inline patterns backtrack on runs of "[" or "![" (square work in the run's length), so
    `first_sentence` hands them at most SENTENCE_SCAN_CHARS of a paragraph: the characters they see
    are counted here, for a 349 KB body that is one run of "[" after an unclosed comment."""
    from fleetmem.memory import pagefmt

    seen: list[int] = []

    def counting(text: str) -> str:
        seen.append(len(text))
        return "x"

    monkeypatch.setattr(pagefmt, "_inline_text", counting)
    body = "<!-- unclosed " + "[" * 349_000
    assert pagefmt.first_sentence(body) == "x"
    assert seen == [pagefmt.SENTENCE_SCAN_CHARS]


def test_first_sentence_skips_comments_and_keeps_an_unclosed_one_as_written():
    from fleetmem.memory.pagefmt import first_sentence

    assert first_sentence("<!-- a --><!-- b -->Real start. More.") == "Real start."
    assert first_sentence("Text <!-- x\n\ny --> goes on. Then.") == "Text goes on."
    assert first_sentence("<!-- never closed. Second.") == "<!-- never closed."
    long = "word " * 1000 + "end."
    assert first_sentence(long).startswith("word word") and len(first_sentence(long)) <= 2000
