"""Context preview: exactly what a session-start hook would inject for some entities and a budget.

The console calls `context_pack` as the hook does and renders the answer with the hook's own
function (`fleetmem.contract.session_context.injected_context`). What the budget cut is what an
unbudgeted pack of the same entities holds beyond the budgeted one.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from fleetmem.contract.session_context import injected_context
from fleetmem.web.client import ToolFailed
from fleetmem.web.view import View, screen

#: The hook's own start budget (hooks.claude_code.START_BUDGET_TOKENS), offered as the default.
DEFAULT_BUDGET = "2000"


def _budget(raw: str) -> Any:
    """The budget as typed: a whole number as one, anything else as the text (the server says why)."""
    text = raw.strip()
    try:
        return int(text)
    except ValueError:
        return text


@screen("/context")
async def context(view: View) -> Response:
    typed = view.field("entities")
    picked = view.fields("pick")
    budget_text = view.field("budget", DEFAULT_BUDGET)
    stats, _ = await view.attempt("memory_stats", {})
    busiest = [e["entity_slug"] for e in (stats or {}).get("busiest_entities") or []]
    names = [n.strip() for n in typed.split(",") if n.strip()]
    names += [p for p in picked if p not in names]
    result: dict[str, Any] = {"pack": None, "text": None, "cut_cards": [], "cut_facts": []}
    error: ToolFailed | None = None
    if names or "budget" in view.request.query_params:
        arguments = {"entities": ",".join(names), "budget_tokens": _budget(budget_text)}
        try:
            pack = await view.call("context_pack", arguments)
            full = await view.call("context_pack", {"entities": ",".join(names)})
        except ToolFailed as exc:
            error = exc
        else:
            kept_cards = {c["slug"] for c in pack.get("cards") or []}
            kept_facts = {f["fact_id"] for f in pack.get("facts") or []}
            result = {
                "pack": pack,
                "text": injected_context(pack),
                "cut_cards": [c for c in full.get("cards") or [] if c["slug"] not in kept_cards],
                "cut_facts": [f for f in full.get("facts") or [] if f["fact_id"] not in kept_facts],
            }
    return view.render(
        "context.html",
        status=error.status if error and 400 <= error.status < 500 else 200,
        title="Context preview",
        typed=typed,
        picked=picked,
        budget=budget_text,
        busiest=busiest,
        error=error,
        **result,
    )
