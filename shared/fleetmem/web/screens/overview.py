"""Overview: facts by state, pages, entities, writes per day, the busiest entities, followers, search."""

from __future__ import annotations

from starlette.responses import Response

from fleetmem.web.svg import bar_chart
from fleetmem.web.view import View, screen


@screen("/")
async def overview(view: View) -> Response:
    stats = await view.call("memory_stats", {})
    days = stats.get("writes_per_day") or []
    chart = bar_chart(
        [(d["date"], int(d.get("facts", 0)) + int(d.get("pages", 0))) for d in days],
        label="Writes per day (facts and pages), last 30 days",
    )
    return view.render("overview.html", title="Overview", stats=stats, chart=chart, days=days)
