"""Correcting memory from the console (write scope), every change a `remember` over `/v1`:

- **Replace** a fact: the new value with `replaces` = the fact, provenance "console: <client>;
  reason: <why>" (remember takes no reason field: the provenance carries it into the fact and its
  audit events);
- **Restore** a forgotten fact: its text again with `restore_withdrawn: true` (D23);
- **Keep this one** of an entity's conflicting values: the kept text replaces each other value;
- **Add** a fact about an entity.

Each answers with a redirect to the fact it leads to; a refusal re-renders the screen it came from
with the server's message and what was typed.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.responses import Response

from fleetmem.web.client import ToolFailed
from fleetmem.web.conflicts import ASK, conflicts
from fleetmem.web.screens.entities import FACTS_CHECKED, KINDS, entity_page
from fleetmem.web.screens.facts import _detail, _fact_id, _not_found, _one
from fleetmem.web.view import View, screen

#: Longest reason or note kept in a provenance (remember takes at most 500 characters).
MAX_REASON = 400


def provenance(view: View, *parts: str) -> str:
    """ "console: <client id of the signed-in token>" and the parts given, "; "-separated."""
    who = str((view.session.who if view.session else {}).get("client_id") or "unknown")
    return "; ".join([f"console: {who}", *(p for p in parts if p)])


def _same_entity(fact: dict[str, Any]) -> dict[str, Any]:
    """remember's arguments that keep a new fact where `fact` is: its kind, visibility and entity
    (an unattributed fact stays unattributed)."""
    args: dict[str, Any] = {"kind": fact["kind"], "visibility": fact.get("visibility") or "world"}
    if fact.get("entity_slug"):
        args["entity"] = fact["entity_slug"]
    else:
        args["infer_entity"] = False
    return args


def _fact_url(fact_id: str) -> str:
    return f"/facts/{quote(fact_id, safe='')}"


def _missing(what: str, next_step: str) -> ToolFailed:
    return ToolFailed("invalid_params", what, next_step, status=400)


@screen("/facts/{fact_id}/replace", methods=("POST",), scope="write")
async def replace_fact(view: View) -> Response:
    fact_id = _fact_id(view)
    text, reason = view.field("fact").strip(), view.field("reason").strip()[:MAX_REASON]
    typed = {"fact": text, "reason": reason}
    if not text or not reason:
        return await _detail(
            view,
            status=400,
            typed=typed,
            error=_missing(
                "Give the new value and why it changed: the reason is kept with the new fact.",
                "Fill in both boxes of the Replace form, then press Replace again.",
            ),
        )
    fact = await _one(view, fact_id)
    if fact is None:
        return _not_found(view, fact_id)
    args = {"fact": text, "provenance": provenance(view, f"reason: {reason}"), "replaces": fact_id}
    done, failed = await view.attempt("remember", {**args, **_same_entity(fact)})
    if failed is not None:
        if failed.code == "not_found":
            return _not_found(view, fact_id)
        return await _detail(view, status=failed.status or 502, error=failed, typed=typed)
    if done and done.get("status") == "superseded":
        return view.redirect(_fact_url(str(done["id"])), done="fact-replaced")
    return view.redirect(_fact_url(str((done or {}).get("id") or fact_id)), done="fact-same-value")


@screen("/facts/{fact_id}/restore", methods=("POST",), scope="write")
async def restore_fact(view: View) -> Response:
    fact_id = _fact_id(view)
    reason = view.field("restore_reason").strip()[:MAX_REASON]
    fact = await _one(view, fact_id)
    if fact is None:
        return _not_found(view, fact_id)
    if fact.get("status") != "forgotten":
        return await _detail(
            view,
            status=409,
            typed={"restore_reason": reason},
            error=ToolFailed(
                "conflict",
                f"Only a forgotten fact can be restored; this one is {fact.get('status')}. Nothing was changed.",
                "Reload the page to see the fact's current state.",
                status=409,
            ),
        )
    args = {
        "fact": fact["fact"],
        "provenance": provenance(view, f"restored {fact_id}", f"reason: {reason}" if reason else ""),
        "restore_withdrawn": True,
    }
    done, failed = await view.attempt("remember", {**args, **_same_entity(fact)})
    if failed is not None:
        return await _detail(view, status=failed.status or 502, error=failed, typed={"restore_reason": reason})
    notice = "fact-restored" if done and done.get("status") != "duplicate" else "fact-already-active"
    return view.redirect(_fact_url(str((done or {}).get("id") or fact_id)), done=notice)


@screen("/facts/{fact_id}/keep", methods=("POST",), scope="write")
async def keep_fact(view: View) -> Response:
    """Keep one of an entity's conflicting values: the kept text replaces every other value, oldest
    first. Replacing a value NEWER than the kept fact is refused (`replaces_duplicate`: the kept text
    is already active as an older fact) until a replacement has restated the kept text; such a value
    is forgotten instead, as that refusal's fix says."""
    fact_id = _fact_id(view)
    kept = await _one(view, fact_id)
    if kept is None:
        return _not_found(view, fact_id)
    slug = str(kept.get("entity_slug") or "")
    listed = await view.call("list_facts", {"entity": slug, "limit": FACTS_CHECKED, **ASK}) if slug else {}
    group = next((c.facts for c in conflicts(listed) if kept in c.facts), None)
    if kept.get("status") != "active" or group is None:
        return view.redirect(_fact_url(fact_id), done="conflict-gone")
    others = sorted((f for f in group if f["fact_id"] != fact_id), key=lambda f: (f["created_at"], f["id"]))
    note = f"kept the value of {fact_id} over conflicting values"
    for other in others:
        args = {"fact": kept["fact"], "provenance": provenance(view, note), "replaces": other["fact_id"]}
        _, failed = await view.attempt("remember", {**args, **_same_entity(kept)})
        if failed is not None and failed.message.startswith("replaces_duplicate"):
            _, failed = await view.attempt("forget", {"id": other["fact_id"], "reason": provenance(view, note)})
        if failed is not None:
            return await entity_page(view, slug, status=failed.status or 502, error=failed)
    return view.redirect(f"/entities/{quote(slug, safe='/')}", done="conflict-resolved")


@screen("/facts", methods=("POST",), scope="write")
async def add_fact(view: View) -> Response:
    slug = view.field("entity").strip()
    text, note = view.field("fact").strip(), view.field("note").strip()[:MAX_REASON]
    kind = view.field("kind", "fact").strip()
    typed = {"fact": text, "kind": kind if kind in KINDS else "fact", "note": note}
    if not text:
        return await entity_page(
            view,
            slug,
            status=400,
            add=typed,
            error=_missing("Write the fact to add.", "Type one self-contained sentence, then press Add the fact."),
        )
    args = {"fact": text, "entity": slug, "kind": kind, "provenance": provenance(view, note)}
    done, failed = await view.attempt("remember", args)
    if failed is not None:
        return await entity_page(view, slug, status=failed.status or 502, error=failed, add=typed)
    notice = "fact-duplicate" if done and done.get("status") == "duplicate" else "fact-saved"
    return view.redirect(_fact_url(str((done or {}).get("id"))), done=notice)
