"""Entity names -> page slugs: ONE resolution serves the `entity` verb, writes (remember) and
recall's entity filter, so a name that `entity()` resolves exactly is the name a fact is filed under.

Public functions:
- `resolve_entity(deps, tenant, name, *, world_only) -> Resolution`: THE resolution of a name.
  `Resolution.target` is where a fact about `name` is filed (remember) and looked up (recall,
  entity's fact-only card); `Resolution.best` is the page whose card `entity` / `context_pack`
  show; `runners_up` are up to 3 other candidates.
  The target takes only EXACT ways, and only when unambiguous (docs/protocol.md: remember, D6:
  exact is not fuzzy; D15: exact titles resolve on writes), in this order:
  1. exact alias of exactly one page, compared by `slugs.match_key` (NFKC, casefold, format
     characters dropped, whitespace collapsed: "JÜRGEN STRASSE" is "Jürgen Straße");
  2. exact slug (as given, slugified, or ASCII-folded: `slugs.ascii_slug`);
  3. exact title of exactly one page, compared by `slugs.match_key` too; when several pages
     share the title and exactly one of them has an entity type (`ENTITY_TYPES`: person,
     company, organization, project, entity), that one (D35: the reference's precedence);
  4. a bare single token and exactly one page is `people/<tok>` / `people/<tok>-…` /
     `companies/<tok>` / `companies/<tok>-…` (tok slugified or ASCII-folded);
  5. otherwise `slugify(name)` per path segment ("" when nothing is sluggable): `page` is None
     and `ambiguous` lists the pages that tied at a rank (the caller's suggestions).
  When the target is a page, that page is `best`. Otherwise `best` is the top of the entity
  verb's ranking (docs/protocol.md: entity): rank 0 exact alias; rank 1 exact slug; rank 2 exact
  title (by `match_key`; an entity-typed page before a note or conversation page); rank 3 slug
  suffix `*/<slugify(name)>`; a page counts once, at its best rank; ties break on the most recent
  of updated_at / last_retrieved_at (then slug).
  With `world_only` (remote callers; fail-closed) private pages take no part, so a name cannot
  reveal a private page's slug; trusted-local callers pass `world_only=False`.
- `resolve_names(deps, tenant, names, *, world_only) -> dict[str, Resolution]`: many names at once
  (entity's `names`), with one lookup for all of them (see the function).
- `canonicalize_entity(deps, tenant, name, *, world_only=True) -> EntityTarget`: `resolve_entity`'s
  target alone (the suffix rank, which never decides a target, is not looked up).
- `require_slug(tool, name, target)`: raises `invalid_params` when a name of at most TITLE_MAX
  characters resolved to no page and either is a path ("../../etc/passwd": a "." or ".." segment
  or a backslash, `slugs.path_slug_error`; slugifying it would file the fact under the folded
  "etc/passwd") or has no letter or digit to make a slug from ("!!!///???": such a fact could
  never be found by entity). The fix says what to pass instead (no guessed call).
- `filter_slug(deps, tool, tenant, name, *, world_only) -> str`: THE entity filter of the reads
  (recall's facts arm, list_facts): the name resolved as remember files it, checked by
  `require_slug`; "" when it can name nothing (longer than TITLE_MAX), which matches no fact.
- `near_misses(deps, tenant, name, *, world_only, exclude=()) -> list[dict]`: up to 3
  near-misses `{slug, title, type, create_safety}`: pages sharing a word with the name, or with a
  word of title/alias/slug that STARTS with a word of the name ("Pri" -> "Priya Raman"); a
  slug-shaped name ("people/pri") is matched by its last segment.
  create_safety: `probable` when every word of the normalized name is a word of the page's title
  or slug (the page very likely is the entity under another spelling), otherwise `unknown`.
  Entities that have facts but no page are near-misses too: found through the fact index (facts
  filed under a slug with a word that is, or starts with, a word of the name; their title and
  type as `entity`'s fact-only card names them, `slugs.fact_entity_head`). The `probable` ones
  come first; within each kind pages before fact-only entities.
- `parse_entity_list(text, cap) -> list[str]`: a comma-separated entity string, trimmed, empties
  dropped, capped (duplicates kept: the echo shows what was asked; cards are deduplicated later).

Names longer than TITLE_MAX (the longest name, alias or slug a page can have, D16) match nothing:
resolution returns a miss (reads answer "not found", never an error); writes reject them before
calling here (remember's validation).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fleetmem.errors import PortError, caller_error
from fleetmem.memory.slugs import (
    alias_keys,
    ascii_slug,
    fact_entity_head,
    is_path_like,
    last_segment,
    match_key,
    normalize_alias,
    path_slug_error,
    slugify,
    title_keys,
)
from fleetmem.models import PageHead, PageMatch, SearchHit, SearchQuery
from fleetmem.ports import Deps
from fleetmem.ports.pages import BareCandidates
from fleetmem.protocol import SUGGESTIONS_MAX, TITLE_MAX

_RANK = {"alias": 0, "slug": 1, "title": 2, "token": 2, "suffix": 3}
#: page types that name an entity: for the same exact title they beat note and conversation pages (D35)
ENTITY_TYPES = frozenset({"person", "company", "organization", "project", "entity"})
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_WORD_SEP = re.compile(r"[-/]+")
_ENTITY_PREFIXES = ("people/", "companies/")
_FACT_SCAN = 20  # fact hits read for fact-only near-misses


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
class EntityTarget:
    """Where a write files a fact: `slug` ("" = nothing sluggable), the page it resolved to (None
    when the slug was made from the name), how (`alias|title|slug|token|new`), and the pages that
    tied at some exact rank (why a name that looked known did not resolve)."""

    slug: str
    page: PageHead | None = None
    via: str = "new"
    ambiguous: list[PageHead] = field(default_factory=list)


@dataclass
class Resolution:
    target: EntityTarget
    best: Candidate | None
    runners_up: list[Candidate] = field(default_factory=list)


def _matches(deps: Deps, tenant: str, raw: str, *, world_only: bool, suffix: bool) -> list[PageMatch]:
    """The one store lookup behind every resolution: alias, title, slug (and suffix for entity)."""
    slug = slugify(raw)
    # both key forms: pages written before `match_key` keep their old keys until their next put
    matches = deps.pages.lookup(
        tenant,
        aliases=alias_keys(raw),
        titles=title_keys(raw),
        slugs=[s for s in dict.fromkeys((raw, slug, ascii_slug(raw))) if s],
        suffix=slug if suffix else "",
        world_only=world_only,
        limit=10,
    )
    # defence in depth: the store already filters
    return [m for m in matches if not world_only or m.page.visibility == "world"]


def _not_entity(head: PageHead) -> bool:
    return (head.type or "") not in ENTITY_TYPES


def _ranked(matches: list[PageMatch]) -> list[Candidate]:
    best: dict[str, Candidate] = {}
    for m in matches:
        rank = _RANK[m.via]
        seen = best.get(m.page.slug)
        if seen is None or rank < seen.rank:
            best[m.page.slug] = Candidate(m.page, rank, m.via)
    # within the exact-title rank an entity page beats a note or conversation page (D35)
    return sorted(
        best.values(),
        key=lambda c: (c.rank, c.via == "title" and _not_entity(c.head), -c.touched.timestamp(), c.head.slug),
    )


def _words(text: str) -> set[str]:
    return {w for w in _WORD_SEP.split(slugify(text)) if w}


def _suggestion(slug: str, title: str, kind: str | None, wanted: set[str]) -> dict[str, Any]:
    have = _words(title) | _words(slug)
    safety = "probable" if wanted and wanted <= have else "unknown"
    return {"slug": slug, "title": title, "type": kind, "create_safety": safety}


def _near(slug: str, wanted: set[str]) -> bool:
    """A word of the slug's last segment is, or starts with, a word of the name."""
    return any(have.startswith(w) for have in _words(last_segment(slug)) for w in wanted)


def _fact_hits(deps: Deps, tenant: str, text: str, wanted: set[str], *, world_only: bool) -> list[SearchHit]:
    """The fact index's keyword hits for a name (a fact's indexed title is its entity slug); none
    when the name has no word or the index cannot answer (near-misses are advice)."""
    if not wanted:
        return []
    query = SearchQuery(tenant=tenant, text=text, kinds=("fact",), world_only=world_only, k=_FACT_SCAN)
    try:
        return list(deps.search.search(query).keyword)
    except PortError:
        return []


def _fact_only_near_misses(
    deps: Deps, tenant: str, hits: list[SearchHit], wanted: set[str], *, world_only: bool, skip: set[str]
) -> list[dict[str, Any]]:
    """Entities that have facts but no page, near the name: of the facts the index found (`hits`),
    those filed under a slug sharing a word with it, whose slug is no page's and that hold active
    facts the caller may see, are offered."""
    slugs = [s for s in dict.fromkeys(h.slug for h in hits) if s and s not in skip and _near(s, wanted)]
    if not slugs:
        return []
    paged = {h.slug for h in deps.pages.heads(tenant, slugs)}
    slugs = [s for s in slugs if s not in paged][:SUGGESTIONS_MAX]
    now = deps.clock.now()
    counts = deps.gather(
        *(lambda s=s: deps.fact_decisions.count_active(tenant, s, now=now, world_only=world_only) for s in slugs)
    )
    return [_suggestion(slug, *fact_entity_head(slug), wanted) for slug, n in zip(slugs, counts, strict=True) if n]


def near_misses(
    deps: Deps, tenant: str, name: str, *, world_only: bool, exclude: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    # A slug-shaped name is matched by its last segment: "people/" names a folder, not the entity
    # (otherwise every people/ page would look like a near-miss of "people/bob").
    text = last_segment(name.strip()[:TITLE_MAX]) or name.strip()[:TITLE_MAX]
    wanted = _words(text)
    out: list[dict[str, Any]] = []
    limit = SUGGESTIONS_MAX + len(exclude)
    # the page keyword lookup and the fact search are independent: one concurrent round
    heads, fact_hits = deps.gather(
        lambda: deps.pages.keyword(tenant, text, world_only=world_only, limit=limit),
        lambda: _fact_hits(deps, tenant, text, wanted, world_only=world_only),
    )
    for head in heads:
        if (world_only and head.visibility != "world") or head.slug in exclude:
            continue
        out.append(_suggestion(head.slug, head.title, head.type, wanted))
    out += _fact_only_near_misses(
        deps, tenant, fact_hits, wanted, world_only=world_only, skip={*exclude, *(o["slug"] for o in out)}
    )
    # the likely ones first (a stable sort: within each, pages before fact-only entities)
    out.sort(key=lambda o: o["create_safety"] != "probable")
    return out[:SUGGESTIONS_MAX]


#: the pages a bare token may name (`people/<tok>` and what follows it): `exact` -> the page of that
#: slug (if visible) and the next two slugs after it
Near = Callable[[str], list[PageHead]]


def _store_near(deps: Deps, tenant: str, *, world_only: bool) -> Near:
    def near(exact: str) -> list[PageHead]:
        heads = [h for h in deps.pages.heads(tenant, [exact]) if not world_only or h.visibility == "world"]
        return heads + deps.page_listing.list(tenant, world_only=world_only, limit=2, after=exact)

    return near


def _bare_tokens(raw: str) -> list[str]:
    """The tokens the bare-token rule tries for a one-word name ([] for any other name)."""
    slug = slugify(raw)
    if "/" in slug or len(raw.split()) != 1 or not slug:
        return []
    return [t for t in dict.fromkeys((slug, ascii_slug(raw))) if t and "/" not in t]


def _unique_entity_page(tokens: list[str], near: Near) -> PageHead | None:
    found: dict[str, PageHead] = {}
    for prefix in _ENTITY_PREFIXES:
        for token in tokens:
            exact = f"{prefix}{token}"
            # Slugs after `exact` in code-point (= UTF-8 byte) order start with the "-"
            # continuations (0x2d sorts before "/", digits and the letters of every script), so the
            # first two rows tell unique from ambiguous.
            for head in near(exact):
                if head.slug == exact or head.slug.startswith(exact + "-"):
                    found[head.slug] = head
            if len(found) > 1:
                return None
    return next(iter(found.values())) if len(found) == 1 else None


_WRITE_WAYS = ("alias", "slug", "title")


def _target(
    deps: Deps,
    tenant: str,
    raw: str,
    matches: list[PageMatch],
    *,
    world_only: bool,
    near: Near | None = None,
    keys: _Keys | None = None,
) -> EntityTarget:
    ambiguous: dict[str, PageHead] = {}
    by_way: dict[str, dict[str, PageHead]] = {via: {} for via in _WRITE_WAYS}
    for m in matches:
        if m.via in by_way:
            by_way[m.via][m.page.slug] = m.page
    for via in _WRITE_WAYS:
        pages = by_way[via]
        entity_pages = {s: h for s, h in pages.items() if not _not_entity(h)}
        if via == "title" and len(pages) > 1 and len(entity_pages) == 1:
            pages = entity_pages  # one entity page among same-titled notes and conversations (D35)
        if len(pages) == 1:
            (head,) = pages.values()
            return EntityTarget(slug=head.slug, page=head, via=via)
        ambiguous.update(pages)
    slug = keys.slug if keys is not None else slugify(raw)
    tokens = keys.tokens if keys is not None else _bare_tokens(raw)
    if tokens:
        unique = _unique_entity_page(tokens, near or _store_near(deps, tenant, world_only=world_only))
        if unique:
            return EntityTarget(slug=unique.slug, page=unique, via="token")
    ranked = _ranked([m for m in matches if m.page.slug in ambiguous])
    return EntityTarget(slug=slug, ambiguous=[c.head for c in ranked])


def _resolution(
    deps: Deps,
    tenant: str,
    raw: str,
    matches: list[PageMatch],
    *,
    world_only: bool,
    near: Near | None = None,
    keys: _Keys | None = None,
) -> Resolution:
    target = _target(deps, tenant, raw, matches, world_only=world_only, near=near, keys=keys)
    ranked = _ranked(matches)
    if target.page is not None:
        ranked = [Candidate(target.page, _RANK[target.via], target.via)] + [
            c for c in ranked if c.head.slug != target.slug
        ]
    if not ranked:
        return Resolution(target=target, best=None)
    return Resolution(target=target, best=ranked[0], runners_up=ranked[1 : 1 + SUGGESTIONS_MAX])


def _resolve(deps: Deps, tenant: str, name: str, *, world_only: bool, suffix: bool) -> Resolution:
    raw = name.strip()
    if not raw or len(raw) > TITLE_MAX:
        return Resolution(target=EntityTarget(slug=""), best=None)
    matches = _matches(deps, tenant, raw, world_only=world_only, suffix=suffix)
    return _resolution(deps, tenant, raw, matches, world_only=world_only)


@dataclass(frozen=True)
class _Keys:
    """Everything resolution folds a name into, folded once: its alias keys, title keys and slugs
    (as `_matches` asks for them), its slug and the tokens the bare-token rule tries."""

    aliases: set[str]
    titles: set[str]
    slugs: set[str]
    slug: str
    tokens: list[str]


def _keys_of(raw: str) -> _Keys:
    """`alias_keys`, `title_keys`, `slugify`, `ascii_slug` and `_bare_tokens` of `raw`, with
    `match_key` and the slugs computed once (the same values those give one by one)."""
    slug = slugify(raw)
    if raw.isascii():  # the same keys without Unicode folding: an ASCII text's match key is its
        key, folded = normalize_alias(raw), slug  # `normalize_alias`, its ASCII slug its slug
    else:
        key, folded = match_key(raw), ascii_slug(raw)
    aliases = {k for k in (key, normalize_alias(raw)) if k}
    titles = {k for k in (key, raw.strip().lower()) if k}
    one_word = "/" not in slug and len(raw.split()) == 1 and bool(slug)
    tokens = [t for t in dict.fromkeys((slug, folded)) if t and "/" not in t] if one_word else []
    return _Keys(aliases, titles, {s for s in (raw, slug, folded) if s}, slug, tokens)


def _exact_many(
    deps: Deps, tenant: str, raws: list[str], keys: dict[str, _Keys], *, world_only: bool
) -> dict[str, list[PageMatch]]:
    """The alias, title and slug matches of many names in ONE store lookup, told apart per name."""
    asked = {raw: (keys[raw].aliases, keys[raw].titles, keys[raw].slugs) for raw in raws}
    matches = deps.pages.lookup(
        tenant,
        aliases=list(dict.fromkeys(k for a, _, _ in asked.values() for k in sorted(a))),
        titles=list(dict.fromkeys(k for _, t, _ in asked.values() for k in sorted(t))),
        slugs=list(dict.fromkeys(k for _, _, sl in asked.values() for k in sorted(sl))),
        suffix="",
        world_only=world_only,
        limit=10,  # per key, as `_matches` asks: each name sees the candidates it sees alone
    )
    # each key back to the names that asked for it (keys are shared when names are spelled alike)
    by_key: dict[tuple[str, str], list[str]] = {}
    for raw, ways in asked.items():
        for via, wanted in zip(("alias", "title", "slug"), ways, strict=True):
            for k in wanted:
                by_key.setdefault((via, k), []).append(raw)
    per: dict[str, dict[tuple[str, str], PageMatch]] = {raw: {} for raw in raws}
    for m in matches:
        if world_only and m.page.visibility != "world":
            continue
        held = {m.key} if m.via == "alias" else set(title_keys(m.page.title)) if m.via == "title" else {m.page.slug}
        for k in held:
            for raw in by_key.get((m.via, k), ()):
                per[raw][(m.via, m.page.slug)] = m
    return {raw: list(found.values()) for raw, found in per.items()}


def _bare_read(
    deps: Deps, tenant: str, suffixes: list[str], prefixes: list[str], *, world_only: bool
) -> BareCandidates:
    if not suffixes and not prefixes:
        return BareCandidates(suffix={}, prefix={})
    return deps.pages.bare_candidates(
        tenant,
        suffixes=list(dict.fromkeys(suffixes)),
        prefixes=list(dict.fromkeys(prefixes)),
        world_only=world_only,
        limit=10,
    )


def resolve_names(deps: Deps, tenant: str, names: list[str], *, world_only: bool) -> dict[str, Resolution]:
    """`resolve_entity` of many names (entity's `names`, D35) with batched reads: one lookup of
    every name's alias, title and slug keys; then, only for the names nothing matched exactly, one
    read of the bare-token pages of the one-word ones and the slug-suffix candidates of the others
    (`PageStore.bare_candidates`), and one more of the suffix candidates of the one-word names the
    token rule named no page for. Each name's best page is the one `resolve_entity` gives (the
    suffix rank comes after every exact one, and a page the token rule names is the target);
    runners-up may leave out suffix matches."""
    raws = [n for n in dict.fromkeys(n.strip() for n in names) if n and len(n) <= TITLE_MAX]
    keys = {raw: _keys_of(raw) for raw in raws}
    per = _exact_many(deps, tenant, raws, keys, world_only=world_only) if raws else {}
    # the names nothing matched exactly: the bare-token pages of the one-word ones and the suffix
    # candidates of the others, one read; a one-word name the token rule names no page for reads
    # its suffix candidates in one more (a page the rule names is the best page whatever its
    # suffix matches: they would only be runners-up)
    bare = {raw: keys[raw].slug for raw in raws if not per[raw] and keys[raw].slug}
    tokens = {raw: keys[raw].tokens for raw in bare}
    prefixes = [f"{p}{t}" for raw in bare for t in tokens[raw] for p in _ENTITY_PREFIXES]
    found = _bare_read(deps, tenant, [bare[r] for r in bare if not tokens[r]], prefixes, world_only=world_only)
    store = _store_near(deps, tenant, world_only=world_only)

    def near(exact: str) -> list[PageHead]:  # a name with exact but no unique match reads the store
        return found.prefix[exact] if exact in found.prefix else store(exact)

    later = [raw for raw in bare if tokens[raw] and _unique_entity_page(tokens[raw], near) is None]
    suffixes = dict(found.suffix)
    if later:
        suffixes.update(_bare_read(deps, tenant, [bare[r] for r in later], [], world_only=world_only).suffix)
    for raw, suffix in bare.items():
        per[raw] = [m for m in suffixes.get(suffix, []) if not world_only or m.page.visibility == "world"]
    out = {
        raw: _resolution(deps, tenant, raw, per[raw], world_only=world_only, near=near, keys=keys[raw]) for raw in raws
    }
    return {n: out.get(n.strip(), Resolution(target=EntityTarget(slug=""), best=None)) for n in names}


def resolve_entity(deps: Deps, tenant: str, name: str, *, world_only: bool) -> Resolution:
    return _resolve(deps, tenant, name, world_only=world_only, suffix=True)


def canonicalize_entity(deps: Deps, tenant: str, name: str, *, world_only: bool = True) -> EntityTarget:
    return _resolve(deps, tenant, name, world_only=world_only, suffix=False).target


def require_slug(tool: str, name: str, target: EntityTarget) -> None:
    raw = name.strip()
    if target.page is not None or not raw or len(raw) > TITLE_MAX:
        return
    if is_path_like(raw):
        raise path_slug_error("entity", raw, field="entity")
    if target.slug:
        return
    shown = raw[:60]
    why = (
        "an entity is filed under a slug made of the letters and digits of its name (any script); "
        f"{shown!r} has none, and no page has it as its title or an alias."
    )
    instead = (
        'pass the entity\'s name as people write it (e.g. "Alice Example", "北京办公室"), or the '
        "slug of an existing page (entity(name) shows them)"
        + (", or leave entity out when the fact is about no particular entity." if tool == "remember" else ".")
    )
    raise caller_error(
        f"entity {shown!r} names no entity: it has no letter or digit.",
        problem=f"entity {shown!r} has no letter or digit.",
        cause=why,
        instead=instead,
        field="entity",
        reason="no_slug",
    )


def filter_slug(deps: Deps, tool: str, tenant: str, name: str, *, world_only: bool) -> str:
    target = canonicalize_entity(deps, tenant, name.strip(), world_only=world_only)
    require_slug(tool, name, target)
    return target.slug


def parse_entity_list(text: str | None, cap: int) -> list[str]:
    items = [p.strip() for p in (text or "").split(",")]
    return [p for p in items if p][:cap]
