"""A local stand-in for API Gateway (which cannot run here), on 127.0.0.1: it routes like the
deployed REST API — `/mcp` to the edge handler, `/v1/<tool>` to the tool's handler, `/v1/tools`
and `/v1/openapi.json` to the edge, the health and OAuth metadata routes unauthenticated — calls
the REQUEST authorizer handler first on protected routes, answers the stack's 401 gateway response
when it refuses a credential and its 403 (ACCESS_DENIED) when it answers Deny, and passes the
authorizer context in `requestContext.authorizer`, exactly the shape the functions read in AWS.

`invoke(group, event)` runs a function: by default the handler in this process (`conftest.call`);
the local stack (tests/stack) passes one that goes through the Lambda Invoke API to the function's
own Runtime Interface Emulator process, which reports an uncaught exception as `FunctionError`.
`authorizer_ttl_s` caches each Authorization header's Allow or Deny answer as API Gateway's authorizer
cache does (0: no cache). `after_call` runs after each function call (the conformance tests drain
DynamoDB streams into the indexer there — `StreamPump` — so search sees writes the way it would
once the stream caught up)."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import anyio
import uvicorn
from botocore.exceptions import ClientError

from fleetmem.lambda_routes import function_group
from fleetmem.transport.aws_lambda.authorizer import Unauthorized
from fleetmem.transport.aws_lambda.proxy import (
    FORBIDDEN_MESSAGE,
    GATEWAY_RETRY_AFTER_S,
    authorizer_busy_body,
    gateway_error_body,
    www_authenticate,
)

from .conftest import call

EDGE_V1 = {"/v1/tools", "/v1/openapi.json"}  # infra/constructs/edge.py: answered by the edge
PUBLIC = {"/health", "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"}


class FunctionError(Exception):
    """A function ended in an uncaught exception (the Invoke API's `X-Amz-Function-Error`)."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type, self.message = error_type, message


def _json_response(status: int, body: dict[str, Any]) -> tuple[int, dict, bytes]:
    return status, {"content-type": "application/json"}, json.dumps(body).encode()


#: where a cached answer keeps the authorizer's usage key (never passed on to a function)
USAGE_KEY = "__usage_key"
#: marks a cached Deny answer (the stack's ACCESS_DENIED gateway response, 403)
DENIED = "__denied"


class Gateway:
    def __init__(
        self,
        *,
        stage: str = "dev",
        after_call: Callable[[], None] | None = None,
        invoke: Callable[[str, dict[str, Any]], Any] = call,
        authorizer_ttl_s: float = 0,
        usage_keys: dict[str, str] | None = None,
    ) -> None:
        self.stage = stage
        #: API key value -> tier, the keys the stage's usage plans hold (API key source AUTHORIZER):
        #: an Allow whose `usageIdentifierKey` is not one of them is API Gateway's 403. None: not checked.
        self.usage_keys = usage_keys
        #: tier -> requests let through with that tier's key
        self.usage_by_tier: dict[str, int] = {}
        self.after_call = after_call or (lambda: None)
        self.invoke = invoke
        self.authorizer_ttl_s = authorizer_ttl_s
        #: The cache's clock (tests move it forward to pass the TTL without waiting).
        self.clock: Callable[[], float] = time.monotonic
        self._authorized: dict[str, tuple[float, dict[str, Any]]] = {}
        self.authorizer_calls = 0
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
        key = headers["authorization"]
        cached = self._authorized.get(key)
        if cached is not None and cached[0] > self.clock():
            return cached[1]
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
        self.authorizer_calls += 1
        try:
            out = self.invoke("authorizer", event)
        except Unauthorized:
            return None
        except FunctionError as exc:
            if exc.message == "Unauthorized":
                return None
            raise
        if any(st.get("Effect") == "Deny" for st in out.get("policyDocument", {}).get("Statement", [])):
            context = {DENIED: "1"}
            if self.authorizer_ttl_s > 0:
                self._authorized[key] = (self.clock() + self.authorizer_ttl_s, context)
            return context
        context = {**out.get("context", {}), "principalId": out["principalId"]}
        if out.get("usageIdentifierKey") is not None:
            context[USAGE_KEY] = out["usageIdentifierKey"]
        if self.authorizer_ttl_s > 0:
            self._authorized[key] = (self.clock() + self.authorizer_ttl_s, context)
        return context

    def _handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict, bytes]:
        request_id = str(uuid.uuid4())
        routed = self._route(path)
        if routed is None:
            return 403, {"content-type": "application/json"}, b'{"message":"Missing Authentication Token"}'
        group, resource = routed
        authorizer = None
        if path not in PUBLIC:
            try:
                authorizer = self._authorize(headers, method, resource)
            except FunctionError:  # the stack's AUTHORIZER_FAILURE gateway response
                status, headers, raw = _json_response(503, authorizer_busy_body(correlation_id=request_id))
                return status, {**headers, "retry-after": str(GATEWAY_RETRY_AFTER_S)}, raw
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
            if DENIED in authorizer:  # the stack's AccessDenied gateway response
                return _json_response(
                    403, gateway_error_body("scope_denied", FORBIDDEN_MESSAGE, correlation_id=request_id)
                )
            if self.usage_keys is not None:
                tier = self.usage_keys.get(authorizer.get(USAGE_KEY) or "")
                if tier is None:  # the stack's NoUsageKey gateway response (INVALID_API_KEY)
                    return _json_response(
                        403,
                        gateway_error_body(
                            "unauthorized",
                            "This credential's usage-plan key is not one this stage holds.",
                            correlation_id=request_id,
                        ),
                    )
                self.usage_by_tier[tier] = self.usage_by_tier.get(tier, 0) + 1
        if authorizer is not None:
            authorizer = {k: v for k, v in authorizer.items() if k != USAGE_KEY}
        try:
            out = self.invoke(group, self._event(method, path, resource, headers, body, authorizer, request_id))
        except FunctionError:
            return _json_response(502, {"message": "Internal server error"})
        finally:
            self.after_call()
        raw = base64.b64decode(out["body"]) if out.get("isBase64Encoded") else (out.get("body") or "").encode()
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


class StreamPump:
    """Reads every new record of the streamed tables from DynamoDB Local and hands them to the
    indexer function as Lambda's event source mapping would (`invoke`: the in-process handler by
    default, the indexer's own process on the local stack); `settle`, when given, runs after a pump
    that indexed anything (the real node shows index writes at its next refresh).

    A shard is read on from the iterator its last read returned, as the mapping's poller does, and
    the streams' shards are described again only when one closes or after `SHARDS_TTL_S`: a pump
    with nothing new costs one GetRecords per open shard (the local stack pumps after every call)."""

    #: How long a stream's described shards are trusted before they are described again.
    SHARDS_TTL_S = 5.0

    def __init__(
        self,
        endpoint: str,
        prefix: str,
        settle: Callable[[], Any] | None = None,
        invoke: Callable[[str, dict[str, Any]], Any] = call,
    ) -> None:
        from fleetmem.adapters.aws.tables import TABLES
        from tests.aws import engines

        session = engines.session()
        self.invoke = invoke
        self.settle = settle
        self.streams = session.client("dynamodbstreams", endpoint_url=endpoint)
        ddb = session.client("dynamodb", endpoint_url=endpoint)
        self.arns = [
            ddb.describe_table(TableName=t.physical_name(prefix))["Table"]["LatestStreamArn"]
            for t in TABLES
            if t.stream
        ]
        #: (stream, shard) -> the sequence number of the last record handed over (the checkpoint)
        self.last: dict[tuple[str, str], str] = {}
        #: (stream, shard) -> the iterator its last read returned (absent: start from the checkpoint)
        self.next: dict[tuple[str, str], str] = {}
        self.closed: set[tuple[str, str]] = set()  # closed and read to the end
        self._shards: dict[str, tuple[float, list[str]]] = {}  # stream -> (when described, shard ids)
        self.lock = threading.Lock()
        self.batches = 0

    def pump(self) -> None:
        with self.lock:  # one reader, like one event source mapping per shard
            batches = self.batches
            for arn in self.arns:
                for shard in self._open_shards(arn):
                    self._shard(arn, shard)
            if self.settle is not None and self.batches > batches:
                self.settle()

    def _shard(self, arn: str, shard: str) -> None:
        while True:
            records, iterator = self._read(arn, shard)
            if records:
                result = self.invoke("indexer", {"Records": records})
                assert result == {"batchItemFailures": []}, result
                self.batches += 1
                self.last[(arn, shard)] = records[-1]["dynamodb"]["SequenceNumber"]
            self._go_on(arn, shard, iterator, bool(records))
            if not (records and iterator):
                return

    def _open_shards(self, arn: str) -> Iterator[str]:
        """The stream's shards not yet read to their end; when one closes meanwhile (its children
        take the writes), the stream is described again and the new shards follow."""
        given: set[str] = set()
        while True:
            seen = self._shards.get(arn)
            if seen is None or time.monotonic() - seen[0] > self.SHARDS_TTL_S:
                shards = self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
                seen = self._shards[arn] = (time.monotonic(), [str(s["ShardId"]) for s in shards])
            fresh = [s for s in seen[1] if s not in given and (arn, s) not in self.closed]
            if not fresh:
                return
            for shard in fresh:
                given.add(shard)
                yield shard

    def _read(self, arn: str, shard: str, **kwargs: Any) -> tuple[list[dict[str, Any]], str | None]:
        """The shard's next records (as Lambda serializes them) and the iterator after them, read
        from where its last read left off (`_go_on`), else from its checkpoint (`last`)."""
        out = None
        iterator = self.next.pop((arn, shard), None)
        if iterator is not None:
            try:
                out = self.streams.get_records(ShardIterator=iterator, **kwargs)
            except ClientError:  # expired or trimmed: start again from the checkpoint
                out = None
        if out is None:
            out = self.streams.get_records(ShardIterator=self._iterator(arn, shard), **kwargs)
        records: list[dict[str, Any]] = json.loads(json.dumps(out["Records"], default=lambda_json))
        for r in records:
            r["eventSourceARN"] = arn
        return records, out.get("NextShardIterator")

    def _go_on(self, arn: str, shard: str, iterator: str | None, had_records: bool) -> None:
        """The next read of the shard starts from `iterator` (the last read's records were handed
        over, or it had none). A shard with no iterator left is closed (read to its end once a read
        of it finds nothing), and its stream is described again: its children take the writes."""
        if iterator:
            self.next[(arn, shard)] = iterator
            return
        if not had_records:
            self.closed.add((arn, shard))
        self._shards.pop(arn, None)

    def _iterator(self, arn: str, shard: str) -> str:
        last = self.last.get((arn, shard))
        kw = (
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": last}
            if last
            else {"ShardIteratorType": "TRIM_HORIZON"}
        )
        return str(self.streams.get_shard_iterator(StreamArn=arn, ShardId=shard, **kw)["ShardIterator"])


def lambda_json(value: Any) -> Any:
    """How Lambda serializes what the SDK returns as bytes / datetimes in a stream event."""
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime):
        return int(value.timestamp())
    raise TypeError(type(value).__name__)
