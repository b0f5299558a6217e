"""The asset that ships is the asset under test.

`scripts/build-lambda` builds the asset (same hash-locked requirements as a deploy) for this host
and the deployed `python_runtime`; every function's handler then runs from it in its own
`python -I -S` process (see tests/functions/asset.py), on every sample event in events/, against
DynamoDB Local, the real OpenSearch node and moto's server (SQS, EventBridge, Secrets
Manager). Stand-ins, each on 127.0.0.1: the Lambda Invoke API (runs the target function from the
asset), Cognito's JWKS endpoint (mocked: a test RSA key), and Bedrock is not called — the
functions embed with the deterministic hash embedder (`FLEETMEM_EMBEDDER=hash`) because Bedrock
cannot run here.

The asset is built once per test session (module-scoped fixtures share it).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from fleetmem.adapters.aws.invoker import PayloadSigner
from fleetmem.adapters.local.clock import SystemClock
from fleetmem.lambda_routes import TOOL_FUNCTIONS_ENV, function_group, function_name
from fleetmem.tokens import cognito_map_hash, hash_token, map_cognito_client
from tests.aws import engines

from .asset import AssetRunner, LambdaService, build_asset, deployed_python, install_runtime_sdk, interpreter_for
from .conftest import EVENTS, load_event
from .test_authorizer_handler import seed

pytestmark = pytest.mark.dynamodb_local

PREFIX = "fleetmem-asset"
TOOL_GROUPS = ("recall", "remember", "entity", "synthesize", "forget", "context_pack", "delta", "pages", "admin")
APP_CLIENT = "4m2k8q1r7t6v5w3x9y0z"


@pytest.fixture(scope="session")
def built_asset() -> Iterator[tuple[Path, Path, Path]]:
    """(python, asset dir, runtime dir), built once per session into its own temporary directory
    (not pytest's basetemp, which concurrent pytest runs on the machine rotate away)."""
    version = deployed_python()
    python = interpreter_for(version)
    if python is None:
        pytest.fail(
            f"the deployed python_runtime {version} is not on this machine, so the asset cannot be tested "
            "under it; deploy a version this machine has (see docs/deploy.md)"
        )
    base = Path(tempfile.mkdtemp(prefix="fleetmem-asset-"))
    try:
        built = build_asset(base / "asset", version)
        if built.returncode != 0:
            pytest.fail(f"scripts/build-lambda failed:\n{built.stdout[-2000:]}\n{built.stderr[-4000:]}")
        install_runtime_sdk(base / "runtime", version)
        yield python, base / "asset", base / "runtime"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def stage(request: pytest.FixtureRequest, built_asset, opensearch_url) -> Iterator[dict[str, Any]]:
    """One deployed stage on local engines: tables on DynamoDB Local, a fresh search prefix, a
    usage-key secret, the Lambda stand-in, and the environment CDK sets on every function."""
    from fleetmem.memory.verbs import REGISTRY

    ddb = engines.dynamodb_local_endpoint(request.config)
    moto = engines.moto_endpoint(request.config)
    search_prefix = "fma" + uuid.uuid4().hex[:8]
    prefix = engines.fresh_prefix()
    engines.tables_for(ddb, prefix)
    python, asset, runtime = built_asset
    runner = AssetRunner(python, asset, runtime)
    sm = boto3.client("secretsmanager", endpoint_url=moto, **engines.CREDENTIALS)
    signing_key = uuid.uuid4().hex * 2
    signing = sm.create_secret(Name=f"signing-{uuid.uuid4().hex[:8]}", SecretString=signing_key)
    usage = sm.create_secret(Name=f"usage-{uuid.uuid4().hex[:8]}", SecretString="defaultusagekey0123456789abcdefghij")
    with LambdaService(runner, PREFIX) as service:
        runner.env = {
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_DYNAMODB": ddb,
            "AWS_ENDPOINT_URL_SQS": moto,
            "AWS_ENDPOINT_URL_EVENTBRIDGE": moto,
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": moto,
            "AWS_ENDPOINT_URL_LAMBDA": service.url,
            "FLEETMEM_BACKEND": "aws",
            "FLEETMEM_SURFACE": "full",
            "FLEETMEM_TABLE_PREFIX": prefix,
            "FLEETMEM_EMBEDDER": "hash",
            "FLEETMEM_OPENSEARCH_ENDPOINT": opensearch_url,
            "FLEETMEM_OPENSEARCH_SERVICE": "none",
            "FLEETMEM_OPENSEARCH_INDEX_PREFIX": search_prefix,
            "FLEETMEM_OPENSEARCH_WRITE_THROUGH": "1",
            "FLEETMEM_USAGE_KEY_SECRETS": json.dumps({"standard": usage["ARN"]}),
            "FLEETMEM_DEFAULT_TIER": "standard",
            "FLEETMEM_INVOKE_SIGNING_SECRET_ARN": signing["ARN"],
            "POWERTOOLS_METRICS_NAMESPACE": "fleetmem",
            TOOL_FUNCTIONS_ENV: json.dumps({t: function_name(PREFIX, function_group(t)) for t in REGISTRY}),
        }
        yield {
            "runner": runner,
            "service": service,
            "stores": engines.open_stores(ddb, prefix),
            "moto": moto,
            "search": opensearch_url,
            "signer": PayloadSigner(secret=signing_key.encode()),
        }
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[opensearch_url])
    client.indices.delete(index=f"{search_prefix}-docs-*", ignore_unavailable=True)
    client.close()


def run(stage: dict[str, Any], group: str, event: dict[str, Any], **env: str) -> dict[str, Any]:
    out: dict[str, Any] = stage["runner"].run(group, event, env)
    return out


def run_many(stage: dict[str, Any], group: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events in order through one sandbox of the function (a cold start, then warm calls)."""
    outs: list[dict[str, Any]] = stage["runner"].run_many(group, events)
    return outs


def ok(out: dict[str, Any]) -> Any:
    assert "errorType" not in out, out.get("trace") or out
    assert out["boto3_from"] is None or "/runtime/" in out["boto3_from"]
    return out["result"]


def seed_token(stage: dict[str, Any], token: str, client_id: str, scopes: set[str], *, revoked: bool = False) -> None:
    if stage["stores"].clients.by_hash(hash_token(token)) is None:
        holder = SimpleNamespace(clients=stage["stores"].clients, clock=SystemClock())
        seed(holder, token, client_id, scopes, revoked=revoked)


def event_names(folder: str) -> list[str]:
    return sorted(p.stem for p in (EVENTS / folder).glob("*.json"))


# ---------------------------------------------------------------------------------------------
# authorizer


def bearer(event: dict[str, Any]) -> str:
    return str(event["headers"]["Authorization"]).split(" ", 1)[1]


def test_authorizer_allows_a_valid_api_token_and_denies_unknown_revoked_and_other_schemes(stage):
    valid = load_event("authorizer", "api_token_valid")
    seed_token(stage, bearer(valid), "planner", {"read", "write"})
    revoked = load_event("authorizer", "api_token_revoked")
    seed_token(stage, bearer(revoked), "auditor", {"read"}, revoked=True)

    allowed = ("api_token_valid", "v1_route")
    denied = ("api_token_revoked", "api_token_unknown", "missing_bearer_scheme")
    names = [*allowed, *denied, *allowed]  # the answers stay the same once the sandbox is warm
    outs = run_many(stage, "authorizer", [load_event("authorizer", name) for name in names])
    for name, raw in zip(names, outs, strict=True):
        if name in denied:
            assert raw.get("errorMessage") == "Unauthorized", (name, raw.get("trace"))
            continue
        out = ok(raw)
        assert out["context"]["tenant"] == "acme", name
        assert out["policyDocument"]["Statement"][0]["Effect"] == "Allow"
        assert out["usageIdentifierKey"] == "defaultusagekey0123456789abcdefghij"


def test_authorizer_allows_a_cognito_access_token(stage, jwks):
    """Cognito's JWKS endpoint is mocked (a test RSA key served from 127.0.0.1)."""
    issuer, sign = jwks
    event = load_event("authorizer", "cognito_access_token")
    event["headers"]["Authorization"] = f"Bearer {sign()}"
    if stage["stores"].clients.by_hash(cognito_map_hash(APP_CLIENT)) is None:
        map_cognito_client(
            stage["stores"].clients,
            SystemClock(),
            app_client_id=APP_CLIENT,
            tenant="acme",
            client_id="planner",
            scopes={"read", "write"},
        )
    out = ok(run(stage, "authorizer", event, FLEETMEM_COGNITO_ISSUER=issuer))
    proof = out["context"].pop("proof")  # signed with the stage key (test_invoke_signing checks it)
    assert out["context"] == {"tenant": "acme", "client_id": "planner", "scopes": "read write"}
    assert stage["signer"].verify_claims(out["context"], proof)


@pytest.fixture(scope="module")
def jwks() -> Iterator[tuple[str, Any]]:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    document = json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    issuer = f"http://127.0.0.1:{server.server_address[1]}/us-east-1_TestPool"

    def sign(**overrides: Any) -> str:
        now = int(time.time())
        claims = {
            "token_use": "access",
            "scope": "fleetmem/read fleetmem/write",
            "iss": issuer,
            "exp": now + 3600,
            "iat": now,
            "client_id": APP_CLIENT,
            **overrides,
        }
        return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})

    yield issuer, sign
    server.shutdown()
    server.server_close()


# ---------------------------------------------------------------------------------------------
# tool functions


def prepared(stage: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """An edge invoke payload as the edge sends it, or a proxy event with the authorizer context
    the authorizer returns: each signed with the stage's key."""
    if "httpMethod" not in event:
        signed: dict[str, Any] = stage["signer"].sign(event)
        return signed
    ctx = event.get("requestContext") or {}
    auth = ctx.get("authorizer")
    if not isinstance(auth, dict) or not auth.get("tenant"):
        return event
    claims = {k: str(auth.get(k, "")) for k in ("tenant", "client_id", "scopes")}
    proof = stage["signer"].sign_claims(claims, valid_for_s=300)
    return {**event, "requestContext": {**ctx, "authorizer": {**auth, "proof": proof}}}


@pytest.mark.parametrize("group", TOOL_GROUPS)
def test_every_tool_function_answers_each_of_its_events_without_an_internal_error(stage, group):
    names = event_names(group)
    events = [load_event(group, name) for name in names]
    outs = run_many(stage, group, [prepared(stage, event) for event in events])
    for name, event, raw in zip(names, events, outs, strict=True):
        is_invoke = "httpMethod" not in event
        out = ok(raw)
        if is_invoke:
            assert out["body"].get("code") != "internal", (group, name, out)
            assert "protocol_version" in out["body"], (group, name)
        else:
            assert out["statusCode"] in {200, 400, 401, 404, 405, 503}, (group, name, out)
            assert "protocol_version" in json.loads(out["body"]), (group, name)


def test_remember_then_recall_through_the_asset(stage):
    remembered = ok(run(stage, "remember", prepared(stage, load_event("remember", "invoke"))))
    assert remembered["is_error"] is False and remembered["body"]["status"] in {"inserted", "duplicate"}
    recalled = ok(run(stage, "recall", prepared(stage, load_event("recall", "invoke"))))
    assert recalled["is_error"] is False


def test_a_verb_function_refuses_an_unsigned_or_forged_invoke_payload(stage):
    """Anyone with lambda:InvokeFunction could send a payload naming any tenant: without the
    edge's signature (key in Secrets Manager on moto) the function refuses it and does nothing."""
    payload = load_event("remember", "invoke")
    payload["arguments"] = {**payload["arguments"], "fact": f"forged {uuid.uuid4().hex[:8]}"}
    unsigned = ok(run(stage, "remember", payload))
    assert unsigned["is_error"] and unsigned["body"]["code"] == "unauthorized"
    forged = PayloadSigner(secret=b"not-the-stage-key").sign(payload)
    assert ok(run(stage, "remember", forged))["body"]["code"] == "unauthorized"
    signed = prepared(stage, payload)
    tampered = {**signed, "caller": {**signed["caller"], "tenant": "someone-else"}}
    assert ok(run(stage, "remember", tampered))["body"]["code"] == "unauthorized"
    assert ok(run(stage, "remember", signed))["body"]["status"] == "inserted"


# ---------------------------------------------------------------------------------------------
# the MCP edge


# answered by the edge itself: an unknown tool, and a write from a client without the write scope
REFUSED_AT_THE_EDGE = {"tools_call_unknown_tool", "tools_call_remember_read_only_client"}


def test_the_edge_answers_every_mcp_event_in_both_eras_and_invokes_verb_functions(stage):
    token = "fm_Q2hhbmdlTWVJbkFSZWFsRGVwbG95bWVudFBsZWFzZTA"
    seed_token(stage, token, "planner", {"read", "write"})
    service = stage["service"]
    before = len(service.calls)
    names = event_names("mcp")
    events = [load_event("mcp", name) for name in names]
    outs = run_many(stage, "mcp", [prepared(stage, event) for event in events])
    invoked = []  # the verb function each tools/call should reach, in event order
    for name, event, raw in zip(names, events, outs, strict=True):
        out = ok(raw)
        assert out["statusCode"] != 500, (name, out)
        assert '"code": "internal"' not in out["body"] and '"code":"internal"' not in out["body"], (name, out)
        request = json.loads(event.get("body") or "{}")
        if request.get("method") == "tools/call" and name not in REFUSED_AT_THE_EDGE:
            invoked.append(request["params"]["name"])
        if name in {"tools_call_remember", "tools_call_recall", "stateless_tools_call_recall"}:
            body = json.loads(out["body"])
            assert body["result"].get("isError") is not True, (name, body)
    # each tools/call invoked its verb's function once, in event order; nothing else invoked one
    assert service.calls[before:] == invoked


# ---------------------------------------------------------------------------------------------
# the stream indexer


def test_the_indexer_indexes_batches_and_reports_only_the_poison_record(stage):
    names = event_names("indexer")
    events = [load_event("indexer", name) for name in names]
    for name, event, raw in zip(names, events, run_many(stage, "indexer", events), strict=True):
        out = ok(raw)
        failures = [f["itemIdentifier"] for f in out["batchItemFailures"]]
        if name == "facts_with_poison_record":
            assert failures and len(failures) < len(event["Records"])
        else:
            assert failures == [], name


# ---------------------------------------------------------------------------------------------
# heartbeat


def _receive(sqs: Any, url: str) -> list[dict[str, Any]]:
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages") or []
    return [json.loads(m["Body"]) for m in got]


def _wake_twice(stage: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """First wake establishes the cursor; a fact is remembered; the second wake delivers it. The
    heartbeat is configured as the deploy configures it: in the function's heartbeat table, the
    wake naming it."""
    table = {"FLEETMEM_HEARTBEATS": json.dumps({"asset-heartbeat": event})}
    wake = {"heartbeat": "asset-heartbeat"}
    first = ok(run(stage, "heartbeat", wake, **table))
    assert first["status"] == "established"
    payload = load_event("remember", "invoke")
    payload["arguments"] = {**payload["arguments"], "fact": f"heartbeat fact {uuid.uuid4().hex[:8]}"}
    ok(run(stage, "remember", prepared(stage, payload)))
    time.sleep(0.01)
    second: dict[str, Any] = ok(run(stage, "heartbeat", wake, **table))
    return second


def test_heartbeat_delivers_to_an_sqs_destination(stage):
    sqs = boto3.client("sqs", endpoint_url=stage["moto"], **engines.CREDENTIALS)
    url = sqs.create_queue(QueueName=f"hb-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    event = load_event("heartbeat", "sqs_destination")
    event["session_id"] = f"asset-{uuid.uuid4().hex[:8]}"
    event["destination"]["queue_url"] = url
    out = _wake_twice(stage, event)
    assert out["status"] == "delivered"
    (message,) = _receive(sqs, url)
    assert message["delta"]["facts"]


def test_heartbeat_delivers_to_an_https_destination_through_its_event_bus(stage):
    events = boto3.client("events", endpoint_url=stage["moto"], **engines.CREDENTIALS)
    sqs = boto3.client("sqs", endpoint_url=stage["moto"], **engines.CREDENTIALS)
    bus = f"hb-bus-{uuid.uuid4().hex[:8]}"
    events.create_event_bus(Name=bus)
    url = sqs.create_queue(QueueName=f"hb-target-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="all", EventBusName=bus, EventPattern=json.dumps({"source": ["fleetmem.heartbeat"]}))
    events.put_targets(Rule="all", EventBusName=bus, Targets=[{"Id": "q", "Arn": arn}])
    event = load_event("heartbeat", "https_destination")
    event["session_id"] = f"asset-{uuid.uuid4().hex[:8]}"
    event["destination"]["bus"] = bus
    out = _wake_twice(stage, event)
    assert out["status"] == "delivered"
    (message,) = _receive(sqs, url)
    assert message["detail"]["destination"] == "ops-webhook"
    assert message["detail"]["delta"]["facts"]
