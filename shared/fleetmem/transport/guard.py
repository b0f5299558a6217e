"""The pure-ASGI guard in front of the MCP app (docs/protocol.md: conventions; trust, scopes and tenancy):

- On a loopback bind, every route first checks DNS-rebinding protection with the settings the SDK
  gets too (`LOOPBACK_SECURITY`): a foreign Host -> 421, a foreign Origin -> 403.
- `GET /mcp` (and any other non-POST) -> 405: the SDK would open an event stream that never ends.
- `POST /mcp` without `Accept: application/json, text/event-stream` -> 406; a Content-Type that is
  not `application/json` -> 400 (on `POST /v1/<tool>` too); a body over `MAX_REQUEST_BYTES` -> 413.
- no / unknown / revoked token -> 401, `WWW-Authenticate: Bearer resource_metadata="…"` and an
  `unauthorized` envelope whose fix names `token_command`; else the caller goes in the scope.
- then `jsonrpc_refusal` on the body of `POST /mcp`; a handshake-era `tools/call` is then answered
  by `fast_call.FastToolCalls` (the SDK's answer without its per-request transport), anything
  else by the SDK.
- any non-2xx answer from below that is not JSON (Starlette's 404/405, the SDK's texts) becomes
  the envelope."""

from __future__ import annotations

import logging
from collections import deque

from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fleetmem.contract.correlation import correlation, new_correlation_id
from fleetmem.contract.envelope import http_envelope
from fleetmem.contract.routes import CONSOLE_PATH, MCP_PATH, V1_PREFIX
from fleetmem.contract.status import CORRELATION_HEADER
from fleetmem.transport.callers import CALLER_SCOPE_KEY, CallerFromRequest, public_base_url, resource_metadata_url
from fleetmem.transport.fast_call import FastToolCalls
from fleetmem.transport.http_api import is_json_content_type
from fleetmem.transport.invoker import EdgeCalls
from fleetmem.transport.jsonrpc import jsonrpc_refusal
from fleetmem.transport.refusals import (
    MAX_REQUEST_BYTES,
    bad_content_type,
    refusal,
    status_refusal,
    too_large,
    unauthorized_error,
)

log = logging.getLogger("fleetmem.transport.mcp")

#: DNS-rebinding protection for a loopback bind: what the SDK turns on by itself for such a host,
#: stated here so the SDK (on /mcp) and the guard (on every route) check the same lists.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
LOOPBACK_SECURITY = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
)


async def _read_body(receive: Receive) -> tuple[bytes, list[Message]] | None:
    """The whole request body and the messages to replay it with, or None past MAX_REQUEST_BYTES."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), [{"type": "http.request", "body": b"".join(chunks), "more_body": True}, message]
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            raw = b"".join(chunks)
            return raw, [{"type": "http.request", "body": raw, "more_body": False}]


def _replay(messages: list[Message], receive: Receive) -> Receive:
    queue = deque(messages)

    async def replay() -> Message:
        return queue.popleft() if queue else await receive()

    return replay


class EdgeGuard:
    """Pure-ASGI guard in front of the app: on every path Host (421) and Origin (403) when
    DNS-rebinding protection is on; on POST /mcp method (405), Accept (406), Content-Type (400),
    body size (413), authentication (401) and `jsonrpc_refusal`; on /v1 Content-Type for POST (400),
    size and authentication; on every path, any non-2xx answer from below that is not JSON
    (Starlette's 404/405, the SDK's 413/421 texts) becomes the envelope."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        calls: EdgeCalls,
        caller_from_request: CallerFromRequest,
        public_url: str | None,
        security: TransportSecuritySettings | None = None,
        fast_calls: FastToolCalls | None = None,
    ) -> None:
        self.app = app
        self.fast_calls = fast_calls
        protect = security is not None and security.enable_dns_rebinding_protection
        self.security = TransportSecurityMiddleware(security) if protect else None
        self.calls = calls
        self.caller_from_request = caller_from_request
        self.public_url = public_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        request = Request(scope, receive)
        if self.security is not None:
            foreign = await self.security.validate_request(request)  # Host, Origin (not Content-Type)
            if foreign is not None:
                await status_refusal(foreign.status_code, request.method, path)(scope, receive, send)
                return
        if path.startswith(V1_PREFIX + "/"):
            await self._v1(scope, receive, send, request)
            return
        if path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/"):
            await self.app(scope, receive, send)  # the console answers browsers in HTML itself
            return
        if path.rstrip("/") != MCP_PATH:
            await self.app(scope, receive, _enveloped(scope, receive, send))
            return
        if request.method != "POST":
            await refusal(
                405,
                f"{request.method} /mcp is not served: this endpoint is stateless and answers POST only.",
                "Problem: the request used another HTTP method. Cause: a stateless MCP server opens no "
                "event stream. Fix: send each JSON-RPC message as POST /mcp.",
                "Send each JSON-RPC message as POST /mcp; there is no event stream to GET.",
                headers={"Allow": "POST"},
            )(scope, receive, send)
            return
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse):
            await refusal(
                406,
                "POST /mcp needs `Accept: application/json, text/event-stream`.",
                "Problem: the Accept header does not list both media types. Cause: streamable HTTP "
                "clients must accept JSON and event-stream responses. Fix: send "
                "`Accept: application/json, text/event-stream`.",
                "Send `Accept: application/json, text/event-stream` with every POST /mcp.",
            )(scope, receive, send)
            return
        if not is_json_content_type(request.headers.get("content-type", "")):
            await bad_content_type()(scope, receive, send)
            return
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
            await too_large()(scope, receive, send)
            return
        if not await self._authenticate(scope, receive, send, request):
            return
        body = await _read_body(receive)  # a body without Content-Length is counted as it streams
        if body is None:
            await too_large()(scope, receive, send)
            return
        raw, messages = body
        replay = _replay(messages, receive)
        refused = jsonrpc_refusal(raw, request.headers)
        if refused is not None:
            await refused(scope, replay, send)
            return
        if self.fast_calls is not None:
            answer = await self.fast_calls.answer(raw, request)
            if answer is not None:  # a 200 JSON-RPC answer: what `_enveloped` lets through untouched
                await answer(scope, replay, send)
                return
        await self.app(scope, replay, _enveloped(scope, replay, send))

    async def _v1(self, scope: Scope, receive: Receive, send: Send, request: Request) -> None:
        """`/v1/...`: JSON bodies only, the size limit and the same bearer authentication as /mcp,
        then the routes."""
        if request.method == "POST" and not is_json_content_type(request.headers.get("content-type", "")):
            await bad_content_type(f"POST {request.url.path[:200]}")(scope, receive, send)
            return
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
            await too_large()(scope, receive, send)
            return
        if await self._authenticate(scope, receive, send, request):
            await self.app(scope, receive, _enveloped(scope, receive, send))

    async def _authenticate(self, scope: Scope, receive: Receive, send: Send, request: Request) -> bool:
        """Puts the caller in the scope and returns True, or answers 401 and returns False."""
        presented = bool(request.headers.get("authorization"))
        try:
            # On the event loop, no worker-thread hop: a bearer token is checked against the local
            # store's lookup map (one PRAGMA while nothing changed, one indexed read in WAL mode,
            # which never waits for a writer, after a change); the gateway caller reads the event.
            caller = self.caller_from_request(request)
        except Exception as exc:
            log.error("authentication failed", extra={"event": "auth_error", "exc_type": type(exc).__name__})
            caller = None
        if caller is None:
            base = public_base_url(request, self.public_url)
            envelope = http_envelope(
                unauthorized_error(
                    token_presented=presented, token_command=self.calls.token_command, inputs=self.calls.token_inputs
                ),
                correlation_id=new_correlation_id(),
            )
            cid = envelope.correlation_id
            challenge = f'Bearer resource_metadata="{resource_metadata_url(base)}"'
            if presented:
                challenge += ', error="invalid_token"'
            with correlation(cid):
                log.info("unauthorized", extra={"event": "unauthorized", "token_presented": presented})
            headers = {"WWW-Authenticate": challenge, CORRELATION_HEADER: cid}
            await JSONResponse(envelope.body(), status_code=401, headers=headers)(scope, receive, send)
            return False
        scope[CALLER_SCOPE_KEY] = caller
        return True


def _enveloped(scope: Scope, receive: Receive, send: Send) -> Send:
    """`send` that turns a non-2xx answer whose body is not JSON into the envelope for its status.
    JSON answers pass untouched (JSON-RPC errors stay JSON-RPC errors, docs/protocol.md: framing)."""
    replaced = False

    async def wrapped(message: Message) -> None:
        nonlocal replaced
        if message["type"] == "http.response.start":
            status = int(message["status"])
            headers = Headers(raw=message.get("headers") or [])
            if status >= 400 and not is_json_content_type(headers.get("content-type", "")):
                replaced = True
                refused = status_refusal(status, scope.get("method", ""), scope.get("path", ""), headers)
                await refused(scope, receive, send)
                return
        elif replaced:
            return  # the replaced answer's own body
        await send(message)

    return wrapped
