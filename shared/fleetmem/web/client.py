"""How the console reaches memory: tools over `/v1`, through the typed client (`fleetmem.client`)
exactly as any remote caller does.

Each call is `AsyncClient.for_caller` with the signed-in token as the bearer credential over one
shared HTTP client: locally in-process into the app that serves `/mcp` and `/v1`
(`ToolClient.in_process`), for a deployed stage over HTTPS to its API (`ToolClient.remote`). One
data path either way, so the server decides scopes, the tenant and what a caller may see. A refusal
is the console's `ToolFailed`, with a next step written for a person (`NEXT_STEPS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx2

from fleetmem.client import AsyncClient, FleetmemError
from fleetmem.client.errors import NOT_JSON

#: The longest a console page waits for one tool call.
CALL_TIMEOUT_S = 30.0
#: What a person can do next after a refusal with this code. The envelope's own suggestion and fix
#: are written for an agent (tools to call, arguments to pass), so the console never shows them.
NEXT_STEPS = {
    "unauthorized": "Sign in again with a valid fleetmem token.",
    "scope_denied": "Sign in with a token that has the scope this needs, or ask this memory's admin for one.",
    "not_found": "Check the name or id, or pick it from the list it appears in.",
    "invalid_params": "Correct what you entered (it is kept in the form) and submit again.",
    "rate_limited": "Wait a minute, then try again.",
    "payload_too_large": "Make it shorter and submit again.",
    "conflict": "Reload the page to see the current state, then try again.",
}
NEXT_STEP_DEFAULT = "Reload the page and try again; if it keeps failing, tell this memory's operator."
#: What happened, said to a person, by the refusal's code (the code itself is for an agent and is
#: only in the collapsed details of the message).
HEADLINES = {
    "unauthorized": "Not signed in",
    "scope_denied": "Not allowed with this token",
    "forbidden": "Not allowed",
    "step_up_required": "Not confirmed",
    "confirmation_required": "Not confirmed",
    "not_found": "Not found",
    "invalid_params": "Not accepted",
    "rate_limited": "Too many attempts",
    "payload_too_large": "Too long",
    "conflict": "Changed meanwhile",
    "unavailable": "Memory did not answer",
}
HEADLINE_DEFAULT = "Not done"


@dataclass
class ToolFailed(Exception):
    """A call the server refused or could not answer: its envelope's code, message and fix."""

    code: str
    message: str
    suggestion: str = ""
    status: int = 0
    envelope: dict[str, Any] | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    @property
    def headline(self) -> str:
        """What happened, in a few words for a person."""
        return HEADLINES.get(self.code, HEADLINE_DEFAULT)


class ToolClient:
    """Calls tools over `/v1` with the caller's token (never stored here)."""

    def __init__(self, http: httpx2.AsyncClient, *, url: str, label: str, timeout: float = CALL_TIMEOUT_S) -> None:
        self.http = http
        #: The server's base URL the calls go to (in-process: the loopback address the app sees).
        self.url = url
        self.timeout = timeout
        #: What the console says it is connected to (a URL or "this server"); never a token.
        self.label = label

    @classmethod
    def in_process(cls, app: Any, *, host: str = "127.0.0.1") -> ToolClient:
        """Into `app` itself through ASGI: the guard, the auth port and dispatch all run as for a
        network caller on this loopback address."""
        transport = httpx2.ASGITransport(app=app, client=(host, 0))
        return cls(httpx2.AsyncClient(transport=transport), url=f"http://{host}:1", label="this server")

    @classmethod
    def remote(cls, base_url: str, *, timeout: float = CALL_TIMEOUT_S) -> ToolClient:
        """A deployed stage's API (its base URL: the one serving `/v1` and `/mcp`)."""
        return cls(httpx2.AsyncClient(), url=base_url.rstrip("/"), label=base_url, timeout=timeout)

    async def call(self, token: str, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """The tool's success body, or `ToolFailed` with the server's envelope. A refusal to wait is
        shown at once (`retry_wait_s=0`): the person decides when to try again."""
        client = AsyncClient.for_caller(self.url, token, http=self.http, timeout=self.timeout, retry_wait_s=0)
        try:
            return await client.call(tool, arguments or {})
        except FleetmemError as err:
            raise self._failed(err) from None

    def _failed(self, err: FleetmemError) -> ToolFailed:
        """The client's error as the console shows it: the server's code and message with a next
        step for a person, or what went wrong when the server gave no usable answer."""
        if err.unanswered == NOT_JSON:
            return ToolFailed(
                "unavailable", err.message, "Reload the page; if it persists, check the server's log.", err.status or 0
            )
        if err.unanswered is not None:
            return ToolFailed(
                "unavailable",
                f"The memory server at {self.label} did not answer ({err.unanswered}).",
                "Check that the server is running and reachable, then reload the page.",
            )
        return ToolFailed(
            err.code,
            err.message or f"HTTP {err.status}",
            NEXT_STEPS.get(err.code, NEXT_STEP_DEFAULT),
            status=err.status or 0,
            envelope=err.envelope,
        )

    async def aclose(self) -> None:
        await self.http.aclose()
