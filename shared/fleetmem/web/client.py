"""How the console reaches memory: tools over `/v1`, exactly as any remote client does.

`POST /v1/<tool>` with the signed-in token as the bearer credential, and the tool's body (or its
error envelope) back. Locally the requests go in-process into the app that serves `/mcp` and `/v1`
(`ToolClient.in_process`), for a deployed stage over HTTPS to its API (`ToolClient.remote`): one
data path either way, so the server decides scopes, the tenant and what a caller may see.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx2

from fleetmem.contract.envelope import envelope_code
from fleetmem.contract.routes import TOOLS_PATH, v1_tool_path

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


class ToolClient:
    """Calls tools over `/v1` with the caller's token (never stored here)."""

    def __init__(self, http: httpx2.AsyncClient, *, label: str) -> None:
        self.http = http
        #: What the console says it is connected to (a URL or "this server"); never a token.
        self.label = label

    @classmethod
    def in_process(cls, app: Any, *, host: str = "127.0.0.1") -> ToolClient:
        """Into `app` itself through ASGI: the guard, the auth port and dispatch all run as for a
        network caller on this loopback address."""
        transport = httpx2.ASGITransport(app=app, client=(host, 0))
        http = httpx2.AsyncClient(transport=transport, base_url=f"http://{host}:1", timeout=CALL_TIMEOUT_S)
        return cls(http, label="this server")

    @classmethod
    def remote(cls, base_url: str, *, timeout: float = CALL_TIMEOUT_S) -> ToolClient:
        """A deployed stage's API (its base URL: the one serving `/v1` and `/mcp`)."""
        return cls(httpx2.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout), label=base_url)

    async def call(self, token: str, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """The tool's success body, or `ToolFailed` with the server's envelope."""
        with self._answered():
            response = await self.http.post(
                v1_tool_path(tool),
                content=json.dumps(arguments or {}),
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
        return _body(response)

    async def tools(self, token: str) -> list[str]:
        """The names of the tools this token may call (`GET /v1/tools`)."""
        with self._answered():
            response = await self.http.get(TOOLS_PATH, headers={"Authorization": f"Bearer {token}"})
        return [t.get("name", "") for t in _body(response).get("tools", [])]

    @contextmanager
    def _answered(self) -> Iterator[None]:
        """A request to the server that did not get an answer (`httpx2.HTTPError`) raises `ToolFailed`."""
        try:
            yield
        except httpx2.HTTPError as exc:
            raise ToolFailed(
                "unavailable",
                f"The memory server at {self.label} did not answer ({type(exc).__name__}).",
                "Check that the server is running and reachable, then reload the page.",
            ) from None

    async def aclose(self) -> None:
        await self.http.aclose()


def _body(response: httpx2.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise ToolFailed(
            "unavailable",
            f"The memory server answered HTTP {response.status_code} without a JSON body.",
            "Reload the page; if it persists, check the server's log.",
            status=response.status_code,
        )
    if response.status_code >= 400 or ("error" in body and "code" in body and "message" in body):
        code = envelope_code(body) or "error"
        raise ToolFailed(
            code,
            str(body.get("message") or f"HTTP {response.status_code}"),
            NEXT_STEPS.get(code, NEXT_STEP_DEFAULT),
            status=response.status_code,
            envelope=body,
        )
    return body
