"""The README is a front page and every relative link of the documentation lands.

README.md stays at most 250 lines (the reference moved to docs/). Every relative link in README.md
and docs/*.md names a file that exists and, when it has a `#fragment`, a heading of that file whose
GitHub anchor is the fragment. Links inside code (fenced blocks, inline code) are not links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
README_MAX_LINES = 250

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", flags=re.M | re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", flags=re.M)


def _prose(text: str) -> str:
    """The text without fenced blocks and inline code, where brackets are not links."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: markup links reduced to their text, lowercased, every
    character but letters, digits, `_`, `-` and spaces dropped, spaces turned into `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown file; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for _, title in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = github_anchor(title)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    targets = _LINK.findall(_prose(path.read_text(encoding="utf-8")))
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t, flags=re.I)]


def broken_links(path: Path) -> list[str]:
    """Each relative link of `path` whose file is missing or whose fragment names no heading."""
    broken = []
    for target in relative_links(path):
        file_part, _, fragment = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT) if ROOT in linked.parents else linked}")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading with the anchor #{fragment} in {linked.name}")
    return broken


def test_the_readme_is_a_front_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the reference belongs in docs/"


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_every_relative_link_lands_on_a_file_and_heading(doc: Path) -> None:
    assert broken_links(doc) == []


def test_the_readme_links_every_page_of_the_docs() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in relative_links(README)}
    assert [d.name for d in DOCS if d.resolve() not in linked] == []


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        (
            "4g. Cold starts: SnapStart or provisioned concurrency, per function",
            "4g-cold-starts-snapstart-or-provisioned-concurrency-per-function",
        ),
        ("Plain HTTP API (`/v1`)", "plain-http-api-v1"),
        ("The stream indexer: failures, replay, status", "the-stream-indexer-failures-replay-status"),
        ("Writes per second, before and after D21", "writes-per-second-before-and-after-d21"),
    ],
)
def test_anchors_are_githubs(heading: str, anchor: str) -> None:
    assert github_anchor(heading) == anchor


def test_the_checker_finds_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#a-section) [self](#page) [gone](missing.md) [bad](other.md#no-such)\n"
        "`[code](missing-too.md)`\n\n```\n[fenced](missing-three.md)\n```\n[web](https://example.com/x)\n",
        encoding="utf-8",
    )
    assert [b.split(":")[0] for b in broken_links(page)] == ["missing.md", "other.md#no-such"]
