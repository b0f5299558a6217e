"""`entity{names}`: many names in one call, each resolved as `entity{name}` resolves it, answered with
a light row per name (docs/protocol.md: entity, D35). No references, facts or threads: a full card
per name is `entity{name}`.

Public API: `NAMES_MAX`, `LEAD_CHARS`, the row/answer models, `page_lead(body)`, `lookup_names(deps,
caller, names) -> dict` (`{results[], found, missing}`: `found`/`missing` are counts).
- names are trimmed, blanks dropped, duplicates resolved once, rows in first-seen order;
- resolution is `entities.resolve_names` (one lookup for every name's alias, title and slug keys;
  the suffix lookup only for the names nothing matched exactly), world-only for remote callers;
- a name whose own slug holds active facts visible to the caller and no page is a hit on that
  fact-only entity (title and type as its card names them, `aka` [], `lead` "");
- hit row `{name, found: true, slug, title, type, aka[], lead}`: `lead` is up to 200 characters
  of the page's opening prose: private fences, headings, HTML comments and table rows removed,
  credentials redacted (for every caller);
- after the resolution, ONE round: the best pages (`PageStore.leads`: no links, timeline or
  frontmatter), the fact counts of the names whose own slug has no page, and the misses' keyword near-misses;
- miss row `{name, found: false, suggestions?}`: up to 3 `{slug, title}` pages sharing a word with
  the name (the page keyword arm of `entity`'s near-misses, all misses in one read:
  `PageStore.keyword_many`; fact-only near-misses are left out to keep the batch to page reads),
  left out when there are none.
"""

from __future__ import annotations

from typing import Any

from fleetmem.memory.entities import resolve_names
from fleetmem.memory.pagefmt import strip_private
from fleetmem.memory.redaction import redact
from fleetmem.memory.slugs import fact_entity_head, normalize_alias
from fleetmem.models import Caller, Wire
from fleetmem.ports import Deps
from fleetmem.ports.pages import PageLeadSource
from fleetmem.protocol import SUGGESTIONS_MAX

NAMES_MAX = 50
LEAD_CHARS = 200
_SKIP_LINE = ("#", "<!--", "|")


class NameSuggestion(Wire):
    slug: str
    title: str


class EntityNameRow(Wire):
    name: str
    found: bool
    slug: str | None = None
    title: str | None = None
    type: str | None = None
    aka: list[str] | None = None
    lead: str | None = None
    suggestions: list[NameSuggestion] | None = None


class EntityNamesResult(Wire):
    protocol_version: int
    latency_ms: int
    results: list[EntityNameRow]
    found: int  # how many rows are hits
    missing: int  # how many rows are misses


def page_lead(body: str) -> str:
    kept: list[str] = []
    size = 0
    for line in strip_private(body).splitlines():
        line = " ".join(line.split())
        if line and not line.startswith(_SKIP_LINE):
            kept.append(line)
            size += len(line) + 1
            if size > 2 * LEAD_CHARS:  # enough prose: the scan below reads no more than it must
                break
    # whole lines are scanned, so a credential across the cut is still found
    text = redact(" ".join(kept))
    return text if len(text) <= LEAD_CHARS else text[: LEAD_CHARS - 1].rstrip() + "…"


def _hit(name: str, page: PageLeadSource) -> dict[str, Any]:
    aka = sorted({normalize_alias(a) for a in page.aliases if normalize_alias(a)})
    return {
        "name": name,
        "found": True,
        "slug": page.slug,
        "title": page.title,
        "type": page.type,
        "aka": aka,
        "lead": page_lead(page.body),
    }


def lookup_names(deps: Deps, caller: Caller, names: list[str]) -> dict[str, Any]:
    tenant, world_only = caller.tenant, caller.remote
    unique = list(dict.fromkeys(n.strip() for n in names if n.strip()))
    res = resolve_names(deps, tenant, unique, world_only=world_only)
    # a name whose own slug (no page) holds active facts the caller may see is that fact-only
    # entity, as for one name; its count, the best pages and the misses' near-misses: one round
    own = [n for n in unique if res[n].target.page is None and res[n].target.slug]
    best = {n: r.best.head.slug for n, r in res.items() if r.best is not None}
    bare = [n for n in unique if n not in best]
    now = deps.clock.now()
    got = deps.gather(
        lambda: deps.pages.leads(tenant, list(dict.fromkeys(best.values()))),
        *(
            lambda n=n: deps.fact_decisions.count_active(tenant, res[n].target.slug, now=now, world_only=world_only)
            for n in own
        ),
        lambda: deps.pages.keyword_many(tenant, bare, world_only=world_only, limit=SUGGESTIONS_MAX) if bare else [],
    )
    pages = {p.slug: p for p in got[0] if not (world_only and p.visibility != "world")}
    facts = {n: res[n].target.slug for n, count in zip(own, got[1 : 1 + len(own)], strict=True) if count}
    near = dict(zip(bare, got[1 + len(own)], strict=True))
    rows: list[dict[str, Any]] = []
    for name in unique:
        if name in facts:
            title, kind = fact_entity_head(facts[name], name)
            rows.append(
                {"name": name, "found": True, "slug": facts[name], "title": title, "type": kind, "aka": [], "lead": ""}
            )
        elif name in best and best[name] in pages:
            rows.append(_hit(name, pages[best[name]]))
        else:
            heads = [h for h in near.get(name, []) if not world_only or h.visibility == "world"]
            row: dict[str, Any] = {"name": name, "found": False}
            if heads:
                row["suggestions"] = [{"slug": h.slug, "title": h.title} for h in heads[:SUGGESTIONS_MAX]]
            rows.append(row)
    found = sum(1 for r in rows if r["found"])
    return {"results": rows, "found": found, "missing": len(rows) - found}
