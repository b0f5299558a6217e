"""The `entity` verb's reference fields (docs/protocol.md: entity, D35), added to a card by
`cards.entity_card(..., references=True)`; context_pack's cards leave them out.

Public functions:
- `referenced_by(found, *, world_only, redacted) -> dict`: `referenced_by_count` (the
  distinct pages linking to the entity by any link kind, mentions included; private ones left out
  for remote callers) and `referenced_by[]`: those pages grouped by `canonical_type` (the page type,
  "page" when it has none), groups ordered by their newest row, at most 10 rows per group and 50
  per card, each group with its `total`. A row is `{slug, title, type, canonical_type, date,
  date_source: "updated_at", preview}`: fleetmem has no effective date, so `date` is the linking
  page's last write; `preview` is the context written with its link (a typed link's before a
  mention's; at most 160 characters,
  private fences stripped for remote callers and credentials redacted for them), "" without one.
  No `next`: fleetmem has no backlink-listing tool to name (D35). No read of its own: the counts
  and the rows shown come with the card's backlink read (`PageListing.referring`: on SQLite the link
  rows carry their page's group, counted and ranked in the `links_group` index, only the pages shown
  read by key; on DynamoDB the link rows carry their page's head), so the cost follows the rows
  shown, not every linking page.
- `recent_facts(facts, *, redacted) -> list[dict]`: the 5 newest of the card's active facts (already
  read for open threads, so visible to the caller), `{id, fact, kind, valid_from, entity_slug}`;
  `valid_from` is the fact's `created_at` (fleetmem keeps no separate event time).
- `coverage(failed) -> dict`: `{state, pending_pages, last_pass_at}`. A page's links (frontmatter
  links and `[[slug]]` mentions) are written in the page's own write on both backends; there is no
  deferred mention pass, so the state is `complete` with nothing pending and no pass time
  (`last_pass_at: null`); `failed` (with `degraded: true`) when the linking pages could not be read.
- `mention_index_notice(cov) -> Notice`: the notice a card whose coverage is not complete carries.
"""

from __future__ import annotations

from typing import Any

from fleetmem.errors import Notice
from fleetmem.memory.pagefmt import clip, strip_private
from fleetmem.memory.redaction import redact
from fleetmem.models import Fact
from fleetmem.ports.pages import Referring, canonical_type
from fleetmem.protocol import MENTION_LINK_TYPE
from fleetmem.timefmt import iso

PREVIEW_CHARS = 160
RECENT_FACTS_MAX = 5


def _preview(context: str | None, *, world_only: bool, redacted: bool) -> str:
    text = context or ""
    if world_only:
        text = strip_private(text)
    text = " ".join(text.split())
    return clip(redact(text) if redacted else text, PREVIEW_CHARS)


def referenced_by(found: Referring, *, world_only: bool, redacted: bool) -> dict[str, Any]:
    # a page's preview: the context of its typed link before its mention's (the index keeps no order
    # between one page's links), the first by type when several have one
    context: dict[str, str] = {}
    for link in sorted(found.links, key=lambda x: (x.type == MENTION_LINK_TYPE, x.type, x.context or "")):
        if link.context:
            context.setdefault(link.source, link.context)
    groups: dict[str, dict[str, Any]] = {
        t: {"canonical_type": t, "total": n, "rows": []} for t, n in found.totals.items()
    }
    for head in found.heads:  # newest first, at most 10 a group and 50 in all (the store's bound)
        if world_only and head.visibility != "world":  # defence in depth: the store already left them out
            continue
        canonical = canonical_type(head.type)
        group = groups.setdefault(canonical, {"canonical_type": canonical, "total": 0, "rows": []})
        group["rows"].append(
            {
                "slug": head.slug,
                "title": head.title,
                "type": head.type,
                "canonical_type": canonical,
                "date": iso(head.updated_at),
                "date_source": "updated_at",
                "preview": _preview(context.get(head.slug), world_only=world_only, redacted=redacted),
            }
        )
    return {"referenced_by_count": found.count, "referenced_by": list(groups.values())}


def recent_facts(facts: list[Fact], *, redacted: bool) -> list[dict[str, Any]]:
    return [
        {
            "id": f.fact_id,
            "fact": redact(f.text) if redacted else f.text,
            "kind": f.kind,
            "valid_from": iso(f.created_at),
            "entity_slug": f.entity_slug,
        }
        for f in facts[:RECENT_FACTS_MAX]
    ]


def coverage(*, failed: bool = False) -> dict[str, Any]:
    if failed:
        return {"state": "failed", "pending_pages": 0, "last_pass_at": None, "degraded": True}
    return {"state": "complete", "pending_pages": 0, "last_pass_at": None}


def mention_index_notice(cov: dict[str, Any]) -> Notice:
    return Notice(
        code="mention_index",
        kind="degraded",
        why=f"The pages linking to this entity could not all be read (coverage {cov['state']}): "
        "referenced_by may be incomplete.",
        user_message="Some pages that mention this entity may be missing from this answer.",
    )
