"""Fixtures for running the Lambda handlers in `functions/` on their `events/` files.

Real local engines stand in for AWS: DynamoDB on moto's server (and DynamoDB Local where marked),
OpenSearch on the real OpenSearch node, SQS / EventBridge / Secrets Manager on moto's server — all on
127.0.0.1 free ports, started by the shared helpers in tests/aws/engines.py. Two things cannot run
here and are replaced, each said where it is used: Bedrock (the deterministic HashEmbedder embeds
instead, and synthesize has no LLM unless a test stubs one) and the Lambda service itself (an
in-process stand-in runs the named function's handler with a JSON round trip).
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fleetmem.adapters.local.clock import FixedClock  # noqa: E402
from fleetmem.adapters.local.hash_embedder import HashEmbedder  # noqa: E402
from fleetmem.adapters.local.ids import SortableIds  # noqa: E402
from fleetmem.lambda_routes import TOOL_FUNCTIONS_ENV, function_group, function_name  # noqa: E402
from fleetmem.ports import Deps, Diagnostics  # noqa: E402
from fleetmem.transport.aws_lambda import runtime as lambda_runtime  # noqa: E402
from fleetmem.wiring import set_deps_override  # noqa: E402
from tests.aws import engines  # noqa: E402

EVENTS = ROOT / "events"
PREFIX = "fleetmem-test"
START = datetime(2026, 6, 11, 9, 30, 0, tzinfo=UTC)


@dataclass
class LambdaContext:
    """The attributes Powertools and the runtime read from a real Lambda context."""

    function_name: str = "fleetmem-test-fn"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 1024
    aws_request_id: str = "00000000-0000-4000-8000-000000000000"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    @property
    def log_group_name(self) -> str:
        return f"/aws/lambda/{self.function_name}"

    log_stream_name: str = "2026/06/11/[$LATEST]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return 15_000


def load_event(folder: str, name: str) -> dict[str, Any]:
    return json.loads((EVENTS / folder / f"{name}.json").read_text())


def handler_module(group: str) -> Any:
    return importlib.import_module(f"functions.{group}.handler")


def call(group: str, event: dict[str, Any], *, sign: bool = True) -> Any:
    """Invoke `functions/<group>/handler.py` as Lambda would. An edge invoke payload (the
    `<verb>/invoke*.json` events) is signed first, as the edge signs it, and a proxy event's
    authorizer context gets the proof the authorizer signs, unless `sign=False`."""
    if sign and "tool" in event and "httpMethod" not in event and "signature" not in event:
        event = lambda_runtime.signer().sign(event)
    if sign and "httpMethod" in event:
        event = sign_authorizer_context(event)
    if sign and group == "heartbeat" and "heartbeat" not in event:
        event = schedule_heartbeat(event)
    ctx = LambdaContext(function_name=function_name(PREFIX, group), aws_request_id=str(uuid.uuid4()))
    return handler_module(group).handler(event, ctx)


def sign_authorizer_context(event: dict[str, Any]) -> dict[str, Any]:
    """A proxy event whose `requestContext.authorizer` claims carry the authorizer's proof (as the
    deployed authorizer returns them); events without a context, or already signed, are unchanged."""
    from fleetmem.transport.aws_lambda.authorizer import PROOF_FIELD, signed_context

    ctx = event.get("requestContext") or {}
    auth = ctx.get("authorizer")
    if not isinstance(auth, dict) or PROOF_FIELD in auth or not auth.get("tenant"):
        return event
    signed = signed_context(str(auth["tenant"]), str(auth.get("client_id", "")), str(auth.get("scopes", "")))
    return {**event, "requestContext": {**ctx, "authorizer": {**auth, **signed}}}


def schedule_heartbeat(spec: dict[str, Any]) -> dict[str, Any]:
    """What the deploy does for a configured heartbeat (infra/constructs/heartbeat.py): its payload
    goes into the function's heartbeat table (`FLEETMEM_HEARTBEATS`), the schedule's input names
    it. Returns that input. The table lives in the environment `aws_env` restores after each test."""
    from fleetmem.config import ENV_HEARTBEATS

    name = "hb-" + hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    table = json.loads(os.environ.get(ENV_HEARTBEATS) or "{}")
    table[name] = spec
    os.environ[ENV_HEARTBEATS] = json.dumps(table)
    lambda_runtime.settings.cache_clear()
    return {"heartbeat": name}


class InProcessLambda:
    """Stands in for the Lambda service's Invoke API (not available here): runs the named
    function's handler in this process, with the payload and answer JSON round-tripped exactly
    as the service would carry them."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def invoke(self, *, FunctionName: str, InvocationType: str, Payload: bytes) -> dict[str, Any]:
        assert InvocationType == "RequestResponse"
        group = FunctionName.removeprefix(f"{PREFIX}-").replace("-", "_")
        self.calls.append(group)
        out = call(group, json.loads(Payload), sign=False)
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(out).encode())}


@pytest.fixture(scope="session")
def moto_url(request: pytest.FixtureRequest) -> str:
    return engines.moto_endpoint(request.config)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture(scope="session")
def signing_secret_arn(moto_url: str) -> str:
    """The stage's invoke-signing key in Secrets Manager (moto server)."""
    import boto3

    sm = boto3.client("secretsmanager", endpoint_url=moto_url, **engines.CREDENTIALS)
    name = f"fleetmem-test-invoke-signing-{uuid.uuid4().hex[:8]}"
    return str(sm.create_secret(Name=name, SecretString=uuid.uuid4().hex + uuid.uuid4().hex)["ARN"])


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, moto_url: str, signing_secret_arn: str) -> Iterator[None]:
    """What CDK sets on every function, pointed at the local engines."""
    from fleetmem.config import ENV_HEARTBEATS, ENV_INVOKE_SIGNING_SECRET_ARN
    from fleetmem.memory.verbs import REGISTRY

    env = {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_SQS": moto_url,
        "AWS_ENDPOINT_URL_EVENTBRIDGE": moto_url,
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": moto_url,
        "AWS_ENDPOINT_URL_DYNAMODB": moto_url,
        "FLEETMEM_BACKEND": "aws",
        "FLEETMEM_SURFACE": "full",
        "FLEETMEM_TABLE_PREFIX": PREFIX,
        "POWERTOOLS_METRICS_NAMESPACE": "fleetmem",
        "POWERTOOLS_SERVICE_NAME": "test",
        TOOL_FUNCTIONS_ENV: json.dumps({t: function_name(PREFIX, function_group(t)) for t in REGISTRY}),
        ENV_INVOKE_SIGNING_SECRET_ARN: signing_secret_arn,
        ENV_HEARTBEATS: "{}",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("FLEETMEM_PUBLIC_URL", raising=False)
    lambda_runtime.reset()
    yield
    lambda_runtime.reset()


def make_deps(ddb_url: str, opensearch_url: str, clock: Any, prefix: str | None = None) -> Deps:
    """AWS adapters over the local engines; HashEmbedder instead of Bedrock (cannot run here)."""
    from fleetmem.adapters.aws.opensearch import OpenSearchIndex

    stores = engines.open_stores(ddb_url, prefix or engines.fresh_prefix())
    search = OpenSearchIndex(
        opensearch_url,
        model_id=HashEmbedder().model_id,
        dim=HashEmbedder().dim,
        prefix="fmf" + uuid.uuid4().hex[:8],
        service="none",
    )
    return Deps.over(
        stores,
        search=search,
        clock=clock,
        ids=SortableIds(),
        embedder=HashEmbedder(),
        llm=None,
        diagnostics=Diagnostics(llm_problem="No LLM is configured (tests)."),
    )


@pytest.fixture
def deps(aws_env: None, moto_url: str, opensearch_url: str, clock: FixedClock) -> Iterator[Deps]:
    """What every handler's `get_deps()` returns in these tests."""
    d = make_deps(moto_url, opensearch_url, clock)
    search = d.search
    set_deps_override(d)
    yield d
    set_deps_override(None)
    search.client.indices.delete(index=search.index, ignore_unavailable=True)
    search.client.close()


@pytest.fixture
def lambda_service(monkeypatch: pytest.MonkeyPatch, aws_env: None) -> InProcessLambda:
    """The edge's LambdaInvoker (signing as deployed), talking to the in-process Lambda stand-in."""
    from fleetmem.adapters.aws.invoker import LambdaInvoker

    service = InProcessLambda()
    table = json.loads(__import__("os").environ[TOOL_FUNCTIONS_ENV])
    invoker = LambdaInvoker(lambda tool: table[tool], client=service, signer=lambda_runtime.signer())
    monkeypatch.setattr(lambda_runtime, "edge_invoker", lambda: invoker)
    return service
