"""The MCP edge: the `mcp` SDK's low-level server, stateless, JSON responses, at `POST /mcp`.

One app serves both protocol eras (the SDK routes them): handshake clients (`initialize`,
2025-06-18 / 2025-11-25) and 2026-07-28 stateless clients (`server/discover`, `Mcp-Method` /
`Mcp-Name` headers). tools/list comes from the registry filtered by surface and the caller's scopes;
tools/call goes to an invoker (in-process locally, one Lambda per verb on AWS) that runs `dispatch`.

Around the SDK app (docs/protocol.md: conventions; trust, scopes and tenancy):
- `GET /mcp` (and any other non-POST) -> 405: the SDK would open an event stream that never ends.
- `POST /mcp` without `Accept: application/json, text/event-stream` -> 406.
- `POST /mcp` whose Content-Type is not `application/json` -> 400; a body over `MAX_REQUEST_BYTES`
  (4 MiB) -> 413.
- no / unknown / revoked token -> 401, `WWW-Authenticate: Bearer resource_metadata="…"` and an
  `unauthorized` envelope from the one builder, whose fix names `token_command`.
- unknown paths -> 404, wrong methods elsewhere -> 405: every non-2xx answer is the JSON envelope
  with `suggestion` and `fix`.
- On a loopback bind, every route (/mcp, /v1, /health, the metadata document, unknown paths) first
  checks DNS-rebinding protection with the settings the SDK gets too (`LOOPBACK_SECURITY`): a foreign
  Host -> 421, a foreign Origin -> 403. `POST /v1/<tool>` also needs `Content-Type:
  application/json` (400), as `POST /mcp` does.
- `/health`, and the OAuth protected-resource metadata document at
  `/.well-known/oauth-protected-resource` (and `…/mcp`).
Malformed JSON-RPC and unknown methods stay JSON-RPC errors (the SDK answers them). Before the SDK
sees an authenticated `POST /mcp`, `jsonrpc_refusal` answers, as JSON-RPC errors, what the SDK would
drop or explain badly: a string holding an unpaired surrogate escape (-32700), an id that is not a
string or an integer (-32600, id null; the SDK's handshake path took it for a notification and
answered 202), an `MCP-Protocol-Version` this server does not speak (-32022, naming every served
version), and `initialize` sent as a 2026-07-28 request (-32601 with HTTP 404, as the SDK answers an
unknown method of that era, but saying that the era has no handshake and what to send instead).

Result framing: success -> `content[0]` = the body as JSON text (byte-identical with or without
notices), `structuredContent` = the body, one extra text block per notice, and
`_meta["fleetmem/notices"]`; error -> `isError: true` and exactly one text block, the envelope.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS, MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import fleetmem
from fleetmem.contract.correlation import correlation, new_correlation_id
from fleetmem.contract.invoker import Invoker
from fleetmem.contract.result import DispatchResult
from fleetmem.contract.routes import (
    HEALTH_PATH,
    MCP_PATH,
    OPENAPI_PATH,
    PRM_MCP_PATH,
    PRM_PATH,
    TOOLS_PATH,
    V1_PREFIX,
    V1_TOOL_PATH,
    served,
)
from fleetmem.contract.status import CORRELATION_HEADER
from fleetmem.errors import Fix, VerbError
from fleetmem.memory.envelope import (
    NOTICES_META_KEY,
    build_envelope,
    internal_envelope,
    order_notices,
    render_notice_block,
    render_notice_meta,
)
from fleetmem.models import Caller
from fleetmem.ports import Auth, Deps
from fleetmem.protocol import PROTOCOL_VERSION, SCOPES, SERVER_NAME, Surface
from fleetmem.transport.dispatch import internal_answer, precheck, visible_tools
from fleetmem.transport.errors import unencodable_path
from fleetmem.transport.gateway import caller_from_authorizer
from fleetmem.transport.http_api import (
    answer_v1,
    is_json_content_type,
    not_json_error,
    openapi_document,
    render_json,
    tools_document,
)
from fleetmem.transport.invoker import InProcessInvoker
from fleetmem.transport.listing import list_tool_definitions, tool_input_schema

log = logging.getLogger("fleetmem.transport.mcp")

CALLER_SCOPE_KEY = "fleetmem.caller"
#: The public base URL of this one request, when the host knows it better than the headers do (the
#: Lambda edge puts it there from each event; one app serves every invocation of a sandbox).
PUBLIC_URL_SCOPE_KEY = "fleetmem.public_url"

CallerFromRequest = Callable[[Request], Caller | None]
CallerFromContext = Callable[[Any], Caller | None]

# ---------------------------------------------------------------------------------------------
# tools/list and tools/call


def _text(value: dict[str, Any]) -> str:
    # An unpaired surrogate cannot travel as UTF-8; render_json falls back to JSON escapes.
    return render_json(value).decode("utf-8")


def to_call_tool_result(
    result: DispatchResult, *, transport: str = "mcp", callable_tools: set[str] | None = None
) -> types.CallToolResult:
    if result.is_error:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=_text(result.body))], is_error=True
        )
    content: list[Any] = [types.TextContent(type="text", text=_text(result.body))]
    meta = None
    if result.notices:
        ordered = order_notices(result.notices)
        content.extend(
            types.TextContent(
                type="text", text=render_notice_block(n, transport, callable_tools=callable_tools)
            )
            for n in ordered
        )
        meta = {
            NOTICES_META_KEY: [
                render_notice_meta(n, transport, callable_tools=callable_tools) for n in ordered
            ]
        }
    return types.CallToolResult(content=content, structured_content=result.body, is_error=False, _meta=meta)


def _error_result(body: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=_text(body))], is_error=True)


#: What mints a token for this server when nothing more specific is known (`build_mcp_app`'s
#: `token_command` names the server's own store, e.g. the local server's `--data-dir`).
DEFAULT_TOKEN_COMMAND = ("fleetmem", "token", "create", "--client", "my-agent", "--scopes", "read,write")


def unauthorized_error(
    *, token_presented: bool, token_command: Sequence[str] = DEFAULT_TOKEN_COMMAND,
    inputs: Sequence[Mapping[str, str]] = (),
) -> VerbError:
    command = shlex.join(token_command)
    return VerbError(
        "unauthorized",
        "The token is missing, unknown or revoked." if token_presented else "No bearer token was sent.",
        "Send `Authorization: Bearer <token>` with a valid fleetmem token; the memory host's operator "
        "creates one with the command below.",
        why="Every MCP call is authenticated; the tenant and scopes come from the token.",
        fix=Fix(
            why="Mints a token for one client in the store this server reads; it is printed once.",
            argv=list(token_command),
            actor="host_admin",
            user_message="The memory server did not accept my token. Its operator can create one with "
            f"`{command}`; add it to my MCP configuration as an Authorization: Bearer header.",
            inputs=tuple(dict(i) for i in inputs),
        ),
    )


def build_mcp_server(
    invoker: Invoker,
    *,
    surface: Surface = "full",
    caller_from_context: CallerFromContext | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    token_command: Sequence[str] = DEFAULT_TOKEN_COMMAND,
    token_inputs: Sequence[Mapping[str, str]] = (),
) -> Server:
    """The SDK server. The caller is read per request: by default from the ASGI scope, where the
    HTTP wrapper put the authenticated `Caller`; in-memory tests pass `caller_from_context`.
    `limiter` bounds the threads that run tool calls at once (None: anyio's default of 40)."""

    def caller_of(ctx: Any) -> Caller | None:
        if caller_from_context is not None:
            return caller_from_context(ctx)
        request = getattr(ctx, "request", None)
        scope = getattr(request, "scope", None)
        return scope.get(CALLER_SCOPE_KEY) if isinstance(scope, dict) else None

    async def on_list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list_tool_definitions(surface, caller_of(ctx)))

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        cid = new_correlation_id()
        tool = params.name
        try:
            caller = caller_of(ctx)
            if caller is None:
                body = build_envelope(
                    unauthorized_error(token_presented=False),
                    tool=tool,
                    arguments=params.arguments,
                    correlation_id=cid,
                    transport="mcp",
                )
                return _error_result(body)
            gate = precheck(
                tool, params.arguments, caller, surface=surface, correlation_id=cid,
                token_command=token_command, token_inputs=token_inputs,
            )
            if gate is not None:
                return _error_result(gate.body)
            result = await anyio.to_thread.run_sync(
                invoker.invoke, tool, params.arguments, caller, cid, limiter=limiter
            )
            allowed = {s.name for s in visible_tools(surface, caller)}
            return to_call_tool_result(result, callable_tools=allowed)
        except Exception as exc:  # never let the SDK turn an exception's text into a result
            answer = internal_answer(tool, cid, exc, transport="mcp", event="edge_internal_error")
            return _error_result(answer.body)

    return Server(
        SERVER_NAME,
        version=fleetmem.__version__,
        instructions="Long-term memory for AI agents (MEMORY_VERBS v1). Read the tool descriptions; "
        "every error carries a `fix` with the next step.",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        get_tool_input_schema=tool_input_schema(surface),
    )


# ---------------------------------------------------------------------------------------------
# HTTP


def public_base_url(request: Request, configured: str | None = None) -> str:
    if configured:
        return configured.rstrip("/")
    per_request = request.scope.get(PUBLIC_URL_SCOPE_KEY)
    if per_request:
        return str(per_request).rstrip("/")
    proto = request.headers.get("x-forwarded-proto") or request.url.scheme
    host = request.headers.get("x-forwarded-host") or request.headers.get("host") or request.url.netloc
    return f"{proto}://{host}"


def resource_metadata_url(base: str) -> str:
    return f"{base}{PRM_MCP_PATH}"


def protected_resource_document(base: str, authorization_server: str | None) -> dict[str, Any]:
    """RFC 9728 metadata. `authorization_servers` only when one is configured (Cognito on AWS): the
    local server issues its own bearer tokens (`fleetmem token create`) and has no OAuth server, so
    naming one (e.g. itself) would send clients to an endpoint that answers 404."""
    doc: dict[str, Any] = {"resource": f"{base}{MCP_PATH}"}
    if authorization_server:
        doc["authorization_servers"] = [authorization_server]
    doc.update(
        {
            "scopes_supported": list(SCOPES),
            "bearer_methods_supported": ["header"],
            "resource_name": SERVER_NAME,
        }
    )
    return doc


#: The largest request body POST /mcp accepts (4 MiB, the SDK's own default, which we set
#: explicitly). A page body holds at most 350 KB of UTF-8, which stays far below this even fully
#: JSON-escaped; larger requests answer 413 before anything is parsed.
MAX_REQUEST_BYTES = 4 * 1024 * 1024

#: What this server answers, named in 404 and 405 envelopes.
SERVED = served()


def _refusal(
    status: int,
    message: str,
    suggestion: str,
    fix_why: str,
    *,
    code: str = "invalid_params",
    detail: Any = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """An HTTP-level refusal as the same envelope every error uses (AGENT_OPERATOR). No corrected
    MCP call exists for a malformed HTTP request, so the fix has no step (`next: report`) and its
    `why` says what the client must send instead."""
    error = VerbError(code, message, suggestion, detail=detail, fix=Fix(why=fix_why), klass="caller")
    return _refusal_of(status, error, headers)


def _refusal_of(status: int, error: VerbError, headers: Mapping[str, str] | None = None) -> Response:
    cid = new_correlation_id()
    body = build_envelope(
        error,
        tool="",
        arguments={},
        correlation_id=cid,
        transport="http",
    )
    return JSONResponse(body, status_code=status, headers={CORRELATION_HEADER: cid, **(headers or {})})


def status_refusal(status: int, method: str, path: str, headers: Mapping[str, str] | None = None) -> Response:
    """The envelope for a non-2xx answer produced below the guard (Starlette's router, the SDK's
    transport checks), by status: every non-2xx answer of this server is the JSON envelope."""
    where = f"{method} {path[:200]}"
    if status == 404:
        return _refusal(
            404,
            f"Nothing is served at {where}.",
            f"Problem: the path does not exist on this server. Cause: it serves {SERVED} only. "
            "Fix: send MCP messages as POST /mcp.",
            f"The MCP endpoint is POST /mcp; this server serves {SERVED}.",
            code="not_found",
        )
    if status == 405:
        allow = (headers or {}).get("allow", "")
        return _refusal(
            405,
            f"{where} is not served: this path answers {allow or 'other methods'} only.",
            f"Problem: the request used a method this path does not answer. Cause: the server serves "
            f"{SERVED}. Fix: use the method the path answers.",
            f"This path answers {allow or 'other methods'}; the MCP endpoint answers POST only.",
            headers={"Allow": allow} if allow else None,
        )
    if status == 413:
        return _too_large()
    if status == 400:
        return _bad_content_type(f"{method} {path[:200]}")
    if status in (403, 421):
        header, problem = (
            ("Host", "the request is addressed to another host name")
            if status == 421
            else ("Origin", "the request comes from a web page of a foreign origin")
        )
        return _refusal(
            status,
            f"{where} was refused: the {header} header does not name this server.",
            f"Problem: {problem}. "
            "Cause: a local server answers only requests for its own address, from its own address "
            "(DNS-rebinding protection). Fix: connect to the URL the server printed at startup, e.g. "
            "http://127.0.0.1:8765/mcp, from a client rather than a web page.",
            "Use the URL the server printed at startup; requests for other host names or from other "
            "web origins are refused.",
            detail={"header": header.lower()},
        )
    if status >= 500:
        cid = new_correlation_id()
        return JSONResponse(
            internal_envelope(cid, path[:64], transport="http"), status_code=status, headers={CORRELATION_HEADER: cid}
        )
    return _refusal(
        status,
        f"{where} was refused (HTTP {status}).",
        f"Problem: the HTTP request was refused. Cause: this server serves {SERVED}. Fix: send MCP "
        "messages as POST /mcp with `Content-Type: application/json` and "
        "`Accept: application/json, text/event-stream`.",
        "The request does not match what the MCP endpoint accepts.",
    )


def _too_large() -> Response:
    return _refusal(
        413,
        f"The request body is larger than {MAX_REQUEST_BYTES} bytes.",
        f"Problem: the request body exceeds the server's limit of {MAX_REQUEST_BYTES} bytes "
        f"({MAX_REQUEST_BYTES // (1024 * 1024)} MiB). Cause: one request carries one MCP message, and "
        "no tool takes that much text (a page body holds at most 350 KB). Fix: split the content, "
        "e.g. one put_page per section linked with [[slug]] mentions.",
        "Send less in one request: split long text into several pages or facts.",
        detail={"max_bytes": MAX_REQUEST_BYTES},
    )


def _bad_content_type(where: str = "POST /mcp") -> Response:
    return _refusal_of(400, not_json_error(where))


#: DNS-rebinding protection for a loopback bind: what the SDK turns on by itself for such a host,
#: stated here so the SDK (on /mcp) and the guard (on every route) check the same lists.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
LOOPBACK_SECURITY = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
)

#: Every protocol version POST /mcp serves (both eras).
SERVED_PROTOCOL_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_ID_KINDS = {dict: "an object", list: "an array", bool: "a boolean", float: "a number with a fraction or exponent"}


def _jsonrpc_error(request_id: Any, code: int, message: str, data: Any = None) -> Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return JSONResponse(body, status_code=ERROR_CODE_HTTP_STATUS.get(code, 200))


def _valid_id(value: Any) -> bool:
    """MCP: a request id is a string or an integer, never null (the SDK drops `1.0` as well)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def jsonrpc_refusal(raw: bytes, headers: Mapping[str, str]) -> Response | None:
    """The JSON-RPC error for a POST /mcp body the SDK would drop or explain badly, else None
    (then the SDK answers, including malformed JSON: -32700)."""
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if _SURROGATE_ESCAPE.search(raw):
        where = unencodable_path(message)
        if where is not None:
            at = where if isinstance(message, dict | list) else "the body"
            return _jsonrpc_error(
                None,
                types.PARSE_ERROR,
                f"Parse error: the string at {at} holds an unpaired UTF-16 surrogate escape (a \\ud800-"
                "\\udfff escape without its partner), which is not Unicode text. Send the text as UTF-8, "
                "write a character beyond U+FFFF as a surrogate pair (e.g. \\ud83d\\ude00), or replace "
                "the broken character with U+FFFD.",
                {"reason": "unpaired_surrogate", "path": at},
            )
    if not isinstance(message, dict):
        return None  # a batch or a bare value: the SDK's Invalid Request
    if "id" in message and not _valid_id(message["id"]):
        kind = "null" if message["id"] is None else _ID_KINDS.get(type(message["id"]), "not a string")
        return _jsonrpc_error(
            None,
            types.INVALID_REQUEST,
            f"Invalid Request: the request id is {kind}; an MCP request id is a string or an integer "
            '(never null, a boolean, an object, an array or a number like 1.5 or 1.0). Send e.g. "id": 1, or leave '
            "the id out for a notification.",
        )
    request_id = message.get("id")
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    if version is not None and version not in SERVED_PROTOCOL_VERSIONS:
        return _jsonrpc_error(
            request_id,
            types.UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported protocol version {version[:40]!r} in the MCP-Protocol-Version header. This "
            f"server speaks {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)} (initialize handshake) and "
            f"{', '.join(MODERN_PROTOCOL_VERSIONS)} (stateless: server/discover, _meta on every "
            "request). Send one of these, or leave the header out before the handshake.",
            {"supported": list(SERVED_PROTOCOL_VERSIONS), "requested": version},
        )
    if version in MODERN_PROTOCOL_VERSIONS and message.get("method") == "initialize":
        return _jsonrpc_error(
            request_id,
            types.METHOD_NOT_FOUND,
            f"Method not found: initialize is not a method of protocol {version}, which has no handshake. "
            "A client of that era starts with server/discover and sends params._meta (protocol version "
            "and client capabilities) on every request; a handshake client sends initialize with "
            f"MCP-Protocol-Version {HANDSHAKE_PROTOCOL_VERSIONS[-1]} (or without that header).",
            "initialize",
        )
    return None


async def _read_body(receive: Receive) -> tuple[bytes, list[Message]] | None:
    """The whole request body and the messages to replay it with, or None past MAX_REQUEST_BYTES."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), [
                {"type": "http.request", "body": b"".join(chunks), "more_body": True}, message
            ]
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


class _EdgeGuard:
    """Pure-ASGI guard in front of the app: on every path Host (421) and Origin (403) when
    DNS-rebinding protection is on; on POST /mcp method (405), Accept (406), Content-Type (400),
    body size (413), authentication (401) and `jsonrpc_refusal`; on /v1 Content-Type for POST (400),
    size and authentication; on every path, any non-2xx answer from below that is not JSON
    (Starlette's 404/405, the SDK's 413/421 texts) becomes the envelope."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        caller_from_request: CallerFromRequest,
        public_url: str | None,
        token_command: Sequence[str] = DEFAULT_TOKEN_COMMAND,
        token_inputs: Sequence[Mapping[str, str]] = (),
        limiter: anyio.CapacityLimiter | None = None,
        security: TransportSecuritySettings | None = None,
    ) -> None:
        self.app = app
        protect = security is not None and security.enable_dns_rebinding_protection
        self.security = TransportSecurityMiddleware(security) if protect else None
        self.caller_from_request = caller_from_request
        self.public_url = public_url
        self.token_command = tuple(token_command)
        self.token_inputs = tuple(token_inputs)
        self.limiter = limiter

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
        if path.rstrip("/") != MCP_PATH:
            await self.app(scope, receive, _enveloped(scope, receive, send))
            return
        if request.method != "POST":
            await _refusal(
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
            await _refusal(
                406,
                "POST /mcp needs `Accept: application/json, text/event-stream`.",
                "Problem: the Accept header does not list both media types. Cause: streamable HTTP "
                "clients must accept JSON and event-stream responses. Fix: send "
                "`Accept: application/json, text/event-stream`.",
                "Send `Accept: application/json, text/event-stream` with every POST /mcp.",
            )(scope, receive, send)
            return
        if not is_json_content_type(request.headers.get("content-type", "")):
            await _bad_content_type()(scope, receive, send)
            return
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
            await _too_large()(scope, receive, send)
            return
        if not await self._authenticate(scope, receive, send, request):
            return
        body = await _read_body(receive)  # a body without Content-Length is counted as it streams
        if body is None:
            await _too_large()(scope, receive, send)
            return
        raw, messages = body
        replay = _replay(messages, receive)
        refusal = jsonrpc_refusal(raw, request.headers)
        if refusal is not None:
            await refusal(scope, replay, send)
            return
        await self.app(scope, replay, _enveloped(scope, replay, send))

    async def _v1(self, scope: Scope, receive: Receive, send: Send, request: Request) -> None:
        """`/v1/...`: JSON bodies only, the size limit and the same bearer authentication as /mcp,
        then the routes."""
        if request.method == "POST" and not is_json_content_type(request.headers.get("content-type", "")):
            await _bad_content_type(f"POST {request.url.path[:200]}")(scope, receive, send)
            return
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
            await _too_large()(scope, receive, send)
            return
        if await self._authenticate(scope, receive, send, request):
            await self.app(scope, receive, _enveloped(scope, receive, send))

    async def _authenticate(self, scope: Scope, receive: Receive, send: Send, request: Request) -> bool:
        """Puts the caller in the scope and returns True, or answers 401 and returns False."""
        presented = bool(request.headers.get("authorization"))
        try:
            caller = await anyio.to_thread.run_sync(self.caller_from_request, request, limiter=self.limiter)
        except Exception as exc:
            log.error("authentication failed", extra={"event": "auth_error", "exc_type": type(exc).__name__})
            caller = None
        if caller is None:
            base = public_base_url(request, self.public_url)
            cid = new_correlation_id()
            body = build_envelope(
                unauthorized_error(
                    token_presented=presented, token_command=self.token_command, inputs=self.token_inputs
                ),
                tool="",
                arguments={},
                correlation_id=cid,
                transport="http",
            )
            challenge = f'Bearer resource_metadata="{resource_metadata_url(base)}"'
            if presented:
                challenge += ', error="invalid_token"'
            with correlation(cid):
                log.info("unauthorized", extra={"event": "unauthorized", "token_presented": presented})
            headers = {"WWW-Authenticate": challenge, CORRELATION_HEADER: cid}
            await JSONResponse(body, status_code=401, headers=headers)(scope, receive, send)
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
                refusal = status_refusal(status, scope.get("method", ""), scope.get("path", ""), headers)
                await refusal(scope, receive, send)
                return
        elif replaced:
            return  # the replaced answer's own body
        await send(message)

    return wrapped


def build_mcp_app(
    deps_factory: Callable[[], Deps] | None,
    *,
    surface: Surface = "full",
    caller_from_request: CallerFromRequest,
    behind_gateway: bool = False,
    invoker: Invoker | None = None,
    authorization_server: str | None = None,
    public_url: str | None = None,
    host: str = "127.0.0.1",
    token_command: Sequence[str] = DEFAULT_TOKEN_COMMAND,
    token_inputs: Sequence[Mapping[str, str]] = (),
    call_threads: int | None = None,
) -> Starlette:
    """A Starlette app serving POST /mcp (both eras), /health and the protected-resource document.

    `token_command` is the command a 401's fix names (it must mint a token in the store this server
    reads); `token_inputs` names any `<placeholder>` in it (AGENT_OPERATOR `inputs`).

    `invoker` defaults to an `InProcessInvoker` over `deps_factory`. Behind API Gateway, DNS-rebinding
    protection is off (the gateway's Host header is not localhost); locally it is on.
    The SDK's session manager runs once per app: a host keeps the app's lifespan open for as long
    as it serves (the Lambda edge does so for the life of its sandbox, `aws_lambda.edge`).

    `call_threads` bounds the worker threads that authenticate and run calls at once (None:
    anyio's default of 40). On a GIL-bound server more threads than cores mostly contend: with 32
    clients on two cores, 8 threads served a mixed load faster than 40 (README, "Fleet
    throughput"); calls beyond the bound wait their turn, none is refused."""
    if invoker is None:
        if deps_factory is None:
            raise ValueError("build_mcp_app needs deps_factory or invoker")
        invoker = InProcessInvoker(deps_factory, surface=surface)
    limiter = anyio.CapacityLimiter(call_threads) if call_threads else None
    server = build_mcp_server(
        invoker, surface=surface, limiter=limiter, token_command=token_command, token_inputs=token_inputs
    )

    async def health(request: Request) -> Response:
        return JSONResponse(
            {
                "status": "ok",
                "server": SERVER_NAME,
                "version": fleetmem.__version__,
                "protocol_version": PROTOCOL_VERSION,
                "surface": surface,
            }
        )

    async def protected_resource(request: Request) -> Response:
        base = public_base_url(request, public_url)
        return JSONResponse(protected_resource_document(base, authorization_server))

    async def v1_tools(request: Request) -> Response:
        doc = tools_document(surface, request.scope.get(CALLER_SCOPE_KEY))
        return JSONResponse(doc, headers={CORRELATION_HEADER: new_correlation_id()})

    async def v1_openapi(request: Request) -> Response:
        doc = openapi_document(surface, server_url=public_base_url(request, public_url))
        return JSONResponse(doc, headers={CORRELATION_HEADER: new_correlation_id()})

    async def v1_call(request: Request) -> Response:
        return await call_v1(request, invoker, surface, limiter, token=(token_command, token_inputs))

    security: TransportSecuritySettings | None = None  # off on another bind, as the SDK has it
    if behind_gateway:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    elif host in LOOPBACK_HOSTS:
        security = LOOPBACK_SECURITY
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=security,
        host=host,
        max_request_body_size=MAX_REQUEST_BYTES,
        custom_starlette_routes=[
            Route(HEALTH_PATH, health, methods=["GET"]),
            Route(PRM_PATH, protected_resource, methods=["GET"]),
            Route(PRM_MCP_PATH, protected_resource, methods=["GET"]),
            Route(TOOLS_PATH, v1_tools, methods=["GET"]),
            Route(OPENAPI_PATH, v1_openapi, methods=["GET"]),
            Route(V1_TOOL_PATH, v1_call, methods=["POST"]),
        ],
    )
    app.add_middleware(
        _EdgeGuard,
        caller_from_request=caller_from_request,
        public_url=public_url,
        token_command=token_command,
        token_inputs=token_inputs,
        limiter=limiter,
        security=security,
    )
    return app


async def call_v1(
    request: Request,
    invoker: Invoker,
    surface: Surface,
    limiter: anyio.CapacityLimiter | None = None,
    token: tuple[Sequence[str], Sequence[Mapping[str, str]]] = (DEFAULT_TOKEN_COMMAND, ()),
) -> Response:
    """`POST /v1/<tool>` on an authenticated request: `http_api.answer_v1` over the same gate and
    invoker as MCP tools/call, on a worker thread (`limiter` bounds them)."""
    tool = request.path_params.get("tool", "")
    caller: Caller = request.scope[CALLER_SCOPE_KEY]
    raw = await request.body()
    if len(raw) > MAX_REQUEST_BYTES:
        return _too_large()

    def call(tool: str, arguments: Any, caller: Caller, cid: str) -> DispatchResult:
        gate = precheck(
            tool, arguments, caller, surface=surface, correlation_id=cid, transport="http",
            token_command=token[0], token_inputs=token[1],
        )
        return gate if gate is not None else invoker.invoke(tool, arguments, caller, cid)

    answer = partial(answer_v1, tool, raw, caller, call, surface=surface)
    return _v1_response(*await anyio.to_thread.run_sync(answer, limiter=limiter))


def _v1_response(status: int, body: dict[str, Any], headers: dict[str, str]) -> Response:
    return Response(render_json(body), status_code=status, headers=headers, media_type="application/json")


# ---------------------------------------------------------------------------------------------
# Who is calling


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization") or ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def bearer_caller(auth_factory: Callable[[], Auth]) -> CallerFromRequest:
    """Local server: the token is verified through the `Auth` port on every request (the token
    store has no cache), so tokens created or revoked by the CLI while the server runs take effect
    at once."""

    def caller(request: Request) -> Caller | None:
        token = bearer_token(request)
        if token is None:
            return None
        return auth_factory().verify(token)

    return caller


def gateway_caller(request: Request) -> Caller | None:
    """Behind API Gateway: the caller from the authorizer context of the event the edge handler put
    in the ASGI scope as `aws.event` (see `fleetmem.transport.gateway`)."""
    return caller_from_authorizer(request.scope.get("aws.event"))
