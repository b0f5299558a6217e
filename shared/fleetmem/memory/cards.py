"""The entity card (docs/protocol.md, entity), shared by `entity` and `context_pack`.

Public functions:
- `read_card(deps, tenant, slug, *, world_only, now) -> (Page | None, CardInputs)`: the page and
  every other read a card needs, in ONE round of concurrent port calls (network backends).
- `build_card(deps, tenant, page, *, world_only, now, since=None, inputs=None) -> dict`: the full card
  `{entity{slug,title,type}, aka[], summary, last_touched{updated_at,last_retrieved_at,
  last_timeline_date}, open_threads[], edges[], backlink_count, active_fact_count, page: true}`.
  `world_only` (remote callers, and packs without include_private) strips private content from the
  summary, thread and edge texts (`pagefmt.strip_private`), hides private facts, and hides edges
  to or from private pages. `since` keeps only open threads dated strictly after it.
- `page_summary(page, *, world_only) -> str`: frontmatter summary, else the first prose sentence
  of the body; private content stripped when `world_only`; at most 160 characters ("…" when cut).
- `open_threads(deps, tenant, page, *, world_only, now, since=None) -> list[dict]`: at most 3
  `{kind, text, date}`: active commitment facts about the page (newest first), then timeline
  entries dated within the last 90 days before `now` (newest first; future-dated entries count as
  open too). Timeline dates that do not parse are skipped.
- `fact_card(slug, name, inputs, *, world_only) -> dict`: the card of an entity that has facts but
  no page (remember filed them under a slug no page has): the same fields, with `page: false`;
  `entity.title` is the name as asked when it slugifies to `slug`, else the slug's last segment
  with "-" as spaces; `entity.type` from the slug's folder (`people/` person, `companies/` company,
  `projects/` project, else null); `aka` [], `summary` "", `last_touched` all null; open threads
  are the active commitment facts; edges are the incoming links (pages may link to a slug before
  it has a page). Page cards from `build_card` carry `page: true`.
- `entity_card(deps, tenant, name, res, *, world_only, now, redacted, since=None) -> EntityCard | None`: THE
  card a resolved name gets, in `entity` and `context_pack` alike: the fact-only card when the
  name's own slug (`res.target`, no page) has active facts visible to the caller, else the card of
  the best-ranked page (`res.best`) when the caller may see it, else None. `EntityCard` carries
  the card, its `CardInputs` (the entity's active facts, newest first: context_pack's hot facts)
  and `fact_only`. The card is redacted for a remote caller (`redaction.redact_card`, D25: summary,
  open-thread texts, edge contexts); the inputs' facts are as stored.
- `slugs.fact_entity_head(slug, name="") -> (title, type)`: how a fact-only entity is named: the name as
  asked when it slugifies to the slug's last segment, else that segment with "-" as spaces; the
  type from the slug's folder.
- `flat_card(card) -> dict`: the card as context_pack lists it — the reference's flat shape,
  `slug`, `title`, `type` at the top level next to `summary`, `open_threads`, `edges`,
  `backlink_count` (the nested `entity`, `aka`, `last_touched`, `active_fact_count` and `page`
  stay as extras).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from fleetmem.errors import PortError
from fleetmem.memory import entity_refs
from fleetmem.memory.pagefmt import clip, first_sentence, strip_private
from fleetmem.memory.redaction import redact_card
from fleetmem.memory.slugs import fact_entity_head, normalize_alias
from fleetmem.models import Backlink, Fact, Page
from fleetmem.ports import Deps
from fleetmem.ports.pages import Referring
from fleetmem.protocol import (
    EDGES_MAX,
    MENTION_LINK_TYPE,
    OPEN_THREAD_TIMELINE_DAYS,
    OPEN_THREADS_MAX,
    SUMMARY_MAX_CHARS,
)
from fleetmem.timefmt import iso, parse_iso

if TYPE_CHECKING:
    from fleetmem.memory.entities import Resolution

MENTIONS = MENTION_LINK_TYPE
_COMMITMENT_SCAN = 50


@dataclass(frozen=True)
class CardInputs:
    facts: list[Fact]  # the entity's active facts, newest first (with `references`: see `read_card`)
    incoming: list[Backlink]
    backlink_count: int
    active_fact_count: int
    referring: Referring | None = None  # with `references`: every linking page (None: that read failed)


def _referring(deps: Deps, tenant: str, slug: str, *, world_only: bool) -> Referring | None:
    """The entity verb's backlink read: `backlinks` plus every linking page, in the same read; None
    when the store failed (the card still answers, its coverage says `failed`)."""
    try:
        return deps.page_listing.referring(tenant, slug, world_only=world_only, limit=EDGES_MAX * 5)
    except PortError:
        return None


def read_card(
    deps: Deps,
    tenant: str,
    slug: str,
    *,
    world_only: bool,
    now: datetime,
    with_page: bool = True,
    references: bool = False,
) -> tuple[Page | None, CardInputs]:
    """`references` (the entity verb, D35): the backlink read also lists every linking page, and
    the facts read is only what the card shows (its recent facts and the commitments among the
    newest `_COMMITMENT_SCAN`): context_pack's cards take every one as hot facts."""
    newest = entity_refs.RECENT_FACTS_MAX if references else None
    page, facts, links, active = deps.gather(
        (lambda: deps.pages.get(tenant, slug)) if with_page else (lambda: None),
        lambda: deps.fact_listing.by_entity(
            tenant, slug, now=now, world_only=world_only, limit=_COMMITMENT_SCAN, newest=newest
        ),
        (lambda: _referring(deps, tenant, slug, world_only=world_only))
        if references
        else (lambda: deps.page_listing.backlinks(tenant, slug, world_only=world_only, limit=EDGES_MAX * 5)),
        lambda: deps.fact_decisions.count_active(tenant, slug, now=now, world_only=world_only),
    )
    if not references:
        incoming, backlink_count = links
        return page, CardInputs(facts, incoming, backlink_count, active)
    if links is None:
        return page, CardInputs(facts, [], 0, active)
    return page, CardInputs(facts, links.links, links.link_count, active, referring=links)


def page_summary(page: Page, *, world_only: bool) -> str:
    summary = page.summary or ""
    if world_only:
        summary = strip_private(summary)
    summary = " ".join(summary.split())
    if not summary:
        body = strip_private(page.body) if world_only else page.body
        summary = first_sentence(body)
    return clip(summary, SUMMARY_MAX_CHARS)


def _timeline_dates(page: Page) -> list[tuple[datetime, str]]:
    out = []
    for entry in page.timeline:
        try:
            out.append((parse_iso(entry.date), entry.text))
        except ValueError:
            continue
    return out


def _commitments(facts: list[Fact], since: datetime | None) -> list[dict[str, Any]]:
    threads: list[dict[str, Any]] = []
    for fact in facts:
        if fact.kind != "commitment" or (since is not None and fact.created_at <= since):
            continue
        threads.append({"kind": "commitment", "text": fact.text, "date": iso(fact.created_at)})
        if len(threads) >= OPEN_THREADS_MAX:
            break
    return threads


def open_threads(
    deps: Deps,
    tenant: str,
    page: Page,
    *,
    world_only: bool,
    now: datetime,
    since: datetime | None = None,
    facts: list[Fact] | None = None,
) -> list[dict[str, Any]]:
    if facts is None:
        facts = deps.fact_listing.by_entity(tenant, page.slug, now=now, world_only=world_only, limit=_COMMITMENT_SCAN)
    threads = _commitments(facts, since)
    if len(threads) >= OPEN_THREADS_MAX:
        return threads
    cutoff = now - timedelta(days=OPEN_THREAD_TIMELINE_DAYS)
    entries = sorted(_timeline_dates(page), key=lambda e: e[0], reverse=True)
    for when, text in entries:
        if when < cutoff or (since is not None and when <= since):
            continue
        if world_only:
            text = " ".join(strip_private(text).split())
        if not text:
            continue
        threads.append({"kind": "recent_event", "text": text, "date": iso(when)})
        if len(threads) >= OPEN_THREADS_MAX:
            break
    return threads


def _edges(
    deps: Deps, tenant: str, page: Page | None, inputs: CardInputs, *, world_only: bool, slug: str = ""
) -> list[dict[str, Any]]:
    slug = page.slug if page is not None else slug
    links = page.links if page is not None else []
    out_links = [link for link in links if link.type != MENTIONS and link.target != slug]
    if world_only and out_links:
        private = {
            h.slug for h in deps.pages.heads(tenant, [link.target for link in out_links]) if h.visibility != "world"
        }
        out_links = [link for link in out_links if link.target not in private]

    def context(text: str | None) -> str | None:
        if text is None or not world_only:
            return text
        return " ".join(strip_private(text).split()) or None

    edges = [
        {"type": link.type, "direction": "out", "slug": link.target, "context": context(link.context)}
        for link in out_links[:EDGES_MAX]
    ]
    for link in inputs.incoming:
        if len(edges) >= EDGES_MAX:
            break
        if link.type == MENTIONS or link.source == slug:
            continue
        edges.append({"type": link.type, "direction": "in", "slug": link.source, "context": context(link.context)})
    return edges


def build_card(
    deps: Deps,
    tenant: str,
    page: Page,
    *,
    world_only: bool,
    now: datetime,
    since: datetime | None = None,
    inputs: CardInputs | None = None,
) -> dict[str, Any]:
    if inputs is None:
        _, inputs = read_card(deps, tenant, page.slug, world_only=world_only, now=now, with_page=False)
    dates = [d for d, _ in _timeline_dates(page)]
    edges = _edges(deps, tenant, page, inputs, world_only=world_only)
    return {
        "entity": {"slug": page.slug, "title": page.title, "type": page.type},
        "aka": sorted({normalize_alias(a) for a in page.aliases if normalize_alias(a)}),
        "summary": page_summary(page, world_only=world_only),
        "last_touched": {
            "updated_at": iso(page.updated_at),
            "last_retrieved_at": iso(page.last_retrieved_at),
            "last_timeline_date": iso(max(dates)) if dates else None,
        },
        "open_threads": open_threads(
            deps, tenant, page, world_only=world_only, now=now, since=since, facts=inputs.facts
        ),
        "edges": edges,
        "backlink_count": inputs.backlink_count,
        "active_fact_count": inputs.active_fact_count,
        "page": True,
    }


def fact_card(
    deps: Deps,
    tenant: str,
    slug: str,
    name: str,
    inputs: CardInputs,
    *,
    world_only: bool,
    since: datetime | None = None,
) -> dict[str, Any]:
    title, kind = fact_entity_head(slug, name)
    return {
        "entity": {"slug": slug, "title": title, "type": kind},
        "aka": [],
        "summary": "",
        "last_touched": {"updated_at": None, "last_retrieved_at": None, "last_timeline_date": None},
        "open_threads": _commitments(inputs.facts, since),
        "edges": _edges(deps, tenant, None, inputs, world_only=world_only, slug=slug),
        "backlink_count": inputs.backlink_count,
        "active_fact_count": inputs.active_fact_count,
        "page": False,
    }


@dataclass(frozen=True)
class EntityCard:
    card: dict[str, Any]
    inputs: CardInputs
    fact_only: bool

    @property
    def slug(self) -> str:
        return str(self.card["entity"]["slug"])


def entity_card(
    deps: Deps,
    tenant: str,
    name: str,
    res: Resolution,
    *,
    world_only: bool,
    now: datetime,
    redacted: bool,
    since: datetime | None = None,
    references: bool = False,
) -> EntityCard | None:
    """THE card of `res` (see the module docstring); `redacted`: credentials in its text become
    `<REDACTED:pattern>` (D25: for a remote caller); `references` (the entity verb): the card also
    has `referenced_by_count`, `referenced_by`, `recent_facts` and `coverage` (`entity_refs`)."""
    target = res.target
    refs = references
    if target.page is None and target.slug:
        _, inputs = read_card(
            deps, tenant, target.slug, world_only=world_only, now=now, with_page=False, references=refs
        )
        if inputs.active_fact_count > 0:
            card = fact_card(deps, tenant, target.slug, name, inputs, world_only=world_only, since=since)
            return _shown(
                deps, tenant, card, inputs, fact_only=True, world_only=world_only, redacted=redacted, refs=refs
            )
    if res.best is not None:
        page, inputs = read_card(deps, tenant, res.best.head.slug, world_only=world_only, now=now, references=refs)
        if page is not None and not (world_only and page.visibility != "world"):
            card = build_card(deps, tenant, page, world_only=world_only, now=now, since=since, inputs=inputs)
            return _shown(
                deps, tenant, card, inputs, fact_only=False, world_only=world_only, redacted=redacted, refs=refs
            )
    return None


def _shown(
    deps: Deps,
    tenant: str,
    card: dict[str, Any],
    inputs: CardInputs,
    *,
    fact_only: bool,
    world_only: bool,
    redacted: bool,
    refs: bool,
) -> EntityCard:
    if redacted:
        card = redact_card(card)
    if refs:
        if inputs.referring is None:
            card.update(referenced_by_count=0, referenced_by=[], coverage=entity_refs.coverage(failed=True))
        else:
            found = inputs.referring
            card.update(entity_refs.referenced_by(found, world_only=world_only, redacted=redacted))
            card["coverage"] = entity_refs.coverage()
        card["recent_facts"] = entity_refs.recent_facts(inputs.facts, redacted=redacted)
    return EntityCard(card, inputs, fact_only=fact_only)


def flat_card(card: dict[str, Any]) -> dict[str, Any]:
    ent = card["entity"]
    return {"slug": ent["slug"], "title": ent["title"], "type": ent["type"], **card}
