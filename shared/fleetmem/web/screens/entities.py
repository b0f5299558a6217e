"""The entity index (every entity page with its active facts and last change) and the entity: the
card `entity` returns, its facts newest first, open threads, its links drawn as a graph (the card's
edges: "out" the page's own links, "in" the backlinks) and listed as text, the attributes its active
facts give conflicting values (`fleetmem.web.conflicts`), and (write) a form that adds a fact about
it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.responses import Response

from fleetmem.timefmt import parse_iso
from fleetmem.web.client import ToolFailed
from fleetmem.web.conflicts import ASK, conflicts
from fleetmem.web.svg import neighbourhood
from fleetmem.web.view import View, screen

#: Facts shown on an entity's page (newest first); the memories screen pages through the rest.
FACTS_SHOWN = 50
#: Active facts read for the conflicts view (list_facts' largest page).
FACTS_CHECKED = 200
#: The kinds a fact added from the console may have (remember's `kind`).
KINDS = ("fact", "preference", "commitment", "belief", "event")


@screen("/entities/{slug:path}")
async def entity(view: View) -> Response:
    return await entity_page(view, str(view.request.path_params.get("slug", "")).strip())


async def entity_page(
    view: View,
    slug: str,
    *,
    status: int = 200,
    error: ToolFailed | None = None,
    add: dict[str, str] | None = None,
) -> Response:
    """The entity screen for `slug`; `error` (a refused correction) is shown at the top, `add` keeps
    what was typed into the add-a-fact form."""
    found: dict[str, Any] = await view.call("entity", {"name": slug}) if slug else {"found": False}
    if not found.get("found"):
        suggestions = found.get("suggestions") or []
        return view.render(
            "entity.html",
            status=404,
            title="Entity not found",
            slug=slug,
            card=None,
            suggestions=suggestions,
            error=ToolFailed(
                "not_found",
                f"No entity {slug!r} is known.",
                "Search the pages for the name, or pick one of the near misses below."
                if suggestions
                else "Search the pages for the name.",
                status=404,
            ),
        )
    card = found["card"]
    entity_slug = card["entity"]["slug"]
    facts, facts_error = await view.attempt("list_facts", {"entity": entity_slug, "limit": FACTS_CHECKED, **ASK})
    listed = (facts or {}).get("facts") or []
    edges = card.get("edges") or []
    graph = neighbourhood(
        entity_slug,
        [(e["slug"], e["type"], e["direction"]) for e in edges],
        href=f"{view.root}/entities/",
    )
    return view.render(
        "entity.html",
        status=status,
        title=card["entity"]["title"] or entity_slug,
        slug=slug,
        card=card,
        edges=edges,
        graph=graph,
        facts=listed[:FACTS_SHOWN],
        more_facts=len(listed) > FACTS_SHOWN or bool((facts or {}).get("next_cursor")),
        facts_error=facts_error,
        conflicts=conflicts(facts or {}),
        suggestions=found.get("suggestions") or [],
        error=error,
        add=add or {"fact": "", "kind": "fact", "note": ""},
        kinds=KINDS,
    )


#: Entities listed a screen at a time (`list_pages`).
INDEX_SIZE = 50
#: How the index may be sorted (within the entities shown): name, most facts, latest change.
INDEX_SORTS = ("name", "facts", "changed")


def _latest(*times: str | None) -> str:
    """The latest of some wire times (ISO 8601), or ""."""
    known = [t for t in times if t]
    return max(known, key=lambda t: parse_iso(t).astimezone(UTC)) if known else ""


@screen("/entities")
async def entity_index(view: View) -> Response:
    """Every entity page with its active facts and last change in one read (`list_pages` with
    `with_counts`, a type filter, `next_cursor`): the last change is the page's update or its
    facts' latest change, whichever is later; sortable within the entities shown."""
    kind, cursor = view.field("type").strip(), view.field("cursor").strip()
    sort = view.field("sort", "name").strip()
    sort = sort if sort in INDEX_SORTS else "name"
    arguments: dict[str, Any] = {
        "limit": INDEX_SIZE,
        "with_counts": True,
        **({"type": kind} if kind else {}),
        **({"cursor": cursor} if cursor else {}),
    }
    listing, error = await view.attempt("list_pages", arguments)
    rows = [
        {**page, "changed": _latest(page.get("updated_at"), page.get("facts_changed_at"))}
        for page in (listing or {}).get("pages") or []
    ]
    if sort == "facts":
        rows.sort(key=lambda r: -(r["facts"] or 0))
    elif sort == "changed":
        rows.sort(key=lambda r: parse_iso(r["changed"]).astimezone(UTC) if r["changed"] else _EPOCH, reverse=True)
    else:
        rows.sort(key=lambda r: (str(r.get("title") or r["slug"]).casefold(), r["slug"]))
    return view.render(
        "entities.html",
        title="Entities",
        rows=rows,
        type=kind,
        cursor=cursor,
        sort=sort,
        sorts=INDEX_SORTS,
        next_cursor=(listing or {}).get("next_cursor"),
        error=error,
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
