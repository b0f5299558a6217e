"""Fact detail: the fact with its provenance, state and TTL, its supersession chain and audit trail
(`trace_fact` for admins), and forget (write) / purge (admin, confirmed by typing the id). Replace,
restore and keep-this-one (write) are in `corrections`."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.responses import Response

from fleetmem.web.client import ToolFailed
from fleetmem.web.screens.tokens import step_up
from fleetmem.web.view import View, screen

#: Steps followed each way along `supersedes` / `superseded_by` without trace_fact.
MAX_CHAIN = 20


def _fact_id(view: View) -> str:
    return str(view.request.path_params.get("fact_id", "")).strip()


def _not_found(view: View, fact_id: str) -> Response:
    return view.not_found(
        f"No fact with id {fact_id[:120]!r} exists in this memory.",
        "Find the fact in Memories (search or the table) and open it from there.",
    )


async def _one(view: View, fact_id: str) -> dict[str, Any] | None:
    """The fact as `list_facts` shows it to this caller (any state), or None."""
    found = await view.call("list_facts", {"fact_id": fact_id})
    facts = found.get("facts") or []
    return facts[0] if facts else None


async def _chain(view: View, fact: dict[str, Any]) -> list[dict[str, Any]]:
    """Oldest to newest along supersedes / superseded_by, through the facts this caller may see."""
    seen = {fact["fact_id"]}
    back = await _follow(view, fact, "supersedes", seen)
    forward = await _follow(view, fact, "superseded_by", seen)
    return [*reversed(back), fact, *forward]


async def _follow(view: View, fact: dict[str, Any], link_field: str, seen: set[str]) -> list[dict[str, Any]]:
    """The facts met stepping from `fact` along `link_field` (at most `MAX_CHAIN`), stopping at one
    this caller may not see or one already in `seen` (which gains each fact met)."""
    met: list[dict[str, Any]] = []
    cur = fact
    while (link := cur.get(link_field)) and link not in seen and len(met) < MAX_CHAIN:
        nxt = await _one(view, link)
        if nxt is None:
            break
        seen.add(link)
        met.append(nxt)
        cur = nxt
    return met


async def _detail(
    view: View,
    *,
    status: int = 200,
    error: ToolFailed | None = None,
    reason: str = "",
    purge_reason: str = "",
    confirm_id: str = "",
    typed: dict[str, str] | None = None,
) -> Response:
    """The fact screen; `typed` keeps what was typed into the replace and restore forms."""
    fact_id = _fact_id(view)
    fact = await _one(view, fact_id) if fact_id else None
    if fact is None:
        return _not_found(view, fact_id)
    events: list[dict[str, Any]] | None = None
    trace_error = None
    if view.can("admin"):
        trace, trace_error = await view.attempt("trace_fact", {"id": fact_id})
        if trace is not None:
            # a remote caller sees world facts only: the chain keeps to those too
            chain = [f for f in trace.get("lineage") or [] if f.get("visibility") == "world"]
            shown = {f["fact_id"] for f in chain}
            events = [e for e in trace.get("events") or [] if e.get("fact_id") in shown]
    if events is None:
        chain = await _chain(view, fact)
    return view.render(
        "fact.html",
        status=status,
        title=f"Fact {fact_id}",
        fact=fact,
        chain=chain,
        events=events,
        trace_error=trace_error,
        error=error,
        reason=reason,
        purge_reason=purge_reason,
        confirm_id=confirm_id,
        typed={"fact": "", "reason": "", "restore_reason": "", **(typed or {})},
    )


@screen("/facts/{fact_id}")
async def fact_detail(view: View) -> Response:
    return await _detail(view)


@screen("/facts/{fact_id}/forget", methods=("POST",), scope="write")
async def forget_fact(view: View) -> Response:
    reason = view.field("reason").strip()
    if not reason:
        return await _detail(
            view,
            status=400,
            reason=reason,
            error=ToolFailed(
                "invalid_params",
                "Give a reason: it is kept in the fact's audit trail.",
                "Write why the fact is forgotten, then press Forget again.",
                status=400,
            ),
        )
    done, failed = await view.attempt("forget", {"id": _fact_id(view), "reason": reason})
    if failed is not None:
        if failed.code == "not_found":
            return _not_found(view, _fact_id(view))
        return await _detail(view, status=failed.status or 502, error=failed, reason=reason)
    outcome = "fact-forgotten" if done and done.get("expired") else "fact-inactive"
    return view.redirect(f"/facts/{quote(_fact_id(view), safe='')}", done=outcome)


@screen("/facts/{fact_id}/purge", methods=("POST",), scope="admin")
async def purge_fact(view: View) -> Response:
    fact_id = _fact_id(view)
    typed = view.field("confirm_id").strip()
    reason = view.field("reason").strip()
    if typed != fact_id:
        return await _detail(
            view,
            status=400,
            purge_reason=reason,
            confirm_id=typed,
            error=ToolFailed(
                "confirmation_required",
                "Type the fact's id exactly to confirm the purge; nothing was deleted.",
                f"Type {fact_id} in the confirmation box.",
                status=400,
            ),
        )
    refused = step_up(view)
    if refused is not None:
        return await _detail(view, status=403, purge_reason=reason, confirm_id=typed, error=refused)
    if await _one(view, fact_id) is None:
        return _not_found(view, fact_id)
    done, failed = await view.attempt("purge_fact", {"id": fact_id, "reason": reason or None})
    if failed is not None:
        if failed.code == "not_found":
            return _not_found(view, fact_id)
        return await _detail(view, status=failed.status or 502, error=failed, purge_reason=reason, confirm_id=typed)
    return view.redirect("/memories", done="fact-purged" if done and done.get("purged") else "fact-gone")
