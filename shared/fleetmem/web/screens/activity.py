"""Activity: who wrote what (`list_activity`): the tenant's fact events newest first — writes,
supersessions, forgets and purges — per client, filtered like Memories (entity, since/until), with
a chart of the newest matching events per day and a count per client."""

from __future__ import annotations

from collections import Counter
from datetime import date, timedelta
from typing import Any
from urllib.parse import urlencode

from starlette.responses import Response

from fleetmem.web.client import ToolFailed
from fleetmem.web.svg import bar_chart
from fleetmem.web.view import View, screen

#: The form's filters: the form field and the `list_activity` argument it fills.
FILTERS = (
    ("client", "client_id"),
    ("action", "action"),
    ("entity", "entity"),
    ("since", "since"),
    ("until", "until"),
    ("limit", "limit"),
)
#: list_activity's actions and how the screen names them.
ACTIONS = {"write": "wrote", "supersede": "superseded", "expire": "forgot", "purge": "purged"}
PAGE_SIZES = ("25", "50", "100", "200")
#: The chart and the per-client counts cover at most this many of the newest matching events.
CHART_EVENTS = 200


def _arguments(filters: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {arg: filters[name] for name, arg in FILTERS if filters[name]}
    if "limit" in out:
        out["limit"] = int(out["limit"]) if out["limit"].isdigit() else out["limit"]
    return out


def _per_day(events: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """Events per UTC day, oldest day first, every day between the first and the last (60 at most)."""
    days = Counter(str(e.get("at") or "")[:10] for e in events if e.get("at"))
    if not days:
        return []
    first, last = date.fromisoformat(min(days)), date.fromisoformat(max(days))
    span = [first + timedelta(days=i) for i in range((last - first).days + 1)][-60:]
    return [(d.isoformat(), days.get(d.isoformat(), 0)) for d in span]


def _per_client(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each client's count per action among `events`, the busiest client first."""
    counts: dict[str, Counter[str]] = {}
    for e in events:
        counts.setdefault(str(e.get("actor") or ""), Counter())[str(e.get("action") or "")] += 1
    rows = [{"client": c, "total": sum(n.values()), **{a: n.get(a, 0) for a in ACTIONS}} for c, n in counts.items()]
    return sorted(rows, key=lambda r: (-r["total"], r["client"]))


@screen("/activity")
async def activity(view: View) -> Response:
    filters = {name: view.field(name).strip() for name, _ in FILTERS}
    cursor = view.field("cursor").strip()
    arguments = _arguments(filters)
    listing, error = await view.attempt("list_activity", {**arguments, **({"cursor": cursor} if cursor else {})})
    recent: dict[str, Any] | None = None
    if error is None:
        recent, _ = await view.attempt("list_activity", {**arguments, "limit": CHART_EVENTS})
    newest = (recent or {}).get("events") or []
    label = f"Events per day: the newest {len(newest)} matching event{'' if len(newest) == 1 else 's'}"
    following = (listing or {}).get("next_cursor")
    kept = {k: v for k, v in filters.items() if v}
    return view.render(
        "activity.html",
        status=_status(error),
        title="Activity",
        filters=filters,
        actions=ACTIONS,
        page_sizes=PAGE_SIZES,
        events=(listing or {}).get("events") or [],
        chart=bar_chart(_per_day(newest), label=label) if newest else None,
        chart_label=label,
        chart_more=bool((recent or {}).get("next_cursor")),
        clients=_per_client(newest),
        next_href=f"{view.root}/activity?{urlencode({**kept, 'cursor': following})}" if following else None,
        first_href=f"{view.root}/activity?{urlencode(kept)}" if cursor else None,
        error=error,
    )


def _status(error: ToolFailed | None) -> int:
    if error is None:
        return 200
    return error.status if 400 <= error.status < 500 else 502
