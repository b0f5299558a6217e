"""What a console screen is: a handler over a `View` of one request, registered with `@screen`.

A handler reads and writes only through `view.call(tool, arguments)` (a tool over `/v1` with the
signed-in token) and answers with `view.render(template, ...)`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from markupsafe import Markup, escape
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from fleetmem.timefmt import parse_iso
from fleetmem.web.client import ToolClient, ToolFailed
from fleetmem.web.sessions import Session, Sessions, SignInLimiter, cookie_names

if TYPE_CHECKING:
    import jinja2


class Console(Protocol):
    """What a screen sees of the console (`fleetmem.web.app.Console` is one): declared here, below
    the app, so the screens and the app that registers them import no circle."""

    client: ToolClient
    root: str
    secure_cookie: bool
    sessions: Sessions
    sign_ins: SignInLimiter
    templates: jinja2.Environment


Handler = Callable[["View"], Awaitable[Response]]


@dataclass(frozen=True)
class Screen:
    path: str
    handler: Handler
    methods: tuple[str, ...] = ("GET",)
    #: The scope a caller needs to see the screen (others get a page saying so).
    scope: str = "read"
    public: bool = False


SCREENS: list[Screen] = []

#: The notices a redirect may ask for (`?done=<code>`): fixed text, never anything from the URL.
NOTICES = {
    "page-deleted": "The page was deleted.",
    "fact-forgotten": "Forgotten: the fact is no longer recalled; its audit trail keeps the reason.",
    "fact-inactive": "The fact was already inactive: nothing changed.",
    "fact-purged": "The fact was deleted for good. An audit row without its text records the purge.",
    "fact-gone": "The fact was already gone: nothing was deleted.",
    "fact-replaced": "Replaced: this is the new value; the fact it replaced stays in the history as superseded.",
    "fact-same-value": "The new value is what the fact already says: nothing changed.",
    "fact-restored": "Restored: the text is an active fact again and its withdrawal is lifted.",
    "fact-already-active": "The text is already active as this fact: nothing was saved.",
    "fact-saved": "Saved: the fact is in memory.",
    "fact-duplicate": "Memory already holds this fact: nothing new was saved.",
    "conflict-resolved": "Resolved: the value you kept replaced the others.",
    "conflict-gone": "That value is no longer in conflict (another change came first): nothing changed.",
    "token-revoked": "The token is revoked: calls with it are refused from now on.",
    "token-already-revoked": "The token was already revoked: nothing changed.",
    "token-shown": "A new token is shown only once, on the page right after it is created; it is not shown again.",
    "signed-out": "You are signed out.",
    "signed-out-refused": "You were signed out: the memory server no longer accepts the token this session "
    "used (it was revoked or has expired). Sign in with a valid token.",
}


def screen(path: str, *, methods: Sequence[str] = ("GET",), scope: str = "read", public: bool = False) -> Any:
    def register(handler: Handler) -> Handler:
        SCREENS.append(Screen(path, handler, tuple(methods), scope, public))
        return handler

    return register


#: how far from now a time is told relatively ("3 h ago", "in 2 d"); further, by its date
RELATIVE_WITHIN = timedelta(days=7)


def _relative(moment: datetime, now: datetime) -> str:
    gap = now - moment
    seconds = abs(gap.total_seconds())
    if seconds < 60:
        return "in under a minute" if gap < timedelta(0) else "just now"
    unit, size = next((u, s) for u, s in (("d", 86400), ("h", 3600), ("min", 60)) if seconds >= s)
    amount = int(seconds // size)
    return f"in {amount} {unit}" if gap < timedelta(0) else f"{amount} {unit} ago"


def when(value: Any, now: datetime | None = None) -> Markup | str:
    """A wire time as people read it: within a week of now, relatively ("just now", "5 min ago",
    "3 h ago", "in 2 d"), else its date ("6 Dec 2026"); the exact time (`6 Dec 2026, 09:30:12 UTC`)
    on hover (`title`) and the ISO value in `datetime`. A date alone stays a date; anything that is
    not a time is shown as it is."""
    if not value:
        return ""
    text = str(value)
    try:
        moment = parse_iso(text).astimezone(UTC)
    except ValueError:
        return text
    date = f"{moment.day} {moment:%b %Y}"
    if len(text) == 10:
        return Markup('<time datetime="{0}" title="{1}">{1}</time>').format(escape(text), date)
    exact = f"{date}, {moment:%H:%M:%S} UTC"
    now = now or datetime.now(UTC)
    shown = _relative(moment, now) if abs(now - moment) < RELATIVE_WITHIN else date
    return Markup('<time datetime="{0}" title="{1}">{2}</time>').format(escape(text), exact, shown)


@dataclass
class View:
    """One request to a screen: the session, the form (CSRF checked), and the tool client."""

    console: Console
    request: Request
    session: Session | None
    form: FormData | None = None
    notices: list[str] = field(default_factory=list)

    @property
    def root(self) -> str:
        return self.console.root

    @property
    def cookie(self) -> str:
        """The session cookie's name for this console's port."""
        return cookie_names(self.port)[0]

    @property
    def login_cookie(self) -> str:
        return cookie_names(self.port)[1]

    @property
    def port(self) -> int:
        url = self.request.url
        return url.port or (443 if url.scheme == "https" else 80)

    def can(self, scope: str) -> bool:
        return self.session is not None and self.session.can(scope)

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """A tool over `/v1` with this session's token: the body, or `ToolFailed`."""
        if self.session is None:
            raise ToolFailed("unauthorized", "Sign in first.", "Sign in with a fleetmem token.", status=401)
        return await self.console.client.call(self.session.token, tool, {k: v for k, v in (arguments or {}).items()})

    async def attempt(
        self, tool: str, arguments: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any] | None, ToolFailed | None]:
        """`call`, with a refusal returned instead of raised (a screen shows it beside what worked).
        A refused token (401) is still raised: it signs the session out, whatever the screen."""
        try:
            return await self.call(tool, arguments), None
        except ToolFailed as exc:
            if exc.status == 401:
                raise
            return None, exc

    def field(self, name: str, default: str = "") -> str:
        """A form field (POST) or query parameter (GET), as text."""
        if self.form is not None and name in self.form:
            value = self.form.get(name)
            return value if isinstance(value, str) else default
        return self.request.query_params.get(name, default)

    def fields(self, name: str) -> list[str]:
        source = self.form if self.form is not None else self.request.query_params
        return [v for v in source.getlist(name) if isinstance(v, str)]

    def render(self, template: str, *, status: int = 200, title: str = "", **context: Any) -> HTMLResponse:
        done = NOTICES.get(self.request.query_params.get("done", ""))
        if done and done not in self.notices:
            self.notices.append(done)
        html = self.console.templates.get_template(template).render(
            root=self.root,
            session=self.session,
            who=self.session.who if self.session else None,
            csrf=self.session.csrf if self.session else "",
            can=self.can,
            title=title,
            path=self.request.url.path,
            notices=self.notices,
            connected=self.console.client.label,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def not_found(self, message: str, suggestion: str) -> HTMLResponse:
        """The 404 page: `message` says what is missing, `suggestion` where to look instead."""
        error = ToolFailed("not_found", message, suggestion, status=404)
        return self.render("error.html", status=404, title="Not found", error=error)

    def failed(self, exc: ToolFailed, *, title: str = "Refused") -> HTMLResponse:
        """A whole page for a call that failed (a 401 signs the browser out)."""
        status = exc.status if 400 <= exc.status < 600 else 502
        return self.render("error.html", status=status, title=title, error=exc)

    def redirect(self, to: str, *, status: int = 303, done: str = "") -> RedirectResponse:
        """To a console path; `done` names the notice (a `NOTICES` code) the next page shows."""
        if done:
            assert done in NOTICES, done
            to += ("&" if "?" in to else "?") + f"done={done}"
        return RedirectResponse(f"{self.root}{to}", status_code=status)
