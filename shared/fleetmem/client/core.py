"""`Client` and `AsyncClient`: one method per tool (`methods.py`, generated from the registry),
one way to reach memory from Python (see docs/python-client.md)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

import httpx2
from pydantic import BaseModel

from fleetmem.client.errors import FleetmemError
from fleetmem.client.methods import IDEMPOTENT, _AsyncToolMethods, _ToolMethods
from fleetmem.client.transports import AsyncHttpTransport, HttpTransport, LocalTransport, McpTransport
from fleetmem.protocol import REQUEST_ID

if TYPE_CHECKING:
    from fleetmem.memory.delta_answer import DeltaResult
    from fleetmem.remote import Endpoint

TransportName = Literal["http", "mcp"]
DEFAULT_TIMEOUT_S = 30.0
#: How long, in all, a call keeps retrying an answer whose fix is `wait` (0: never retries).
DEFAULT_RETRY_WAIT_S = 30.0
#: The arguments that place a delta read; after the first answer its cursor replaces them.
DELTA_POSITION = ("since", "since_slug", "since_page_seq", "since_fact_seq", "since_expiry", "session_id")


def resolve(url: str | None, profile: str | None, timeout: float) -> Endpoint:
    """The endpoint `url` (token from $FLEETMEM_TOKEN) or `profile` names (else $FLEETMEM_PROFILE),
    resolved as the CLI resolves `--url`/`--profile`; never a token argument."""
    from fleetmem.console import CommandFailed
    from fleetmem.remote import resolve_endpoint

    try:
        endpoint = resolve_endpoint(url=url, token_file=None, profile=profile, timeout=timeout)
    except CommandFailed as exc:
        raise FleetmemError.built(
            "invalid_params", exc.message, exc.suggestion, "The endpoint is not usable as named."
        ) from None
    if endpoint is None:
        raise FleetmemError.built(
            "invalid_params",
            "No memory endpoint: neither url, profile nor data_dir was given and FLEETMEM_PROFILE is not set.",
            "Pass url= (with the token in FLEETMEM_TOKEN), profile=NAME, or data_dir= for a local memory.",
            "The client needs one place to call.",
        )
    return endpoint


def validated(tool: str, body: dict[str, Any]) -> BaseModel:
    """The success body as the tool's result model (the registry's, read when first needed)."""
    from fleetmem.memory.verbs import REGISTRY

    return REGISTRY[tool].validate_result(body)


def prepared(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments sent: None dropped; a write that takes a request id gets one, so every retry
    of it is the same request (D22)."""
    args = {k: v for k, v in arguments.items() if v is not None}
    if tool in IDEMPOTENT and REQUEST_ID not in args and "idempotency_key" not in args:
        args[REQUEST_ID] = str(uuid.uuid4())
    return args


def wait_for(err: FleetmemError, deadline: float) -> float | None:
    """Seconds to wait before the same request again, or None: not a `wait`, or past the bound."""
    if err.next != "wait":
        return None
    seconds = err.retry_after_seconds or 1.0
    return seconds if time.monotonic() + seconds <= deadline else None


class _Settings:
    retry_wait_s: float
    transport: Any
    #: the `/v1` transport this client speaks: blocking or awaited
    _http: type[HttpTransport] | type[AsyncHttpTransport]

    def __init__(
        self,
        url: str | None = None,
        *,
        profile: str | None = None,
        data_dir: str | Path | None = None,
        tenant: str | None = None,
        transport: TransportName = "http",
        mcp_mode: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retry_wait_s: float = DEFAULT_RETRY_WAIT_S,
    ) -> None:
        endpoint = self._configure(url, profile, data_dir, timeout, retry_wait_s)
        if endpoint is None:
            self.transport = LocalTransport(str(data_dir), tenant)
        elif transport == "mcp":
            self.transport = McpTransport(endpoint, mcp_mode)
        else:
            self.transport = self._http(endpoint)

    @classmethod
    def over(cls, transport: Any, *, retry_wait_s: float = DEFAULT_RETRY_WAIT_S) -> Self:
        """A client on a transport its caller built (`fleetmem.client.transports`), e.g. a local
        store opened without an embedder and never created, as the CLI's hooks open one."""
        if retry_wait_s < 0:
            raise ValueError("retry_wait_s must not be negative")
        client = cls.__new__(cls)
        client.retry_wait_s = retry_wait_s
        client.transport = transport
        return client

    def _configure(
        self, url: str | None, profile: str | None, data_dir: str | Path | None, timeout: float, retry_wait_s: float
    ) -> Endpoint | None:
        if retry_wait_s < 0 or timeout <= 0:
            raise ValueError("timeout must be positive and retry_wait_s not negative")
        self.retry_wait_s = retry_wait_s
        if data_dir is not None:
            if url or profile:
                raise ValueError("data_dir names a local memory; url/profile a remote one: pass one")
            return None
        return resolve(url, profile, timeout)


class Client(_ToolMethods, _Settings):
    """Synchronous client. `Client(url)` (token from $FLEETMEM_TOKEN), `Client(profile="NAME")`, or
    `Client(data_dir=...)` for an in-process memory; `transport="mcp"` speaks MCP instead of `/v1`."""

    transport: HttpTransport | McpTransport | LocalTransport
    _http = HttpTransport

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """One call, its success body as a dict (retrying a `wait` within `retry_wait_s`)."""
        args = prepared(tool, arguments or {})
        deadline = time.monotonic() + self.retry_wait_s
        while True:
            try:
                return self.transport.call(tool, args)
            except FleetmemError as err:
                seconds = wait_for(err, deadline)
                if seconds is None:
                    raise
            time.sleep(seconds)

    def _tool(self, name: str, arguments: dict[str, Any]) -> Any:
        return validated(name, self.call(name, arguments))

    def follow_delta(
        self, *, cursor: str | None = None, cursor_file: str | Path | None = None, **arguments: Any
    ) -> DeltaFollower:
        """Every delta answer from `cursor` (else the one in `cursor_file`, else `since`/`session_id`)
        until `has_more` is false; the follower keeps the cursor (and writes it to `cursor_file`)."""
        return DeltaFollower(self, cursor, cursor_file, arguments)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_AsyncToolMethods, _Settings):
    """The asynchronous client: the same constructor as `Client`, every method awaited."""

    transport: AsyncHttpTransport | McpTransport | LocalTransport
    _http = AsyncHttpTransport

    @classmethod
    def for_caller(
        cls,
        url: str,
        token: str,
        *,
        http: httpx2.AsyncClient,
        timeout: float = DEFAULT_TIMEOUT_S,
        retry_wait_s: float = DEFAULT_RETRY_WAIT_S,
    ) -> AsyncClient:
        """For a server that calls memory on behalf of the people signed in to it (the memory
        console): `token` is that caller's, sent over `/v1` on the server's shared `http` client
        (its connection pool, or an `httpx2.ASGITransport` into an app in-process), never closed here."""
        from fleetmem.remote import Endpoint

        if timeout <= 0:
            raise ValueError("timeout must be positive")
        transport = AsyncHttpTransport(Endpoint(url, token, timeout, source="caller"), http)
        return cls.over(transport, retry_wait_s=retry_wait_s)

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """One call, its success body as a dict (retrying a `wait` within `retry_wait_s`)."""
        args = prepared(tool, arguments or {})
        deadline = time.monotonic() + self.retry_wait_s
        while True:
            try:
                if isinstance(self.transport, AsyncHttpTransport):
                    return await self.transport.call(tool, args)
                return await self.transport.acall(tool, args)
            except FleetmemError as err:
                seconds = wait_for(err, deadline)
                if seconds is None:
                    raise
            await asyncio.sleep(seconds)

    async def _tool(self, name: str, arguments: dict[str, Any]) -> Any:
        return validated(name, await self.call(name, arguments))

    def follow_delta(
        self, *, cursor: str | None = None, cursor_file: str | Path | None = None, **arguments: Any
    ) -> AsyncDeltaFollower:
        """`Client.follow_delta`, iterated with `async for`."""
        return AsyncDeltaFollower(self, cursor, cursor_file, arguments)

    async def aclose(self) -> None:
        if isinstance(self.transport, AsyncHttpTransport):
            await self.transport.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Cursor:
    """What a delta follower keeps: the opaque cursor (docs/protocol.md, delta, D33), and the file it is stored in."""

    def __init__(self, cursor: str | None, cursor_file: str | Path | None, arguments: dict[str, Any]) -> None:
        self.file = Path(cursor_file) if cursor_file is not None else None
        if cursor is None and self.file is not None and self.file.is_file():
            cursor = self.file.read_text(encoding="utf-8").strip() or None
        self.cursor = cursor
        self.arguments = dict(arguments)
        self.done = False

    def next_arguments(self) -> dict[str, Any]:
        if self.cursor is None:
            return dict(self.arguments)
        kept = {k: v for k, v in self.arguments.items() if k not in DELTA_POSITION}
        return {**kept, "cursor": self.cursor}

    def advance(self, answer: DeltaResult) -> DeltaResult:
        before, self.cursor = self.cursor, answer.next_cursor.cursor
        if answer.has_more and before is not None and self.cursor == before:
            # more to read, yet the same position: following it again would ask for the same page forever
            raise FleetmemError.built(
                "internal_error",
                "delta answered has_more with the cursor it was given, so following it makes no progress.",
                "Report this answer (its correlation_id) to the memory's operator; resume later from the "
                "stored cursor.",
                "The server's delta did not advance its cursor.",
                actor="host_admin",
            )
        if self.file is not None and self.cursor:
            # written beside and renamed over, so a crash never leaves a half-written cursor
            self.file.parent.mkdir(parents=True, exist_ok=True)
            part = self.file.with_name(self.file.name + ".part")
            part.write_text(self.cursor + "\n", encoding="utf-8")
            os.replace(part, self.file)
        self.done = not answer.has_more
        return answer


class DeltaFollower(_Cursor, Iterator["DeltaResult"]):
    def __init__(self, client: Client, cursor: str | None, cursor_file: str | Path | None, args: dict[str, Any]):
        super().__init__(cursor, cursor_file, args)
        self.client = client

    def __iter__(self) -> DeltaFollower:
        return self

    def __next__(self) -> DeltaResult:
        if self.done:
            raise StopIteration
        return self.advance(self.client.delta(**self.next_arguments()))


class AsyncDeltaFollower(_Cursor, AsyncIterator["DeltaResult"]):
    def __init__(self, client: AsyncClient, cursor: str | None, cursor_file: str | Path | None, args: dict[str, Any]):
        super().__init__(cursor, cursor_file, args)
        self.client = client

    def __aiter__(self) -> AsyncDeltaFollower:
        return self

    async def __anext__(self) -> DeltaResult:
        if self.done:
            raise StopAsyncIteration
        return self.advance(await self.client.delta(**self.next_arguments()))
