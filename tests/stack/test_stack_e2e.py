"""End to end on the local stack (tests/stack/stack.py, what `scripts/stack` runs): HTTP -> the
API Gateway-style front -> the authorizer function -> the MCP edge function -> the Lambda Invoke
API -> each verb's own function, every function a Runtime Interface Emulator process running the
built asset with awslambdaric -> DynamoDB Local -> its stream -> the indexer function -> the
OpenSearch 2.19.1 + k-NN node, with the local MiniLM model behind Bedrock's InvokeModel shape.

Stand-ins for what cannot run here, each said in the stack's docstring: API Gateway itself (the
front), the Lambda service (emulator processes + invoke router), Bedrock (MiniLM behind its shape;
synthesize's model a scripted stand-in behind Converse), Secrets Manager / SQS on moto's server. One
stack per test session; a missing engine fails under CI=true (tests/aws/engines.missing)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest

from fleetmem.conformance import other_surface_cases
from fleetmem.conformance import run as run_conformance
from fleetmem.protocol import VERB_NAMES
from tests.aws import engines

from .conftest import mint, rpc
from .stack import HEARTBEAT, HEARTBEAT_CLIENT, HEARTBEAT_TENANT, Stack

# one stack per session: every test here runs on the same xdist worker (scripts/test: --dist loadgroup)
pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]

#: the cases that check the verbs surface: on this full-surface stack they can only skip
SKIP_ON_FULL = other_surface_cases("full")


def test_the_conformance_cases_pass_in_both_eras_through_every_function_process(stack):
    token, read_token = mint(stack, ["read", "write", "admin"]), mint(stack, ["read"])
    before = {g: f.invocations for g, f in stack.functions.items()}
    converse_before = stack.bedrock.converse_calls
    report = run_conformance(
        stack.mcp_url, token, json=True, read_token=read_token, surface="full", log=lambda _line: None
    )
    failed = [f"[{c['era']}] {c['id']}: {c['detail']}" for c in report["cases"] if c["status"] == "failed"]
    assert failed == [], "\n".join(failed) + "\n" + stack.function_log("mcp")
    skipped = {c["id"] for c in report["cases"] if c["status"] == "skipped"}
    assert skipped <= SKIP_ON_FULL
    passed = [c for c in report["cases"] if c["status"] == "passed"]
    assert {c["era"] for c in passed} == {"http", "legacy", "auto"}
    scope_cases = {c["id"] for c in passed if c["id"].startswith("scope.")}
    assert scope_cases == {"scope.read_token_lists_no_write_tools", "scope.read_token_cannot_write"}
    # every verb ran in its own function process, and the writes reached search through the stream
    ran = {g for g, f in stack.functions.items() if f.invocations > before[g]}
    assert set(VERB_NAMES) | {"mcp", "authorizer", "indexer", "pages"} <= ran
    assert stack.pump.batches > 0 and stack.bedrock.calls > 0
    # the reference 0.60 read sections through their functions, in both MCP eras: synthesize answered
    # by the deployed model (the Bedrock stand-in's Converse), not `unavailable`; context_pack
    sections = {"reference 0.60 reads: synthesize": 6, "reference 0.60 reads: context_pack": 8}
    for section, least in sections.items():
        ran = [c for c in report["cases"] if c["section"] == section]
        assert len(ran) >= least and {c["status"] for c in ran} == {"passed"}, section
        assert {c["era"] for c in ran} == {"legacy", "auto"}, section
    assert stack.bedrock.converse_calls >= converse_before + 6


def test_the_authorizer_answer_is_cached_per_credential(stack):
    token = mint(stack, ["read"])
    calls = stack.gateway.authorizer_calls
    for _ in range(3):
        assert rpc(stack.mcp_url, token, "tools/list").status_code == 200
    assert stack.gateway.authorizer_calls == calls + 1
    denied = rpc(stack.mcp_url, "fm_" + "x" * 43, "tools/list")
    assert denied.status_code == 401 and denied.json()["code"] == "unauthorized"
    assert "resource_metadata" in denied.headers["www-authenticate"]


def test_a_v1_route_goes_straight_to_the_tool_function(stack):
    token = mint(stack, ["read", "write"])
    calls = stack.functions["remember"].invocations
    fact = f"Stack e2e fact {uuid.uuid4().hex[:8]} about the ferry schedule"
    out = httpx.post(
        f"{stack.base_url}/v1/remember",
        json={"fact": fact, "provenance": "stack e2e", "entity": "projects/stack-e2e"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert out.status_code == 200, out.text
    assert out.json()["status"] == "inserted"
    assert stack.functions["remember"].invocations == calls + 1
    # found by meaning (MiniLM behind the Bedrock shape, through the stream into OpenSearch)
    found = httpx.post(
        f"{stack.base_url}/v1/recall",
        json={"query": "when do the boats leave"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert found.status_code == 200, found.text
    assert fact in json.dumps(found.json())


def test_a_delta_heartbeat_round_trip_through_the_heartbeat_function(stack):
    """The scheduler's invoke (through the Lambda Invoke API, naming the stage's configured
    heartbeat), a write over MCP, the next wake delivers it to the SQS destination (moto's server)."""
    token = mint(stack, ["read", "write"], tenant=HEARTBEAT_TENANT, client_id=HEARTBEAT_CLIENT)
    sqs = boto3.client("sqs", endpoint_url=stack.moto, **engines.CREDENTIALS)
    lam = boto3.client("lambda", endpoint_url=stack.router.url, **engines.CREDENTIALS)

    def wake() -> dict[str, Any]:
        out = lam.invoke(FunctionName=stack.functions["heartbeat"].name, Payload=json.dumps({"heartbeat": HEARTBEAT}))
        assert "FunctionError" not in out, out["Payload"].read()
        return dict(json.loads(out["Payload"].read()))

    assert wake()["status"] == "established"
    fact = f"Heartbeat e2e {uuid.uuid4().hex[:8]}"
    called = rpc(
        stack.mcp_url,
        token,
        "tools/call",
        {"name": "remember", "arguments": {"fact": fact, "provenance": "stack e2e", "entity": "projects/hb"}},
    )
    assert called.status_code == 200 and called.json()["result"].get("isError") is not True, called.text
    assert wake()["status"] == "delivered"
    got = sqs.receive_message(QueueUrl=stack.heartbeat_queue, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    (message,) = [json.loads(m["Body"]) for m in got.get("Messages") or []]
    assert fact in json.dumps(message["delta"]["facts"])


def test_an_unknown_function_name_is_the_services_not_found(stack):
    lam = boto3.client("lambda", endpoint_url=stack.router.url, **engines.CREDENTIALS)
    with pytest.raises(lam.exceptions.ResourceNotFoundException):
        lam.invoke(FunctionName=f"{stack.prefix}-nope", Payload=b"{}")


@pytest.fixture(scope="module")
def verbs_stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    """A second stage with FLEETMEM_SURFACE=verbs on every function (same engines). Only what
    tools/list and a refused tools/call reach runs: the authorizer, the edge and the indexer."""
    with Stack(config=request.config, surface="verbs", groups=("authorizer", "indexer", "mcp")) as s:
        yield s


def test_a_verbs_stage_lists_exactly_the_seven_verbs_and_hides_the_rest(verbs_stack):
    token = mint(verbs_stack, ["read", "write", "admin"])
    listed = rpc(verbs_stack.mcp_url, token, "tools/list").json()["result"]["tools"]
    assert sorted(t["name"] for t in listed) == sorted(VERB_NAMES)
    hidden = rpc(
        verbs_stack.mcp_url, token, "tools/call", {"name": "put_page", "arguments": {"slug": "a/b", "content": "x"}}
    )
    result = hidden.json()["result"]
    assert result["isError"] is True
    (block,) = result["content"]  # an error result is one text block holding the envelope
    assert json.loads(block["text"])["code"] == "unknown_tool"
