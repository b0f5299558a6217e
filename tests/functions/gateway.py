"""A local stand-in for API Gateway (which cannot run here), on 127.0.0.1: it routes like the
deployed REST API — `/mcp` to the edge handler, `/v1/<tool>` to the tool's handler, `/v1/tools`
and `/v1/openapi.json` to the edge, the health and OAuth metadata routes unauthenticated — calls
the REQUEST authorizer handler first on protected routes, answers the stack's 401 gateway response
when it denies, and passes the authorizer context in `requestContext.authorizer`, exactly the shape
the functions read in AWS.

`after_call` runs after each function call (the conformance test pumps DynamoDB streams into the
indexer there, so search sees writes the way it would once the stream caught up)."""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

import anyio
import uvicorn

from fleetmem.lambda_routes import function_group
from fleetmem.transport.aws_lambda.authorizer import Unauthorized
from fleetmem.transport.aws_lambda.proxy import gateway_error_body, www_authenticate

from .conftest import call

EDGE_V1 = {"/v1/tools", "/v1/openapi.json"}  # infra/constructs/edge.py: answered by the edge
PUBLIC = {"/health", "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"}


class Gateway:
    def __init__(self, *, stage: str = "dev", after_call: Callable[[], None] | None = None) -> None:
        self.stage = stage
        self.after_call = after_call or (lambda: None)
        self.base_url = ""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # -- routing -----------------------------------------------------------------------------
    def _route(self, path: str) -> tuple[str, str] | None:
        if path == "/mcp" or path in PUBLIC or path in EDGE_V1:
            return "mcp", path
        if path.startswith("/v1/"):
            tool = path.removeprefix("/v1/")
            try:
                return function_group(tool), "/v1/" + tool
            except KeyError:
                return None
        return None

    def _event(
        self,
        method: str,
        path: str,
        resource: str,
        headers: dict[str, str],
        body: bytes,
        authorizer: dict[str, Any] | None,
        request_id: str,
    ) -> dict[str, Any]:
        host = self.base_url.split("://", 1)[1]
        ctx: dict[str, Any] = {
            "resourcePath": resource,
            "httpMethod": method,
            "path": f"/{self.stage}{path}",
            "accountId": "123456789012",
            "protocol": "HTTP/1.1",
            "stage": self.stage,
            "requestId": request_id,
            "domainName": host,
            "apiId": "local",
            "identity": {"sourceIp": "127.0.0.1", "userAgent": headers.get("user-agent", "")},
        }
        if authorizer is not None:
            ctx["authorizer"] = authorizer
        try:
            text, b64 = body.decode(), False
        except UnicodeDecodeError:
            text, b64 = base64.b64encode(body).decode(), True
        return {
            "resource": resource,
            "path": path,
            "httpMethod": method,
            "headers": headers,
            "multiValueHeaders": {k: [v] for k, v in headers.items()},
            "queryStringParameters": None,
            "multiValueQueryStringParameters": None,
            "pathParameters": (
                {"tool": path.rsplit("/", 1)[-1]} if path.startswith("/v1/") and path not in EDGE_V1 else None
            ),
            "stageVariables": None,
            "requestContext": ctx,
            "body": text or None,
            "isBase64Encoded": b64,
        }

    def _authorize(self, headers: dict[str, str], method: str, resource: str) -> dict[str, Any] | None:
        if "authorization" not in headers:
            return None  # API Gateway answers 401 itself when the identity source is missing
        event = {
            "type": "REQUEST",
            "methodArn": f"arn:aws:execute-api:us-east-1:123456789012:local/{self.stage}/{method}{resource}",
            "resource": resource,
            "path": resource,
            "httpMethod": method,
            "headers": headers,
            "multiValueHeaders": {k: [v] for k, v in headers.items()},
            "queryStringParameters": {},
            "pathParameters": {},
            "stageVariables": {},
            "requestContext": {"stage": self.stage, "apiId": "local", "accountId": "123456789012"},
        }
        try:
            out = call("authorizer", event)
        except Unauthorized:
            return None
        return {**out.get("context", {}), "principalId": out["principalId"]}

    def _handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict, bytes]:
        request_id = str(uuid.uuid4())
        routed = self._route(path)
        if routed is None:
            return 403, {"content-type": "application/json"}, b'{"message":"Missing Authentication Token"}'
        group, resource = routed
        authorizer = None
        if path not in PUBLIC:
            authorizer = self._authorize(headers, method, resource)
            if authorizer is None:
                body_ = gateway_error_body(
                    "unauthorized",
                    "Missing, unknown, expired or revoked credential.",
                    correlation_id=request_id,
                )
                return (
                    401,
                    {"content-type": "application/json", "www-authenticate": www_authenticate(self.base_url)},
                    json.dumps(body_).encode(),
                )
        out = call(group, self._event(method, path, resource, headers, body, authorizer, request_id))
        self.after_call()
        raw = (
            base64.b64decode(out["body"]) if out.get("isBase64Encoded") else (out.get("body") or "").encode()
        )
        return int(out["statusCode"]), {k.lower(): v for k, v in (out.get("headers") or {}).items()}, raw

    # -- ASGI + server ------------------------------------------------------------------------
    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        status, out_headers, raw = await anyio.to_thread.run_sync(
            self._handle, scope["method"], scope["path"], headers, body
        )
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (k.encode(), str(v).encode())
                    for k, v in out_headers.items()
                    if k not in ("content-length", "transfer-encoding")
                ],
            }
        )
        await send({"type": "http.response.body", "body": raw})

    def start(self, port: int) -> str:
        self.base_url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(self, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        ready = threading.Event()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the gateway stand-in did not start")
            ready.wait(0.01)  # polling uvicorn's own readiness flag
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
