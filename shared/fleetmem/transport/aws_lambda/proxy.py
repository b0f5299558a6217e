"""API Gateway REST proxy events: body and headers in, proxy responses out, and the bridge that runs
one event through an ASGI app."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

from fleetmem.protocol import ErrorCode


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


#: The command a deployed stage's operator mints an API token with (named in 401 fixes).
AWS_TOKEN_COMMAND = (
    *("fleetmem", "token", "create", "--backend", "aws"),
    *("--client", "my-agent", "--scopes", "read,write"),
)
#: API Gateway's 403 (ACCESS_DENIED) when the authorizer denies a valid credential.
FORBIDDEN_MESSAGE = (
    "This credential is valid but maps to no tenant of this stage, or grants none of its allowed scopes."
)
#: Seconds a throttled caller is told to wait (API Gateway gives no Retry-After of its own).
GATEWAY_RETRY_AFTER_S = 1


#: Why API Gateway answered 429 without running a function, by gateway response type.
THROTTLE_WHY = "API Gateway throttles each client by its usage plan, and every route at the stage."
AUTHORIZER_BUSY_WHY = "The credential check could not run (the authorizer was throttled or failed); nothing was done."


def gateway_error_body(
    code: ErrorCode, message: str, *, correlation_id: str, why: str = THROTTLE_WHY
) -> dict[str, Any]:
    """The body API Gateway itself answers with (gateway responses: 401 before any function runs,
    429 from usage plans or the stage throttle), built by the one envelope
    builder. CDK renders it with `correlation_id="$context.requestId"`."""
    from fleetmem.contract.envelope import http_envelope
    from fleetmem.errors import Fix, VerbError
    from fleetmem.transport.refusals import unauthorized_error

    if code == "unauthorized":
        err = unauthorized_error(token_presented=True, token_command=AWS_TOKEN_COMMAND)
    elif code == "scope_denied":
        err = VerbError(
            code,
            message,
            "Ask the stage's operator to map your sign-in (issuer and subject) to a tenant and client "
            "with the scopes you need; nothing was done.",
            why="The credential is valid, but this stage maps it to no tenant, or it grants none of the "
            "scopes its mapping allows; a tenant is never guessed.",
            fix=Fix(why="Maps the person to a tenant and client of this stage.", actor="host_admin"),
        )
    else:
        err = VerbError(
            code,
            message,
            "Wait, then retry the same call; this client's rate limit or daily quota is used up.",
            why=why,
            fix=Fix(
                why="The same request once the rate limit allows it.",
                actor="provider",
                retry_after_seconds=GATEWAY_RETRY_AFTER_S,
            ),
            retryable=True,
        )
    return http_envelope(err, correlation_id=correlation_id).with_message(message).body()


def authorizer_busy_body(*, correlation_id: str) -> dict[str, Any]:
    """What API Gateway answers (503 `unavailable`, `Retry-After`) when the authorizer fails, times
    out or is throttled: the service could not check the credential; the caller is over no limit,
    so it is not a 429 (which means "this client's rate")."""
    from fleetmem.contract.envelope import http_envelope
    from fleetmem.errors import retry_later

    message = "The credential check could not run; retry shortly."
    err = retry_later(
        message,
        wait_s=GATEWAY_RETRY_AFTER_S,
        why=AUTHORIZER_BUSY_WHY,
        fix_why="The same request once the credential check answers.",
        reason="authorizer_unavailable",
        mcp=None,
    )
    return http_envelope(err, correlation_id=correlation_id).with_message(message).body()


def www_authenticate(base_url: str) -> str:
    """The 401 challenge (API Gateway's UNAUTHORIZED gateway response, one static header): the
    credential is missing or not valid here (`invalid_token`: unknown, expired, revoked, or a token
    for another resource or stage), where the protected-resource metadata (and so the authorization
    server) is, and the scopes to ask for (RFC 6750, RFC 9728)."""
    from fleetmem.contract.routes import PRM_MCP_PATH
    from fleetmem.protocol import SCOPES

    return (
        f'Bearer realm="fleetmem", error="invalid_token", '
        f'resource_metadata="{base_url}{PRM_MCP_PATH}", scope="{" ".join(SCOPES)}"'
    )


def request_id(event: Mapping[str, Any]) -> str | None:
    """API Gateway's request id: the same id is in the access log, so one search finds both."""
    return (event.get("requestContext") or {}).get("requestId") or None


async def call_asgi(
    app: Callable[..., Any], event: Mapping[str, Any], *, extra_scope: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Run one REST proxy event through an ASGI app and shape the proxy response (`extra_scope`:
    more keys for this request's ASGI scope)."""
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
        **(extra_scope or {}),
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
