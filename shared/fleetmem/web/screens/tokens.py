"""Tokens (admin): this tenant's tokens (`list_tokens`), minting one (`create_token`, shown once on
the answer page and never again) and revoking one (`revoke_token`, after a confirmation step)."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from fleetmem.web.client import ToolFailed
from fleetmem.web.view import View, screen

SCOPES = ("read", "write", "admin")


async def _page(
    view: View, *, status: int = 200, error: ToolFailed | None = None, client: str = "",
    scopes: list[str] | None = None,
) -> Response:
    listed, list_error = await view.attempt("list_tokens", {})
    return view.render(
        "tokens.html", status=status, title="Tokens", tokens=(listed or {}).get("tokens") or [],
        list_error=list_error, error=error, client=client, chosen=scopes if scopes is not None else ["read"],
        scopes=SCOPES, mine=sorted((view.session.scopes if view.session else frozenset()), key=SCOPES.index),
    )


@screen("/tokens", scope="admin")
async def tokens(view: View) -> Response:
    return await _page(view)


@screen("/tokens/create", methods=("POST",), scope="admin")
async def create(view: View) -> Response:
    client = view.field("client")
    scopes = [s for s in view.fields("scope") if s]
    made, failed = await view.attempt("create_token", {"client": client.strip(), "scopes": scopes})
    if failed is not None:
        return await _page(view, status=failed.status if 400 <= failed.status < 500 else 502, error=failed,
                           client=client, scopes=scopes)
    assert made is not None
    return view.render("token_created.html", title="Token created", made=made)


@screen("/tokens/revoke", methods=("POST",), scope="admin")
async def revoke(view: View) -> Response:
    token_id = view.field("token_id").strip()
    listed = await view.call("list_tokens", {})
    target: dict[str, Any] | None = next(
        (t for t in listed.get("tokens") or [] if t.get("token_id") == token_id), None
    )
    if view.field("confirm") != "yes":
        if target is None:
            return await _page(view, status=404, error=ToolFailed(
                "not_found", "No token with that id in this tenant.", "Pick a token from the list.", status=404))
        return view.render("token_revoke.html", title="Revoke a token", token=target)
    done, failed = await view.attempt("revoke_token", {"token_id": token_id})
    if failed is not None:
        return await _page(view, status=failed.status if 400 <= failed.status < 500 else 502, error=failed)
    view.notices.append(
        f"Token {token_id} is revoked: calls with it are refused from now on."
        if done and done.get("revoked") else f"Token {token_id} was already revoked: nothing changed."
    )
    return await _page(view)
