"""Zero-LLM entity inference for `remember` (docs/protocol.md: remember, D24).

Public API: `infer_entity(deps, caller, text) -> Inference`, `candidate_keys(text) -> list[str]`,
`NO_ENTITY`, `ENTITY_LINK_FAILED`, `LINKABLE_TYPES`.

A fact saved without an `entity` is linked to the ONE entity page its text names exactly:
1. the text's word n-grams (1 to 4 consecutive words, cut at word boundaries and taken as written
   between their first and last word, so "Jean-Luc Picard" and "Acme, Inc" stay whole) become
   `slugs.match_key` keys, at most `NAME_KEYS_MAX` of them: those starting with a capital letter
   first (longest first), then the others (shortest first);
2. ONE batched read (`PageStore.names`) returns the pages whose title key or an alias key is one of
   them (world pages only for a remote caller: a private page is never linked to nor mentioned);
3. only entity pages count: type person, company or project, or a slug under `people/`,
   `companies/` or `projects/` (`LINKABLE_TYPES`, the folders `entity` cards read their type from);
4. a name inside a longer matched name is not a second name ("Acme" inside "Acme Labs");
5. a single word naming a person is a bare first name: it links nothing, unless the same person
   is also named in full;
6. exactly one page left links (`via="mention"`); none is `NO_ENTITY`; two or more pages (two
   competing names, or one name shared by two pages), or a bare first name, is
   `ENTITY_LINK_FAILED`. Any failure of the read is `ENTITY_LINK_FAILED` too: inference never
   refuses a write.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Final, Literal

from fleetmem.memory.slugs import match_key
from fleetmem.models import Caller, PageHead
from fleetmem.ports import Deps
from fleetmem.ports.pages import NAME_KEYS_MAX

log = logging.getLogger("fleetmem.entity_inference")

NO_ENTITY: Final = "NO_ENTITY"
ENTITY_LINK_FAILED: Final = "ENTITY_LINK_FAILED"
InferenceWarning = Literal["NO_ENTITY", "ENTITY_LINK_FAILED"]

#: page types (and the slug folders that give one) an inferred link may point at
LINKABLE_TYPES: Final = ("person", "company", "project")
_FOLDERS: Final = {"people/": "person", "companies/": "company", "projects/": "project"}

#: the longest name, in words, inference looks for
NGRAM_MAX: Final = 4

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Inference:
    """The page the text names (None: unattributed) and the warning an unattributed save carries."""

    page: PageHead | None
    warning: InferenceWarning | None


def _kind(head: PageHead) -> str | None:
    if head.type in LINKABLE_TYPES:
        return head.type
    return next((kind for folder, kind in _FOLDERS.items() if head.slug.startswith(folder)), None)


def _spans(text: str) -> dict[str, list[tuple[int, int, int]]]:
    """key -> [(first word, last word, words)] of every 1..NGRAM_MAX-word n-gram, as written; the
    n-grams that start with a capital letter first (longest first), then the others (shortest first)."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    grams = [(i, i + n - 1, n) for n in range(1, NGRAM_MAX + 1) for i in range(len(words) - n + 1)]
    grams.sort(key=lambda g: (0, -g[2]) if text[words[g[0]][0]].isupper() else (1, g[2]))
    out: dict[str, list[tuple[int, int, int]]] = {}
    for a, b, n in grams:
        key = match_key(text[words[a][0] : words[b][1]])
        if key:
            out.setdefault(key, []).append((a, b, n))
    return out


def candidate_keys(text: str) -> list[str]:
    """The keys one write looks up, at most `NAME_KEYS_MAX` (`_spans`' order)."""
    return list(_spans(text))[:NAME_KEYS_MAX]


def _decide(text: str, found: list[tuple[str, PageHead]]) -> Inference:
    spans = _spans(text)
    hits: list[tuple[int, int, int, PageHead]] = []
    for key, head in found:
        if _kind(head) is None:
            continue  # not an entity page (a note, a meeting, a topic)
        hits += [(a, b, n, head) for a, b, n in spans.get(key, ())]
    if not hits:
        return Inference(None, NO_ENTITY)
    # a name inside a longer matched name is part of it, not a second name
    kept = [h for h in hits if not any(o[0] <= h[0] and h[1] <= o[1] and o[2] > h[2] for o in hits)]
    named: dict[str, PageHead] = {}  # pages named in full
    bare: set[str] = set()  # persons named by one word only (a bare first name)
    for _, _, n, head in kept:
        if n == 1 and _kind(head) == "person":
            bare.add(head.slug)
        else:
            named[head.slug] = head
    if len(named) != 1 or not bare <= set(named):
        return Inference(None, ENTITY_LINK_FAILED)
    (page,) = named.values()
    return Inference(page, None)


def infer_entity(deps: Deps, caller: Caller, text: str) -> Inference:
    """The one entity page `text` names, read in one batched lookup; never raises."""
    try:
        keys = candidate_keys(text)
        if not keys:
            return Inference(None, NO_ENTITY)
        # remote callers never see a private page (fail-closed, as every entity resolution)
        found = deps.pages.names(caller.tenant, keys, world_only=caller.remote)
        if caller.remote:
            found = [(k, m) for k, m in found if m.page.visibility == "world"]
        return _decide(text, [(k, m.page) for k, m in found])
    except Exception as exc:  # inference never refuses a write
        log.warning(
            "entity inference failed", extra={"event": "entity_inference_failed", "exc_type": type(exc).__name__}
        )
        return Inference(None, ENTITY_LINK_FAILED)
