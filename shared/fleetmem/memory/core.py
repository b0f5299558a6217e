"""Core memory (D32): pages the owner marks always-loaded, read as one block at the head of every
context_pack (docs/protocol.md: context_pack, the core block).

Public API:
- `CORE_KEY` ("core"): the frontmatter key; `core: true` marks a page (put_page, the CLI, the
  console's page editor all write frontmatter). Any other value (false, "yes", 1) is not core.
- `is_core(page) -> bool`: the page is marked.
- `CORE_PAGES_MAX`: the most core pages a pack reads (the store returns at most that many, by slug).
- `core_block(pages, *, world_only, redacted, chars_limit) -> CoreBlock | None`: the block of the
  pages the caller may see (private pages dropped and private content stripped when `world_only`,
  credentials redacted when `redacted`), at most `chars_limit` characters; None when nothing is left.
- `CoreBlock.fit(chars)`: the same block cut to `chars` characters (`truncated` set when it cut).
- `CoreBlock.body() -> dict`: the response's `core` object.

`revision` is a hash of the shown pages' slugs, `updated_at` and shown text (before the character
limit): it changes when a core page is written, added, unmarked or deleted, and not otherwise.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from fleetmem.memory.pagefmt import strip_private
from fleetmem.memory.redaction import redact
from fleetmem.models import Page

CORE_KEY = "core"
CORE_PAGES_MAX = 20
CUT_MARK = "…"


def is_core(page: Page) -> bool:
    return page.frontmatter.get(CORE_KEY) is True


def _neutral(text: str) -> str:
    """A page cannot end the pack's `<fleetmem-context>` wrapper early (render._clean's rule, kept
    multi-line: the core block is markdown)."""
    return text.replace("</fleetmem-", "</ fleetmem-")


def _section(page: Page, *, world_only: bool, redacted: bool) -> str:
    body = strip_private(page.body) if world_only else page.body
    text = f"### {' '.join(page.title.split())} ({page.slug})\n{body.strip()}".strip()
    return _neutral(redact(text) if redacted else text)


@dataclass(frozen=True)
class CoreBlock:
    text: str
    revision: str
    chars_limit: int
    pages: tuple[str, ...]
    truncated: bool
    #: where each page's section starts in `text` (a cut keeps the pages it still shows)
    starts: tuple[int, ...] = ()

    def fit(self, chars: int) -> CoreBlock:
        """At most `chars` characters (`CUT_MARK` ending a cut text); the pages whose section
        still starts inside it."""
        if len(self.text) <= chars:
            return self
        kept = self.text[: max(0, chars - len(CUT_MARK))].rstrip()
        pages = tuple(p for p, at in zip(self.pages, self.starts, strict=True) if at < len(kept))
        return replace(self, text=kept + CUT_MARK if kept else "", pages=pages, truncated=True)

    def body(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "revision": self.revision,
            "chars_used": len(self.text),
            "chars_limit": self.chars_limit,
            "pages": list(self.pages),
            "truncated": self.truncated,
        }


def core_block(pages: Sequence[Page], *, world_only: bool, redacted: bool, chars_limit: int) -> CoreBlock | None:
    shown = sorted(
        (p for p in pages if is_core(p) and (not world_only or p.visibility == "world")), key=lambda p: p.slug
    )
    sections = [(p, _section(p, world_only=world_only, redacted=redacted)) for p in shown]
    sections = [(p, s) for p, s in sections if s]
    if not sections or chars_limit <= 0:
        return None
    stamp = "\x01".join(f"{p.slug}\x00{p.updated_at.isoformat()}\x00{text}" for p, text in sections)
    starts, at = [], 0
    for _, s in sections:
        starts.append(at)
        at += len(s) + 2
    block = CoreBlock(
        text="\n\n".join(s for _, s in sections),
        revision=hashlib.sha256(stamp.encode()).hexdigest()[:16],
        chars_limit=chars_limit,
        pages=tuple(p.slug for p, _ in sections),
        truncated=False,
        starts=tuple(starts),
    )
    return block.fit(chars_limit)
