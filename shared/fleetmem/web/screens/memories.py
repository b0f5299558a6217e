"""Memories: the facts table (`list_facts`, filtered, a page at a time), search (`recall`), and
forgetting a selection of facts with a dry run first."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.responses import Response

from fleetmem.timefmt import parse_iso
from fleetmem.web.client import ToolFailed
from fleetmem.web.view import View, screen

#: The table's filters: the form field and the `list_facts` argument it fills.
FILTERS = (
    ("entity", "entity"),
    ("kind", "kind"),
    ("state", "state"),
    ("session", "session_id"),
    ("client", "client_id"),
    ("provenance", "provenance"),
    ("after", "created_after"),
    ("before", "created_before"),
    ("limit", "limit"),
)
PAGE_SIZES = ("25", "50", "100", "200")
KINDS = ("fact", "event", "preference", "commitment", "belief")
STATES = ("active", "superseded", "forgotten", "expired", "any")
#: Facts forgotten in one go at most.
MAX_SELECTED = 200
#: What each evidence label of a page hit means (recall's `evidence`).
EVIDENCE = {
    "alias_hit": "the query names one of the page's aliases",
    "exact_title_match": "the query is the page's title",
    "high_vector_match": "close in meaning to the query",
    "keyword_exact": "the query's words appear in the page",
    "weak_semantic": "only loosely related in meaning",
}


def _filters(view: View) -> dict[str, str]:
    return {name: view.field(name).strip() for name, _ in FILTERS}


def _arguments(filters: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {arg: filters[name] for name, arg in FILTERS if filters[name]}
    if "limit" in out:
        out["limit"] = int(out["limit"]) if out["limit"].isdigit() else out["limit"]
    return out


def _recall_arguments(query: str, filters: dict[str, str]) -> dict[str, Any]:
    """recall narrows by one of entity, session or a start time; `_kept` applies the rest."""
    out: dict[str, Any] = {"query": query, "limit": 20}
    if filters["entity"]:
        out["entity"] = filters["entity"]
    elif filters["session"]:
        out["session_id"] = filters["session"]
    elif filters["after"]:
        out["since"] = filters["after"]
    if (filters["state"] or "active") != "active":
        out["include_expired"] = True
    return out


def _kept(fact: dict[str, Any], filters: dict[str, str]) -> bool:
    """Whether a fact recall found passes every filter of the form (recall itself resolves the entity,
    which always goes to it)."""
    state = filters["state"] or "active"
    when = str(fact.get("created_at") or "")
    checks = (
        not filters["kind"] or fact.get("kind") == filters["kind"],
        state == "any" or (fact.get("status") or "active") == state,
        not filters["session"] or fact.get("session_id") == filters["session"],
        not filters["provenance"] or filters["provenance"].lower() in str(fact.get("provenance") or "").lower(),
        not filters["after"] or _after(when, filters["after"]),
        not filters["before"] or _after(filters["before"], when),
    )
    return all(checks)


def _after(a: str, b: str) -> bool:
    try:
        return parse_iso(a) > parse_iso(b)
    except ValueError:
        return True  # list_facts, beside, says why the date is refused


@screen("/memories")
async def memories(view: View) -> Response:
    filters = _filters(view)
    query = view.field("q").strip()
    cursor = view.field("cursor").strip()
    listing, error = await view.attempt("list_facts", {**_arguments(filters), **({"cursor": cursor} if cursor else {})})
    found, search_error = (await view.attempt("recall", _recall_arguments(query, filters))) if query else (None, None)
    if found is not None:
        found = {**found, "facts": [f for f in found.get("facts") or [] if _kept(f, filters)]}
    following = (listing or {}).get("next_cursor")
    kept = {k: v for k, v in filters.items() if v}
    return view.render(
        "memories.html",
        status=_status(error or search_error),
        title="Memories",
        filters=filters,
        kinds=KINDS,
        states=STATES,
        page_sizes=PAGE_SIZES,
        query=query,
        facts=(listing or {}).get("facts") or [],
        next_href=f"{view.root}/memories?{urlencode({**kept, 'cursor': following})}" if following else None,
        first_href=f"{view.root}/memories?{urlencode(kept)}" if cursor else None,
        found=found,
        evidence=EVIDENCE,
        error=error,
        search_error=search_error,
    )


def _status(error: ToolFailed | None) -> int:
    if error is None:
        return 200
    return error.status if 400 <= error.status < 500 else 502


@screen("/memories/forget", methods=("POST",), scope="write")
async def forget_selected(view: View) -> Response:
    """First post: what would be forgotten (nothing changes). With `confirm`: forget each fact."""
    selected = list(dict.fromkeys(i.strip() for i in view.fields("fact") if i.strip()))[:MAX_SELECTED]
    reason = view.field("reason").strip()
    if not selected:
        return view.render(
            "forget.html",
            status=400,
            title="Forget facts",
            rows=[],
            reason=reason,
            done=False,
            error=ToolFailed(
                "invalid_params",
                "No fact was selected.",
                "Tick the facts to forget in the table, then press Forget selected.",
                status=400,
            ),
        )
    confirm = view.field("confirm") == "yes"
    if confirm and not reason:
        confirm = False
        error: ToolFailed | None = ToolFailed(
            "invalid_params",
            "Give a reason: it is kept in each fact's audit trail.",
            "Write why these facts are forgotten, then confirm again.",
            status=400,
        )
    else:
        error = None
    rows = []
    for fact_id in selected:
        listed, failed = await view.attempt("list_facts", {"fact_id": fact_id})
        fact = ((listed or {}).get("facts") or [None])[0]
        if confirm:
            done, refused = await view.attempt("forget", {"id": fact_id, "reason": reason})
            if refused is not None:
                missing = refused.code == "not_found"
                outcome = "not found: nothing to forget" if missing else f"refused: {refused.message}"
            elif done and done.get("expired"):
                outcome = "forgotten"
            else:
                outcome = "already inactive: nothing changed"
            rows.append({"fact_id": fact_id, "fact": fact, "outcome": outcome})
            continue
        if failed is not None:
            outcome = f"cannot check: {failed.message}"
        elif fact is None:
            outcome = "not found: nothing to forget"
        elif fact.get("status") == "active":
            outcome = "will be forgotten"
        else:
            outcome = f"already {fact.get('status')}: nothing will change"
        rows.append({"fact_id": fact_id, "fact": fact, "outcome": outcome})
    if confirm and view.session is not None:
        # post/redirect/get: a reload shows the report again and forgets nothing twice
        view.session.flash["forgotten"] = {"rows": rows, "reason": reason}
        return view.redirect("/memories/forgotten")
    return view.render(
        "forget.html",
        status=400 if error else 200,
        title="Forget facts",
        rows=rows,
        reason=reason,
        done=False,
        error=error,
    )


@screen("/memories/forgotten", scope="write")
async def forgotten(view: View) -> Response:
    """The report of the last confirmed forget (each fact, its result and the reason given)."""
    report = view.session.flash.get("forgotten") if view.session else None
    if report is None:
        return view.redirect("/memories")
    return view.render(
        "forget.html", title="Forget facts", rows=report["rows"], reason=report["reason"], done=True, error=None
    )
