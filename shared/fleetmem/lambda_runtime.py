"""Lambda glue: everything the thin handlers in `functions/` share.

- `get_deps()` — the process's Deps from the environment (`Settings.from_env`, `wiring.build_deps`),
  built on first use and reused by warm invocations.
- `caller_from_authorizer(event)` — the authenticated caller, read ONLY from the API Gateway
  authorizer context (the Lambda authorizer put tenant, client_id and scopes there).
- `handle_tool_event(event, tools)` — a tool function's whole job: the edge's invoke payload
  (`{tool, arguments, caller, correlation_id}`) or a direct `POST /v1/<tool>` proxy event.
- `handle_edge_event(event)` — the MCP edge: a REST proxy event through a fresh ASGI app.
- `authorize(event)` — the REQUEST authorizer (API token or Cognito access token).
- `handle_stream_batch(event, context)` — DynamoDB stream records into the search index.
- `run_heartbeat(payload)` — scheduled delta delivered to SQS or an EventBridge bus.

Imports of the MCP SDK, Powertools and boto3 happen inside the functions that need them, so a verb
function never pays for the SDK the edge uses and nothing connects at import.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any, cast

from fleetmem.config import Settings
from fleetmem.errors import VerbError
from fleetmem.lambda_routes import tool_functions_from_env
from fleetmem.models import Caller, Cursor
from fleetmem.ports import Deps
from fleetmem.protocol import SCOPES, Scope
from fleetmem.transport.gateway import caller_from_authorizer

log = logging.getLogger("fleetmem.lambda")

#: HTTP status for each envelope code on the plain `/v1/<tool>` route (MCP always answers 200).
HTTP_STATUS = {
    "invalid_params": 400,
    "provenance_required": 400,
    "budget_unsatisfiable": 400,
    "unauthorized": 401,
    "scope_denied": 403,
    "not_found": 404,
    "unknown_tool": 404,
    "rate_limited": 429,
    "internal": 500,
    "unavailable": 503,
}
NOTICES_HEADER = "Fleetmem-Notices"
#: Where a handler's log lines find the call's correlation id (Powertools `correlation_id_path`,
#: JMESPath): the edge's invoke payload, else API Gateway's request id.
CORRELATION_PATH = "correlation_id || requestContext.requestId"


# ---------------------------------------------------------------------------------------------
# process-wide state


@functools.lru_cache(maxsize=1)
def settings() -> Settings:
    return Settings.from_env()


def get_deps() -> Deps:
    from fleetmem.wiring import build_deps

    return build_deps(settings())


def reset() -> None:
    """Forget cached settings and invokers (tests change the environment between cases)."""
    for cached in (settings, _edge_invoker, _cognito_verifier, _delivery):
        getattr(cached, "cache_clear", lambda: None)()


# ---------------------------------------------------------------------------------------------
# API Gateway REST proxy events


def is_proxy_event(event: Mapping[str, Any]) -> bool:
    return "requestContext" in event and "httpMethod" in event


def event_body(event: Mapping[str, Any]) -> bytes:
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        return base64.b64decode(body)
    return body.encode() if isinstance(body, str) else bytes(body)


def event_headers(event: Mapping[str, Any]) -> dict[str, str]:
    """Lower-cased single-value headers (multi-value headers joined the HTTP way)."""
    out: dict[str, str] = {}
    for k, v in (event.get("multiValueHeaders") or {}).items():
        if v:
            out[k.lower()] = ", ".join(v)
    for k, v in (event.get("headers") or {}).items():
        if v is not None:
            out[k.lower()] = v
    return out


def proxy_response(status: int, body: Any, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": text,
        "isBase64Encoded": False,
    }


def gateway_error_body(code: str, message: str, *, correlation_id: str) -> dict[str, Any]:
    """The body API Gateway itself answers with (gateway responses: 401 before any function runs,
    429 from usage plans), in the protocol's envelope shape. CDK renders it with
    `correlation_id="$context.requestId"`."""
    from fleetmem.protocol import CONTRACT_VERSION, PROTOCOL_VERSION

    retryable = code == "rate_limited"
    suggestion = (
        "Wait, then retry the same call; this client's rate limit or daily quota is used up."
        if retryable
        else "Send `Authorization: Bearer <token>` with a valid fleetmem API token or Cognito access "
        "token; the operator mints one with `fleetmem token create --backend aws`."
    )
    return {
        "error": code,
        "code": code,
        "message": message,
        "suggestion": suggestion,
        "class": "retryable" if retryable else "caller",
        "retryable": retryable,
        "protocol_version": PROTOCOL_VERSION,
        "contract_version": CONTRACT_VERSION,
        "correlation_id": correlation_id,
    }


def www_authenticate(base_url: str) -> str:
    """The 401 challenge: where the protected-resource metadata (and so the token issuer) is."""
    return f'Bearer realm="fleetmem", resource_metadata="{base_url}/.well-known/oauth-protected-resource/mcp"'


def _correlation_id(event: Mapping[str, Any]) -> str | None:
    """API Gateway's request id: the same id is in the access log, so one search finds both."""
    return (event.get("requestContext") or {}).get("requestId") or None


# ---------------------------------------------------------------------------------------------
# tool functions (one per verb; `pages` and `admin` serve several tools)


def handle_tool_event(
    event: Mapping[str, Any], tools: Iterable[str], deps: Deps | None = None
) -> dict[str, Any]:
    """Serve one call for a function that owns `tools`: the edge's invoke payload, or a
    `POST /v1/<tool>` proxy event. A tool this function does not own is `unknown_tool`."""
    owned = frozenset(tools)
    if is_proxy_event(event):
        return _handle_v1(event, owned, deps)
    from fleetmem.transport.invoker import handle_invoke_payload

    if event.get("tool") not in owned:
        # The edge routes by the same table; anything else is a misrouted or forged payload.
        return _unknown_tool_json(str(event.get("tool") or ""), event.get("correlation_id"))
    return handle_invoke_payload(event, deps or get_deps())


def _unknown_tool_json(tool: str, correlation_id: str | None) -> dict[str, Any]:
    from fleetmem.transport.dispatch import DispatchResult
    from fleetmem.transport.logs import new_correlation_id

    cid = correlation_id or new_correlation_id()
    body = _envelope(
        VerbError(
            "unknown_tool",
            "This function does not serve that tool.",
            "Call tools/list and use one of the tools it names.",
        ),
        tool=tool,
        arguments={},
        correlation_id=cid,
        transport="mcp",
    )
    return DispatchResult(body, True, [], cid).to_json()


def _envelope(err: VerbError, **kw: Any) -> dict[str, Any]:
    from fleetmem.memory.envelope import build_envelope

    return build_envelope(err, **kw)


def _handle_v1(event: Mapping[str, Any], owned: frozenset[str], deps: Deps | None) -> dict[str, Any]:
    from fleetmem.memory.envelope import render_notice_meta
    from fleetmem.transport.dispatch import dispatch
    from fleetmem.transport.logs import new_correlation_id

    cid = _correlation_id(event) or new_correlation_id()
    tool = (event.get("pathParameters") or {}).get("tool") or str(event.get("path") or "").rstrip("/").rsplit(
        "/", 1
    )[-1]
    if event.get("httpMethod") != "POST":
        return proxy_response(405, {"error": "method_not_allowed", "message": "Use POST."}, {"Allow": "POST"})
    caller = caller_from_authorizer(event)
    if caller is None:
        body = _envelope(
            VerbError(
                "unauthorized",
                "No authenticated caller reached this function.",
                "Send `Authorization: Bearer <token>` with a valid fleetmem credential.",
            ),
            tool=tool,
            arguments={},
            correlation_id=cid,
            transport="http",
        )
        return proxy_response(401, body, {"WWW-Authenticate": 'Bearer realm="fleetmem"'})
    if tool not in owned:
        body = _envelope(
            VerbError(
                "unknown_tool",
                f"No tool {tool[:64]!r} at this route.",
                "POST to /v1/<tool> with a tool name from tools/list.",
            ),
            tool=tool,
            arguments={},
            correlation_id=cid,
            transport="http",
        )
        return proxy_response(404, body)
    raw = event_body(event)
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except ValueError:
        body = _envelope(
            VerbError(
                "invalid_params",
                "The request body is not valid JSON.",
                "Send the tool's arguments as one JSON object.",
            ),
            tool=tool,
            arguments={},
            correlation_id=cid,
            transport="http",
        )
        return proxy_response(400, body)
    result = dispatch(
        tool,
        arguments,
        caller,
        deps or get_deps(),
        surface=settings().surface,
        correlation_id=cid,
        transport="http",
    )
    headers = {"X-Correlation-Id": result.correlation_id}
    if result.notices:
        headers[NOTICES_HEADER] = json.dumps(
            [render_notice_meta(n, "http") for n in result.notices], ensure_ascii=True
        )
    status = HTTP_STATUS.get(str(result.body.get("code")), 500) if result.is_error else 200
    return proxy_response(status, result.body, headers)


# ---------------------------------------------------------------------------------------------
# the MCP edge


@functools.lru_cache(maxsize=1)
def _edge_invoker() -> Any:
    from fleetmem.transport.invoker import LambdaInvoker

    table = tool_functions_from_env()
    return LambdaInvoker(
        lambda tool: table[tool], surface=settings().surface, region=settings().region or None
    )


def handle_edge_event(event: Mapping[str, Any], *, invoker: Any = None) -> dict[str, Any]:
    """A REST proxy event through a freshly built MCP app (the SDK's session manager runs once
    per app instance, so each invocation gets its own; building it costs a few ms)."""
    import anyio

    return anyio.run(_edge_async, event, invoker or _edge_invoker())


def public_url(event: Mapping[str, Any]) -> str:
    configured = os.environ.get("FLEETMEM_PUBLIC_URL")
    if configured:
        return configured.rstrip("/")
    ctx = event.get("requestContext") or {}
    host = ctx.get("domainName") or event_headers(event).get("host") or "localhost"
    stage = ctx.get("stage")
    # execute-api hostnames carry the stage in the path; custom domains map it away.
    if stage and ".execute-api." in host:
        return f"https://{host}/{stage}"
    return f"https://{host}"


async def _edge_async(event: Mapping[str, Any], invoker: Any) -> dict[str, Any]:
    from fleetmem.transport.mcp_app import build_mcp_app, gateway_caller

    s = settings()
    app = build_mcp_app(
        None,
        surface=s.surface,
        invoker=invoker,
        behind_gateway=True,
        caller_from_request=gateway_caller,
        authorization_server=s.authorization_server or None,
        public_url=public_url(event),
    )
    async with app.router.lifespan_context(app):
        return await call_asgi(app, event)


async def call_asgi(app: Callable[..., Any], event: Mapping[str, Any]) -> dict[str, Any]:
    """Run one REST proxy event through an ASGI app and shape the proxy response."""
    import anyio

    headers = event_headers(event)
    path = str(event.get("path") or "/")
    query = event.get("multiValueQueryStringParameters") or {
        k: [v] for k, v in (event.get("queryStringParameters") or {}).items()
    }
    from urllib.parse import urlencode

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": str(event.get("httpMethod") or "POST").upper(),
        "scheme": "https",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": urlencode(query, doseq=True).encode(),
        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
        "client": (
            ((event.get("requestContext") or {}).get("identity") or {}).get("sourceIp") or "0.0.0.0",  # noqa: S104
            0,
        ),
        "server": (headers.get("host", "lambda"), 443),
        "aws.event": event,
    }
    body = event_body(event)
    sent_body = False
    done = anyio.Event()
    status = 500
    out_headers: dict[str, str] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()  # the client "disconnects" only once the response is complete
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
            for k, v in message.get("headers") or []:
                name = k.decode("latin-1")
                if name.lower() != "content-length":
                    out_headers[name] = v.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body") or b"")
            if not message.get("more_body"):
                done.set()

    await app(scope, receive, send)
    done.set()
    raw = b"".join(chunks)
    try:
        return {"statusCode": status, "headers": out_headers, "body": raw.decode(), "isBase64Encoded": False}
    except UnicodeDecodeError:
        return {
            "statusCode": status,
            "headers": out_headers,
            "body": base64.b64encode(raw).decode(),
            "isBase64Encoded": True,
        }


# ---------------------------------------------------------------------------------------------
# the REQUEST authorizer


class Unauthorized(Exception):
    """Raised to make API Gateway answer 401 (the message must be exactly "Unauthorized")."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


class CognitoVerifier:
    """Cognito access tokens: RS256 signature against the pool's JWKS (keys cached by PyJWT),
    issuer, expiry, `token_use == "access"`, a configured app client, and at least one of this
    API's scopes."""

    def __init__(
        self,
        issuer: str,
        clients: Mapping[str, Mapping[str, str]],
        resource_server: str,
        *,
        jwks_url: str | None = None,
    ) -> None:
        import jwt

        self.issuer = issuer.rstrip("/")
        self.clients = clients
        self.resource_server = resource_server
        self.jwks = jwt.PyJWKClient(
            jwks_url or f"{self.issuer}/.well-known/jwks.json", cache_keys=True, lifespan=3600, timeout=3
        )

    def verify(self, token: str) -> Caller | None:
        import jwt

        try:
            key = self.jwks.get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=["RS256"],
                issuer=self.issuer,
                options={"require": ["exp", "iss", "token_use", "client_id"], "verify_aud": False},
            )
        except jwt.PyJWTError as exc:
            log.info("jwt rejected", extra={"event": "jwt_rejected", "exc_type": type(exc).__name__})
            return None
        if claims.get("token_use") != "access":
            return None
        mapped = self.clients.get(str(claims.get("client_id")))
        if not mapped:
            return None
        prefix = f"{self.resource_server}/"
        scopes = frozenset(
            s[len(prefix) :]
            for s in str(claims.get("scope") or "").split()
            if s.startswith(prefix) and s[len(prefix) :] in SCOPES
        )
        if not scopes:
            return None
        return Caller(
            tenant=mapped["tenant"], client_id=mapped["client_id"], scopes=cast(frozenset[Scope], scopes), remote=True
        )


@functools.lru_cache(maxsize=1)
def _cognito_verifier() -> CognitoVerifier | None:
    issuer = os.environ.get("FLEETMEM_COGNITO_ISSUER", "")
    if not issuer:
        return None
    raw = json.loads(os.environ.get("FLEETMEM_COGNITO_CLIENTS") or "[]")
    clients = {c["app_client_id"]: {"tenant": c["tenant"], "client_id": c["client_id"]} for c in raw}
    return CognitoVerifier(issuer, clients, os.environ.get("FLEETMEM_COGNITO_RESOURCE_SERVER", "fleetmem"))


def verify_credential(token: str, deps: Deps) -> Caller | None:
    """An `fm_…` API token (SHA-256 lookup in the clients table) or a Cognito access token."""
    from fleetmem.tokens import looks_like_token, verify_token

    if looks_like_token(token):
        return verify_token(deps.clients, token, deps.clock.now())
    if token.count(".") == 2:
        verifier = _cognito_verifier()
        return verifier.verify(token) if verifier else None
    return None


def usage_key_for(client_id: str) -> str | None:
    """The API Gateway usage-plan key of this client (its own, else the shared default), read from
    Secrets Manager and cached by Powertools for five minutes."""
    secrets = json.loads(os.environ.get("FLEETMEM_USAGE_KEY_SECRETS") or "{}")
    arn = secrets.get(client_id) or secrets.get("*")
    if not arn:
        return None
    from aws_lambda_powertools.utilities import parameters

    return str(parameters.get_secret(arn, max_age=300))


def authorize(event: Mapping[str, Any], deps: Deps | None = None) -> dict[str, Any]:
    """REQUEST authorizer: an Allow policy for every route of this API stage, with context
    `{tenant, client_id, scopes}` and the caller's usage key; raises `Unauthorized` otherwise."""
    from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
        APIGatewayAuthorizerRequestEvent,
        APIGatewayAuthorizerResponse,
    )

    request = APIGatewayAuthorizerRequestEvent(dict(event))
    header = request.headers.get("authorization") or ""
    scheme, _, token = header.partition(" ")
    caller = None
    if scheme.lower() == "bearer" and token.strip():
        caller = verify_credential(token.strip(), deps or get_deps())
    if caller is None:
        _count_denial()
        raise Unauthorized()
    arn = request.parsed_arn
    response = APIGatewayAuthorizerResponse(
        principal_id=f"{caller.tenant}/{caller.client_id}",
        region=arn.region,
        aws_account_id=arn.aws_account_id,
        api_id=arn.api_id,
        stage=arn.stage,
        context={
            "tenant": caller.tenant,
            "client_id": caller.client_id,
            "scopes": " ".join(sorted(caller.scopes)),
        },
        usage_identifier_key=usage_key_for(caller.client_id),
        partition=arn.partition,
    )
    # The result is cached per Authorization header, so it must cover every route of the stage.
    response.allow_all_routes()
    return response.asdict()


def _count_denial() -> None:
    from aws_lambda_powertools import Metrics
    from aws_lambda_powertools.metrics import MetricUnit

    metrics = Metrics()
    metrics.add_metric(name="AuthorizerDenied", unit=MetricUnit.Count, value=1)
    metrics.flush_metrics()


# ---------------------------------------------------------------------------------------------
# the stream indexer


def handle_stream_batch(event: Mapping[str, Any], context: Any, deps: Deps | None = None) -> dict[str, Any]:
    """DynamoDB stream records -> search index through Powertools' BatchProcessor, which reports
    the failed records (`batchItemFailures`) so only they — and what follows them on the shard —
    are retried. Each record goes through the AWS adapter's `handle_batch`, so documents are built
    by the domain's indexing exactly as the local backend builds them."""
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    from fleetmem.adapters.aws.stream import handle_batch

    d = deps or get_deps()

    def index_record(record: Any) -> None:
        result = handle_batch([sdk_shaped_record(record.raw_event)], index=d.search, embedder=d.embedder)
        if result.failed:
            raise RecordNotIndexed()

    processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)
    return dict(
        process_partial_response(
            event=dict(event), record_handler=index_record, processor=processor, context=context
        )
    )


def sdk_shaped_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A stream record as Lambda delivers it (JSON: binary attributes base64-encoded) -> the shape
    the DynamoDB SDK returns (binary as bytes), which the adapters' item readers expect."""
    out = dict(record)
    ddb = dict(out.get("dynamodb") or {})
    for image in ("Keys", "NewImage", "OldImage"):
        if isinstance(ddb.get(image), Mapping):
            ddb[image] = {k: _binary_to_bytes(v) for k, v in ddb[image].items()}
    out["dynamodb"] = ddb
    return out


def _binary_to_bytes(value: Any) -> Any:
    if not isinstance(value, Mapping) or len(value) != 1:
        return value
    ((kind, inner),) = value.items()
    if kind == "B" and isinstance(inner, str):
        return {"B": base64.b64decode(inner)}
    if kind == "BS" and isinstance(inner, list):
        return {"BS": [base64.b64decode(x) if isinstance(x, str) else x for x in inner]}
    if kind == "M" and isinstance(inner, Mapping):
        return {"M": {k: _binary_to_bytes(v) for k, v in inner.items()}}
    if kind == "L" and isinstance(inner, list):
        return {"L": [_binary_to_bytes(v) for v in inner]}
    return value


class RecordNotIndexed(Exception):
    """A stream record whose index operations failed (reported back for retry, then DLQ)."""


# ---------------------------------------------------------------------------------------------
# heartbeat


HEARTBEAT_SOURCE = "fleetmem.heartbeat"
HEARTBEAT_DETAIL_TYPE = "fleetmem.delta"
#: Nothing delivered and nothing dropped: the cursor moves to now minus this, which covers writes
#: still in flight when the delta ran (PROTOCOL_NOTES §8).
IN_FLIGHT_MARGIN = timedelta(seconds=2)


class Delivery:
    """Sends one heartbeat message to its destination; raises on failure (nothing advances then)."""

    def __init__(self, *, sqs: Any = None, events: Any = None) -> None:
        self._sqs = sqs
        self._events = events

    def _client(self, name: str) -> Any:
        current = getattr(self, f"_{name}")
        if current is None:
            from fleetmem.adapters.aws import sdk_client

            current = sdk_client(name, region=settings().region)
            setattr(self, f"_{name}", current)
        return current

    def send(self, destination: Mapping[str, Any], message: Mapping[str, Any]) -> None:
        text = json.dumps(message, ensure_ascii=False)
        if destination.get("type") == "sqs":
            self._client("sqs").send_message(QueueUrl=destination["queue_url"], MessageBody=text)
            return
        if destination.get("type") == "https":
            detail = json.dumps({"destination": destination.get("name"), **message}, ensure_ascii=False)
            out = self._client("events").put_events(
                Entries=[
                    {
                        "Source": HEARTBEAT_SOURCE,
                        "DetailType": HEARTBEAT_DETAIL_TYPE,
                        "Detail": detail,
                        "EventBusName": destination["bus"],
                    }
                ]
            )
            if out.get("FailedEntryCount"):
                raise RuntimeError("the event bus refused the heartbeat event")
            return
        raise ValueError("unknown heartbeat destination type")


@functools.lru_cache(maxsize=1)
def _delivery() -> Delivery:
    return Delivery()


def run_heartbeat(
    payload: Mapping[str, Any], deps: Deps | None = None, delivery: Delivery | None = None
) -> dict[str, Any]:
    """One scheduled wake: run `delta` statelessly from the stored session cursor, deliver a
    non-empty result, and only then advance the cursor to what was delivered.

    At-least-once: if delivery fails the exception propagates (the platform retries) and the
    cursor stays put, so the same changes are delivered again; a cursor race with another wake
    is lost quietly (the other wake advanced it). First wake of a session: the cursor is created
    at now and nothing is delivered, exactly like `delta` with a new session_id."""
    from fleetmem.errors import Conflict
    from fleetmem.timefmt import iso, parse_iso
    from fleetmem.transport.dispatch import dispatch

    d = deps or get_deps()
    send = delivery or _delivery()
    tenant, client_id = str(payload["tenant"]), str(payload["client_id"])
    session_id = str(payload["session_id"])[:200]
    now = d.clock.now()
    cursor = d.cursors.get(tenant, client_id, session_id, now=now)
    if cursor is None:
        fresh = Cursor(
            tenant=tenant, client_id=client_id, session_id=session_id, since=now, slug="", touched_at=now
        )
        try:
            d.cursors.put(fresh, expected_version=None)
        except Conflict:
            pass  # another wake created it first; either way the session starts now
        return {"status": "established", "delivered": False}

    caller = Caller(tenant=tenant, client_id=client_id, scopes=frozenset({"read"}), remote=True)
    arguments: dict[str, Any] = {"since": iso(cursor.since), "since_slug": cursor.slug or None}
    if payload.get("budget_tokens"):
        arguments["budget_tokens"] = int(payload["budget_tokens"])
    result = dispatch("delta", arguments, caller, d, surface="verbs", transport="http")
    if result.is_error:
        # Leave the cursor; the next wake retries from the same place.
        log.warning(
            "heartbeat delta failed",
            extra={"event": "heartbeat_delta_error", "code": result.body.get("code")},
        )
        return {"status": "error", "code": result.body.get("code"), "delivered": False}
    body = result.body
    delivered = bool(body.get("pages") or body.get("facts") or body.get("threads"))
    if delivered:
        send.send(
            payload["destination"],
            {
                "tenant": tenant,
                "client_id": client_id,
                "session_id": session_id,
                "correlation_id": result.correlation_id,
                "delta": body,
            },
        )
        nxt = body.get("next_cursor") or {}
        new_since, new_slug, streak = parse_iso(nxt["since"]), nxt.get("slug") or "", 0
    elif body.get("has_more"):
        new_since, new_slug, streak = cursor.since, cursor.slug, cursor.incomplete_streak + 1
    else:
        new_since, new_slug, streak = max(cursor.since, now - IN_FLIGHT_MARGIN), cursor.slug, 0
        if new_since != cursor.since:
            new_slug = ""
    try:
        d.cursors.put(
            cursor.model_copy(
                update={"since": new_since, "slug": new_slug, "touched_at": now, "incomplete_streak": streak}
            ),
            expected_version=cursor.version,
        )
    except Conflict:
        log.info("heartbeat cursor moved concurrently", extra={"event": "heartbeat_cursor_race"})
    return {
        "status": "delivered" if delivered else ("incomplete" if body.get("has_more") else "empty"),
        "delivered": delivered,
        "next_cursor": {"since": iso(new_since), "slug": new_slug},
    }
