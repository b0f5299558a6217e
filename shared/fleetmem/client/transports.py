"""How the client reaches memory: `/v1` over HTTP (one keep-alive connection per client), MCP with
the official SDK (through `fleetmem.remote`, the CLI's remote lane), or in-process on a data
directory (`fleetmem.lanes.LocalLane`, the CLI's trusted-local dispatch). Each answers a call with
the tool's success body (its notices under `notices`, as `/v1` sends them) or raises
`FleetmemError` with the envelope."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from fleetmem.client.errors import NOT_JSON, FleetmemError
from fleetmem.contract.envelope import envelope_code
from fleetmem.contract.routes import MCP_PATH, v1_tool_path
from fleetmem.remote import NOTICES_KEY, Endpoint, RemoteUnavailable


def base_url(url: str) -> str:
    """The server's base URL (a profile or the CLI names the MCP endpoint, `.../mcp`)."""
    return url.rstrip("/").removesuffix(MCP_PATH)


def read_answer(status: int, content: bytes) -> dict[str, Any]:
    """A `/v1` answer as the success body, or `FleetmemError` with its envelope."""
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise FleetmemError.built(
            "unavailable",
            f"The memory server answered HTTP {status} without a JSON body.",
            "Check the URL names a fleetmem server (its base, e.g. http://127.0.0.1:8765), then retry.",
            "An answer that is not the tool's body or its envelope cannot be read.",
            actor="host_admin",
            status=status,
            unanswered=NOT_JSON,
        )
    if status >= 400 or ("error" in body and envelope_code(body) and "message" in body):
        raise FleetmemError(body, status=status)
    return body


def _reply_body(reply: Any) -> dict[str, Any]:
    """A lane's `ToolReply` as `/v1` gives it: the body with its notices, or the envelope raised."""
    if reply.is_error:
        raise FleetmemError(reply.body)
    body = dict(reply.body)
    if reply.notices:
        body[NOTICES_KEY] = list(reply.notices)
    return body


class HttpTransport:
    """`POST /v1/<tool>` over one keep-alive connection; over `http` instead when one is given
    (its connection pool or transport, e.g. `httpx2.MockTransport`), which is then not closed here."""

    def __init__(self, endpoint: Endpoint, http: httpx2.Client | None = None) -> None:
        self.label = base_url(endpoint.url)
        self.auth = {"Authorization": f"Bearer {endpoint.token}"}
        self.owned = http is None
        self.http = http if http is not None else httpx2.Client(timeout=endpoint.timeout)
        self.timeout = endpoint.timeout

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self.http.post(
                self.label + v1_tool_path(tool), json=arguments, headers=self.auth, timeout=self.timeout
            )
        except httpx2.HTTPError as exc:
            raise FleetmemError.unreachable(self.label, type(exc).__name__) from None
        return read_answer(response.status_code, response.content)

    def close(self) -> None:
        if self.owned:
            self.http.close()


class AsyncHttpTransport:
    """`HttpTransport`, awaited; `http` may be an `httpx2.AsyncClient` over `httpx2.ASGITransport`
    (an app called in-process, as the console calls the server it is mounted in)."""

    def __init__(self, endpoint: Endpoint, http: httpx2.AsyncClient | None = None) -> None:
        self.label = base_url(endpoint.url)
        self.auth = {"Authorization": f"Bearer {endpoint.token}"}
        self.owned = http is None
        self.http = http if http is not None else httpx2.AsyncClient(timeout=endpoint.timeout)
        self.timeout = endpoint.timeout

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await self.http.post(
                self.label + v1_tool_path(tool), json=arguments, headers=self.auth, timeout=self.timeout
            )
        except httpx2.HTTPError as exc:
            raise FleetmemError.unreachable(self.label, type(exc).__name__) from None
        return read_answer(response.status_code, response.content)

    async def aclose(self) -> None:
        if self.owned:
            await self.http.aclose()


def _mcp_endpoint(endpoint: Endpoint) -> Endpoint:
    return Endpoint(base_url(endpoint.url) + MCP_PATH, endpoint.token, endpoint.timeout, endpoint.source)


class McpTransport:
    """A `tools/call` per call over streamable HTTP (`mode`: the MCP era, e.g. 2026-07-28 or 2025-11-25)."""

    def __init__(self, endpoint: Endpoint, mode: str | None = None) -> None:
        self.endpoint = _mcp_endpoint(endpoint)
        self.mode = mode
        self.label = self.endpoint.url

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        from fleetmem.remote import call_remote

        try:
            reply = call_remote(self.endpoint, [(tool, arguments)], mode=self.mode)[0]
        except RemoteUnavailable as exc:
            raise FleetmemError.unreachable(exc.url, exc.reason) from None
        return _reply_body(reply)

    async def acall(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        from fleetmem.remote import call_remote_async

        try:
            reply = (await call_remote_async(self.endpoint, [(tool, arguments)], mode=self.mode))[0]
        except RemoteUnavailable as exc:
            raise FleetmemError.unreachable(exc.url, exc.reason) from None
        return _reply_body(reply)

    def close(self) -> None:
        pass


class LocalTransport:
    """In-process on a data directory, as the CLI acts on one: a trusted local caller with every scope."""

    def __init__(
        self, data_dir: str | None, tenant: str | None = None, embedder: str | None = None, *, creates: bool = True
    ) -> None:
        """`creates`: a directory without a memory starts one (else the call is refused, as a read
        command refuses it); `embedder` as `--embedder` names one ("none": verbs that need none)."""
        from fleetmem.lanes import LocalLane

        self.lane = LocalLane(data_dir, tenant, embedder, creates=creates)
        self.label = self.lane.label

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        from fleetmem.console import CommandFailed

        try:
            return _reply_body(self.lane.call(tool, arguments))
        except CommandFailed as exc:  # the data directory could not be opened
            raise FleetmemError.built(exc.code, exc.message, exc.suggestion, "The local store is not usable.") from exc

    async def acall(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        # On the loop's own thread: the store's connection belongs to the thread that opened it.
        return self.call(tool, arguments)

    def close(self) -> None:
        pass
