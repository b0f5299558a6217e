"""Tokens (admin): this tenant's tokens (`list_tokens`), minting one (`create_token`, shown once on
the page the post redirects to, and never again) and revoking one (`revoke_token`, after a
confirmation step). Both ask for the signed-in token again (`step_up`): a stolen session cookie alone
cannot mint or revoke."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from fleetmem.web.client import ToolFailed
from fleetmem.web.view import View, screen

SCOPES = ("read", "write", "admin")
#: The form field in which a person types the token they signed in with, to confirm a dangerous act.
STEP_UP_FIELD = "confirm_token"


def step_up(view: View) -> ToolFailed | None:
    """None when the form carries this session's own token; the refusal to show otherwise."""
    if view.session is not None and view.session.token_ok(view.field(STEP_UP_FIELD)):
        return None
    return ToolFailed(
        "step_up_required",
        "To confirm, type the token you signed in with: the one typed is missing or is not it. Nothing was changed.",
        "Paste the token you signed in with into the confirmation box, then submit again.",
        status=403,
    )


async def _page(
    view: View,
    *,
    status: int = 200,
    error: ToolFailed | None = None,
    client: str = "",
    scopes: list[str] | None = None,
) -> Response:
    listed, list_error = await view.attempt("list_tokens", {})
    rows = (listed or {}).get("tokens") or []
    return view.render(
        "tokens.html",
        status=status,
        title="Tokens",
        tokens=rows,
        clients=last_calls(rows),
        list_error=list_error,
        error=error,
        client=client,
        chosen=scopes if scopes is not None else ["read"],
        scopes=SCOPES,
        mine=sorted((view.session.scopes if view.session else frozenset()), key=SCOPES.index),
    )


def last_calls(tokens: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each client of the tokens: how many tokens it holds and its last call (its tokens' latest
    `last_used_at`), the most recent first, never-used clients last."""
    out: dict[str, dict[str, Any]] = {}
    for t in tokens:
        row = out.setdefault(t["client_id"], {"client_id": t["client_id"], "tokens": 0, "last_call": None})
        row["tokens"] += 1
        used = t.get("last_used_at")
        if used and (row["last_call"] is None or used > row["last_call"]):
            row["last_call"] = used
    used = sorted((r for r in out.values() if r["last_call"]), key=lambda r: r["last_call"], reverse=True)
    return used + sorted((r for r in out.values() if not r["last_call"]), key=lambda r: r["client_id"])


@screen("/tokens", scope="admin")
async def tokens(view: View) -> Response:
    return await _page(view)


@screen("/tokens/create", methods=("POST",), scope="admin")
async def create(view: View) -> Response:
    client = view.field("client")
    scopes = [s for s in view.fields("scope") if s]
    refused = step_up(view)
    if refused is not None:
        return await _page(view, status=403, error=refused, client=client, scopes=scopes)
    made, failed = await view.attempt("create_token", {"client": client.strip(), "scopes": scopes})
    if failed is not None:
        return await _page(
            view,
            status=failed.status if 400 <= failed.status < 500 else 502,
            error=failed,
            client=client,
            scopes=scopes,
        )
    assert made is not None and view.session is not None
    view.session.flash["token"] = made
    return view.redirect("/tokens/created")


@screen("/tokens/created", scope="admin")
async def created(view: View) -> Response:
    """The token just created, once: a reload finds it gone and creates nothing."""
    made = view.session.flash.pop("token", None) if view.session else None
    if made is None:
        return view.redirect("/tokens", done="token-shown")
    return view.render("token_created.html", title="Token created", made=made)


@screen("/tokens/revoke", methods=("POST",), scope="admin")
async def revoke(view: View) -> Response:
    token_id = view.field("token_id").strip()
    listed = await view.call("list_tokens", {})
    target: dict[str, Any] | None = next((t for t in listed.get("tokens") or [] if t.get("token_id") == token_id), None)
    if view.field("confirm") != "yes":
        if target is None:
            return await _page(
                view,
                status=404,
                error=ToolFailed(
                    "not_found", "No token with that id in this tenant.", "Pick a token from the list.", status=404
                ),
            )
        return view.render("token_revoke.html", title="Revoke a token", token=target, error=None)
    refused = step_up(view)
    if refused is not None:
        if target is None:
            return await _page(view, status=403, error=refused)
        return view.render("token_revoke.html", status=403, title="Revoke a token", token=target, error=refused)
    done, failed = await view.attempt("revoke_token", {"token_id": token_id})
    if failed is not None:
        return await _page(view, status=failed.status if 400 <= failed.status < 500 else 502, error=failed)
    return view.redirect("/tokens", done="token-revoked" if done and done.get("revoked") else "token-already-revoked")
