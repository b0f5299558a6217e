"""Entity: the card `entity` returns, its facts newest first, open threads, and its links drawn as a
graph (the card's edges: "out" the page's own links, "in" the backlinks) and listed as text."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from fleetmem.web.client import ToolFailed
from fleetmem.web.svg import neighbourhood
from fleetmem.web.view import View, screen

#: Facts shown on an entity's page (newest first); the memories screen pages through the rest.
FACTS_SHOWN = 50


@screen("/entities/{slug:path}")
async def entity(view: View) -> Response:
    slug = str(view.request.path_params.get("slug", "")).strip()
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
    facts, facts_error = await view.attempt("list_facts", {"entity": entity_slug, "limit": FACTS_SHOWN})
    edges = card.get("edges") or []
    graph = neighbourhood(
        entity_slug,
        [(e["slug"], e["type"], e["direction"]) for e in edges],
        href=f"{view.root}/entities/",
    )
    return view.render(
        "entity.html",
        title=card["entity"]["title"] or entity_slug,
        slug=slug,
        card=card,
        edges=edges,
        graph=graph,
        facts=(facts or {}).get("facts") or [],
        more_facts=bool((facts or {}).get("next_cursor")),
        facts_error=facts_error,
        suggestions=found.get("suggestions") or [],
        error=None,
    )
