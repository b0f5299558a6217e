"""What a console screen is: a handler over a `View` of one request, registered with `@screen`.

A handler reads and writes only through `view.call(tool, arguments)` (a tool over `/v1` with the
signed-in token) and answers with `view.render(template, ...)`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from fleetmem.web.client import ToolFailed
from fleetmem.web.sessions import Session

if TYPE_CHECKING:
    from fleetmem.web.app import Console

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


def screen(path: str, *, methods: Sequence[str] = ("GET",), scope: str = "read", public: bool = False) -> Any:
    def register(handler: Handler) -> Handler:
        SCREENS.append(Screen(path, handler, tuple(methods), scope, public))
        return handler

    return register


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
        """`call`, with a refusal returned instead of raised (a screen shows it beside what worked)."""
        try:
            return await self.call(tool, arguments), None
        except ToolFailed as exc:
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

    def failed(self, exc: ToolFailed, *, title: str = "Refused") -> HTMLResponse:
        """A whole page for a call that failed (a 401 signs the browser out)."""
        status = exc.status if 400 <= exc.status < 600 else 502
        return self.render("error.html", status=status, title=title, error=exc)

    def redirect(self, to: str, *, status: int = 303) -> RedirectResponse:
        return RedirectResponse(f"{self.root}{to}", status_code=status)
