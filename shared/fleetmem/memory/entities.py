"""Entity names -> page slugs, for writes (canonicalization) and for the `entity` verb (resolution).

Public functions:
- `canonicalize_entity(deps, tenant, name, *, world_only=True) -> str`: the slug a fact about `name`
  is stored under (remember, recall's entity filter). Order (PROTOCOL_NOTES §4, D6 no fuzzy):
  1. `name` is an existing page slug as given -> `name`;
  2. `name` is the alias of exactly one page -> that page's slug;
  3. `name` is a bare single token and exactly one page is `people/<tok>` / `people/<tok>-…` /
     `companies/<tok>` / `companies/<tok>-…` -> that page's slug;
  4. otherwise `slugify(name)` per path segment ("" when nothing is sluggable).
  With `world_only` (the default, fail-closed) private pages take no part in steps 2 and 3, so an
  alias cannot reveal a private page's slug; trusted-local callers pass `world_only=False`.
- `resolve_entity(deps, tenant, name, *, world_only) -> Resolution`: ranked candidates for the
  `entity` verb (PROTOCOL_NOTES §6): rank 0 exact normalized alias; rank 1 exact title
  (case-insensitive) or exact slug (raw or slugified); rank 2 slug suffix `*/<slugify(name)>`.
  A page counts once, at its best rank; ties break on the most recent of updated_at /
  last_retrieved_at (then slug, for a stable order). `Resolution.best` is None on a miss.
- `near_misses(deps, tenant, name, *, world_only) -> list[dict]`: up to 3 keyword near-misses
  `{slug, title, type, create_safety}` for a miss. create_safety rule: `probable` when every word
  of the normalized name is a word of the page's title or slug (the page very likely is the entity
  under another spelling), otherwise `unknown`.
- `parse_entity_list(text, cap) -> list[str]`: a comma-separated entity string, trimmed, empties
  dropped, capped (duplicates kept: the echo shows what was asked; cards are deduplicated later).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from fleetmem.memory.slugs import normalize_alias, slugify
from fleetmem.models import PageHead
from fleetmem.ports import Deps
from fleetmem.protocol import SUGGESTIONS_MAX

_RANK = {"alias": 0, "title": 1, "slug": 1, "suffix": 2}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_WORD = re.compile(r"[a-z0-9]+")
_ENTITY_PREFIXES = ("people/", "companies/")


@dataclass
class Candidate:
    head: PageHead
    rank: int
    via: str

    @property
    def touched(self) -> datetime:
        retrieved = self.head.last_retrieved_at or _EPOCH
        return max(self.head.updated_at, retrieved)


@dataclass
class Resolution:
    best: Candidate | None
    runners_up: list[Candidate] = field(default_factory=list)


def _lookup(deps: Deps, tenant: str, name: str, *, world_only: bool) -> list[Candidate]:
    raw = name.strip()
    slug = slugify(raw)
    matches = deps.pages.lookup(
        tenant,
        alias=normalize_alias(raw),
        title=raw.lower(),
        slugs=[s for s in dict.fromkeys((raw, slug)) if s],
        suffix=slug,
        world_only=world_only,
        limit=10,
    )
    best: dict[str, Candidate] = {}
    for m in matches:
        if world_only and m.page.visibility != "world":
            continue  # defence in depth: the store already filters
        rank = _RANK[m.via]
        seen = best.get(m.page.slug)
        if seen is None or rank < seen.rank:
            best[m.page.slug] = Candidate(m.page, rank, m.via)
    return sorted(best.values(), key=lambda c: (c.rank, -c.touched.timestamp(), c.head.slug))


def resolve_entity(deps: Deps, tenant: str, name: str, *, world_only: bool) -> Resolution:
    ranked = _lookup(deps, tenant, name, world_only=world_only)
    if not ranked:
        return Resolution(best=None)
    return Resolution(best=ranked[0], runners_up=ranked[1 : 1 + SUGGESTIONS_MAX])


def _words(text: str) -> set[str]:
    return set(_WORD.findall(slugify(text).replace("/", " ").replace("-", " ")))


def near_misses(deps: Deps, tenant: str, name: str, *, world_only: bool) -> list[dict]:
    wanted = _words(name)
    out: list[dict] = []
    for head in deps.pages.keyword(tenant, name.strip(), world_only=world_only, limit=SUGGESTIONS_MAX):
        if world_only and head.visibility != "world":
            continue
        have = _words(head.title) | _words(head.slug)
        safety = "probable" if wanted and wanted <= have else "unknown"
        out.append({"slug": head.slug, "title": head.title, "type": head.type, "create_safety": safety})
    return out[:SUGGESTIONS_MAX]


def _unique_entity_page(deps: Deps, tenant: str, token: str, *, world_only: bool) -> str | None:
    found: list[str] = []
    for prefix in _ENTITY_PREFIXES:
        exact = f"{prefix}{token}"
        heads = deps.pages.heads(tenant, [exact])
        found += [h.slug for h in heads if not world_only or h.visibility == "world"]
        # Slugs after `exact` in byte order start with the "-" continuations (0x2d sorts before
        # "/", digits and letters), so the first two rows tell unique from ambiguous.
        for head in deps.pages.list(tenant, world_only=world_only, limit=2, after=exact):
            if head.slug.startswith(exact + "-"):
                found.append(head.slug)
        if len(found) > 1:
            return None
    return found[0] if len(found) == 1 else None


def canonicalize_entity(deps: Deps, tenant: str, name: str, *, world_only: bool = True) -> str:
    raw = name.strip()
    if not raw:
        return ""
    alias = normalize_alias(raw)
    heads, matches = deps.gather(
        lambda: deps.pages.heads(tenant, [raw]),
        lambda: deps.pages.lookup(
            tenant, alias=alias, title="", slugs=[], suffix="", world_only=world_only, limit=2
        ),
    )
    if heads:
        return raw
    alias_slugs = {
        m.page.slug for m in matches
        if m.via == "alias" and (not world_only or m.page.visibility == "world")
    }
    if len(alias_slugs) == 1:
        return alias_slugs.pop()
    slug = slugify(raw)
    if "/" not in slug and len(raw.split()) == 1 and slug:
        unique = _unique_entity_page(deps, tenant, slug, world_only=world_only)
        if unique:
            return unique
    return slug


def parse_entity_list(text: str | None, cap: int) -> list[str]:
    items = [p.strip() for p in (text or "").split(",")]
    return [p for p in items if p][:cap]
