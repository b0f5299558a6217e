"""The console's Starlette app: sessions, CSRF, the security headers, and one way to render a screen.

Every screen is a handler `async def screen(view: View) -> Response` registered with `@screen(path)`
in a module of `fleetmem.web.screens`. A handler reads and writes only through `view.call(tool,
arguments)` — a tool over `/v1` with the signed-in token — and answers with `view.render(template,
...)`. Templates are Jinja2 with autoescaping on, so whatever a fact, title, slug, alias or
provenance holds is shown as text; no page runs any script, and the Content-Security-Policy says so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import fleetmem.web.screens  # noqa: F401  (registers every screen)
from fleetmem.contract.routes import CONSOLE_PATH
from fleetmem.web.client import ToolClient, ToolFailed
from fleetmem.web.sessions import Sessions, SignInLimiter, cookie_names
from fleetmem.web.view import SCREENS, Screen, View, when

HERE = Path(__file__).parent
#: No script, no frame, no foreign origin: stored markup in memory cannot run or leak.
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    # same-origin: form posts carry their true Origin (with no-referrer a browser sends "null")
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
}
#: The largest form the console accepts (a page body edit is the biggest).
MAX_FORM_BYTES = 1_000_000


class Console:
    """The console over one tool client: the Starlette app and what its screens share."""

    def __init__(self, client: ToolClient, *, root: str = CONSOLE_PATH, secure_cookie: bool = False) -> None:
        self.client = client
        self.root = root
        self.secure_cookie = secure_cookie
        self.sessions = Sessions()
        self.sign_ins = SignInLimiter()
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters["q"] = lambda s: quote(str(s), safe="")
        self.templates.filters["when"] = when

    def routes(self) -> list[BaseRoute]:
        routes: list[BaseRoute] = [Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static")]
        for s in SCREENS:
            routes.append(Route(s.path, self._endpoint(s), methods=list(s.methods)))
        return routes

    def app(self) -> ASGIApp:
        return SecurityHeaders(Starlette(routes=self.routes(), exception_handlers={404: self._not_found}))

    def _session(self, request: Request) -> Any:
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        return self.sessions.get(request.cookies.get(cookie_names(port)[0]))

    async def _not_found(self, request: Request, exc: Exception) -> Response:
        view = View(self, request, self._session(request))
        return view.not_found(
            f"The console has no page at {request.url.path[:200]}.", "Use the links at the top of the page."
        )

    def _endpoint(self, s: Screen) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            session = self._session(request)
            view = View(self, request, session)
            if request.method == "POST":
                refused = await self._read_form(view)
                if refused is not None:
                    return refused
            if not s.public and session is None:
                back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"{self.root}/login?next={quote(back, safe='')}", status_code=303)
            if not s.public and not view.can(s.scope):
                return view.render(
                    "error.html",
                    status=403,
                    title="Not allowed",
                    error=ToolFailed(
                        "scope_denied",
                        f"This screen needs the {s.scope} scope; the token you signed in with does not have it.",
                        f"Sign in with a token that has the {s.scope} scope.",
                        status=403,
                    ),
                )
            try:
                return await s.handler(view)
            except ToolFailed as exc:
                if exc.status == 401 and session is not None:
                    # the token was revoked or expired meanwhile: sign the browser out, saying why
                    self.sessions.close(session.id)
                    response = view.redirect("/login", done="signed-out-refused")
                    response.delete_cookie(view.cookie, path=self.root)
                    return response
                return view.failed(exc)

        return endpoint

    async def _read_form(self, view: View) -> Response | None:
        """The posted form, after the same-origin and CSRF checks (a refusal page otherwise)."""
        request = view.request
        origin = request.headers.get("origin")
        if origin and _origin(origin) != _origin(str(request.base_url)):
            return _forbidden(view, "The form came from another site.")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
            return _forbidden(view, f"The form is larger than {MAX_FORM_BYTES} bytes.", status=413)
        view.form = await request.form()
        presented = view.form.get("csrf")
        if view.session is not None:
            if not view.session.csrf_ok(presented if isinstance(presented, str) else None):
                return _forbidden(view, "The form's security token is missing or stale.")
        elif presented != request.cookies.get(view.login_cookie) or not presented:
            return _forbidden(view, "The sign-in form's security token is missing or stale.")
        return None


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _forbidden(view: View, why: str, *, status: int = 403) -> HTMLResponse:
    return view.render(
        "error.html",
        status=status,
        title="Refused",
        error=ToolFailed(
            "forbidden",
            f"{why} Nothing was changed.",
            "Go back, reload the page and submit the form again.",
            status=status,
        ),
    )


class SecurityHeaders:
    """Adds `SECURITY_HEADERS` to every answer of the console."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.decode().lower() not in SECURITY_HEADERS]
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def console_routes(client_for: Callable[[], ToolClient], *, secure_cookie: bool = False) -> list[BaseRoute]:
    """The `/console` mount for `fleetmem serve`: `client_for` gives the in-process client once the
    app that serves `/v1` exists."""
    holder: dict[str, ASGIApp] = {}

    async def lazy(scope: Scope, receive: Receive, send: Send) -> None:
        if "app" not in holder:
            holder["app"] = Console(client_for(), secure_cookie=secure_cookie).app()
        await holder["app"](scope, receive, send)

    return [Mount(CONSOLE_PATH, app=lazy)]
