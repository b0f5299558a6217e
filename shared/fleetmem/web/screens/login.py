"""Sign in with a fleetmem token (or a one-time ticket from `fleetmem console`), and sign out."""

from __future__ import annotations

import secrets

from starlette.responses import RedirectResponse, Response

from fleetmem.web.client import ToolFailed
from fleetmem.web.sessions import ABSOLUTE, SIGN_IN_WINDOW
from fleetmem.web.view import View, screen


def _next(view: View) -> str:
    """Where to go after signing in: a console path only (never another site)."""
    target = view.field("next")
    if target.startswith(view.root + "/") and not target.startswith("//") and "\\" not in target:
        return target
    return view.root + "/"


def _login_form(view: View, *, status: int = 200, error: ToolFailed | None = None) -> Response:
    nonce = secrets.token_urlsafe(24)
    response = view.render(
        "login.html", status=status, title="Sign in", error=error, login_csrf=nonce, next=_next(view)
    )
    response.set_cookie(
        view.login_cookie,
        nonce,
        max_age=900,
        path=view.root,
        httponly=True,
        samesite="strict",
        secure=view.console.secure_cookie,
    )
    return response


def _too_many(view: View) -> Response:
    minutes = int(SIGN_IN_WINDOW.total_seconds() // 60)
    response = _login_form(
        view,
        status=429,
        error=ToolFailed(
            "rate_limited",
            "Too many sign-in attempts from this address: nothing was checked.",
            f"Wait {minutes} minute{'s' if minutes != 1 else ''}, then sign in again.",
            status=429,
        ),
    )
    response.headers["retry-after"] = str(int(SIGN_IN_WINDOW.total_seconds()))
    return response


async def _sign_in(view: View, token: str) -> Response:
    if not view.console.sign_ins.allow(view.request.client.host if view.request.client else ""):
        return _too_many(view)
    try:
        who = await view.console.client.call(token, "whoami", {})
    except ToolFailed as exc:
        if exc.status == 401:
            exc = ToolFailed(
                "unauthorized",
                "That token was not accepted: it is unknown, revoked or mistyped.",
                "Paste the whole token printed by `fleetmem token create` (it is shown only once).",
                status=401,
            )
        return _login_form(view, status=exc.status if 400 <= exc.status < 600 else 502, error=exc)
    session = view.console.sessions.open(token, who)
    response = RedirectResponse(_next(view), status_code=303)
    response.set_cookie(
        view.cookie,
        session.id,
        max_age=int(ABSOLUTE.total_seconds()),
        path=view.root,
        httponly=True,
        samesite="strict",
        secure=view.console.secure_cookie,
    )
    response.delete_cookie(view.login_cookie, path=view.root)
    return response


@screen("/login", methods=("GET", "POST"), public=True)
async def login(view: View) -> Response:
    if view.request.method == "GET":
        ticket = view.request.query_params.get("ticket")
        if ticket:
            token = view.console.sessions.redeem(ticket)
            if token is None:
                return _login_form(
                    view,
                    status=401,
                    error=ToolFailed(
                        "unauthorized",
                        "That sign-in link was already used or has expired.",
                        "Run `fleetmem console` again for a new link, or sign in with a token.",
                        status=401,
                    ),
                )
            return await _sign_in(view, token)
        return _login_form(view)
    token = view.field("token").strip()
    if not token:
        return _login_form(
            view,
            status=400,
            error=ToolFailed(
                "invalid_params",
                "Enter a token to sign in.",
                "Create one with `fleetmem token create --client NAME --scopes read` and paste it here.",
                status=400,
            ),
        )
    return await _sign_in(view, token)


@screen("/logout", methods=("POST",))
async def logout(view: View) -> Response:
    view.console.sessions.close(view.session.id if view.session else None)
    response = view.redirect("/login", done="signed-out")
    response.delete_cookie(view.cookie, path=view.root)
    return response
