"""Attacks on the local stack (tests/stack/stack.py) by a principal that may call
`lambda:InvokeFunction` but holds no credential of the tenant it targets: every event it makes up
reaches the function's own emulator process through the Lambda Invoke API, exactly as a direct
invoke would in the account. Each is refused, and the tenant's data is neither read nor written;
the same calls through the API Gateway front, with the tenant's token, keep working."""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import httpx
import pytest

from tests.aws import engines
from tests.functions.conftest import load_event

from .conftest import mint, rpc
from .stack import Stack

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]


def direct_invoke(stack: Stack, group: str, event: dict[str, Any]) -> dict[str, Any]:
    """`lambda:InvokeFunction` on the stage's function, bypassing API Gateway."""
    lam = boto3.client("lambda", endpoint_url=stack.router.url, **engines.CREDENTIALS)
    out = lam.invoke(FunctionName=stack.functions[group].name, Payload=json.dumps(event).encode())
    raw = out["Payload"].read()
    assert "FunctionError" not in out, raw
    return dict(json.loads(raw))


def proxy_event(folder: str, name: str, tenant: str, body: dict[str, Any], **authorizer: str) -> dict[str, Any]:
    """A proxy-shaped event claiming `tenant` in `requestContext.authorizer` (what a forger writes)."""
    event = load_event(folder, name)
    event["body"] = json.dumps(body)
    event["requestContext"]["authorizer"] = {
        "principalId": f"{tenant}/forger",
        "tenant": tenant,
        "client_id": "forger",
        "scopes": "read write admin",
        **authorizer,
    }
    return event


def v1(stack: Stack, token: str, tool: str, arguments: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{stack.base_url}/v1/{tool}", json=arguments, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )


@pytest.mark.parametrize("proof", ["none", "made_up"])
def test_a_forged_proxy_event_invoked_directly_reads_and_writes_nothing(stack, proof):
    tenant = f"victim-{uuid.uuid4().hex[:6]}"
    token = mint(stack, ["read", "write"], tenant=tenant)
    secret_fact = f"The vault code of {tenant} is {uuid.uuid4().hex[:8]}"
    entity = "projects/vault"
    stored = v1(stack, token, "remember", {"fact": secret_fact, "provenance": "stack test", "entity": entity})
    assert stored.status_code == 200, stored.text
    extra = {} if proof == "none" else {"proof": "v1.9999999999." + "0" * 64}

    read = direct_invoke(stack, "recall", proxy_event("recall", "v1", tenant, {"entity": entity}, **extra))
    assert read["statusCode"] == 401 and json.loads(read["body"])["code"] == "unauthorized"
    assert secret_fact not in read["body"]

    planted = f"Forged fact planted in {tenant}"
    wrote = direct_invoke(
        stack,
        "remember",
        proxy_event("remember", "v1", tenant, {"fact": planted, "provenance": "forger", "entity": entity}, **extra),
    )
    assert wrote["statusCode"] == 401 and json.loads(wrote["body"])["code"] == "unauthorized"

    mcp = proxy_event(
        "mcp",
        "tools_call_recall",
        tenant,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "recall", "arguments": {"entity": entity}},
        },
        **extra,
    )
    edge = direct_invoke(stack, "mcp", mcp)
    assert edge["statusCode"] == 401 and secret_fact not in edge["body"]

    # the tenant's own token through the gateway: its fact is there, the forged one is not
    seen = v1(stack, token, "recall", {"entity": entity})
    assert seen.status_code == 200, seen.text
    assert secret_fact in seen.text and planted not in seen.text


def test_a_forged_heartbeat_payload_is_refused_and_delivers_nothing(stack):
    """A wake naming its own tenant, client and destination (the shape schedules used to carry):
    the function serves only the heartbeats of its deploy config."""
    sqs = boto3.client("sqs", endpoint_url=stack.moto, **engines.CREDENTIALS)
    tenant = f"victim-{uuid.uuid4().hex[:6]}"
    token = mint(stack, ["read", "write"], tenant=tenant)
    assert v1(stack, token, "remember", {"fact": f"Payroll of {tenant}", "provenance": "stack test"}).status_code == 200
    drop = sqs.create_queue(QueueName=f"forger-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    forged = load_event("heartbeat", "sqs_destination")
    forged.update(tenant=tenant, client_id="forger", session_id="s", budget_tokens=8000)
    forged["destination"]["queue_url"] = drop
    for event in (forged, {"heartbeat": "stack-heartbeat", "destination": forged["destination"]}):
        for _ in range(2):  # the first wake of a session only establishes its cursor
            assert direct_invoke(stack, "heartbeat", event) == {"status": "refused", "delivered": False}
    assert sqs.receive_message(QueueUrl=drop, WaitTimeSeconds=0).get("Messages") is None


def test_a_revoked_token_is_refused_once_the_authorizer_cache_ttl_has_passed(stack):
    """`fleetmem token revoke --backend aws` states the bound (the stage's authorizer cache TTL,
    30 s by default); the stack's front caches Allow answers for that TTL as API Gateway does, so
    the revoked token still passes on a cached answer and is refused once the TTL has passed (the
    front's cache clock is moved forward instead of waiting)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from infra.config import EXAMPLE, load_config

    from fleetmem.tokens import hash_token

    from .conftest import rpc

    ttl = load_config(EXAMPLE).api.authorizer_cache_ttl_s
    assert stack.gateway.authorizer_ttl_s == ttl == 30
    token = mint(stack, ["read"], tenant=f"revoke-{uuid.uuid4().hex[:6]}")
    assert rpc(stack.mcp_url, token, "tools/list").status_code == 200
    token_id = engines.open_stores(stack.ddb, stack.prefix).clients.by_hash(hash_token(token)).token_id
    cli = Path(sys.executable).parent / "fleetmem"
    env = {**os.environ, **stack.client_env()}
    env.pop("FLEETMEM_AUTHORIZER_CACHE_TTL_S", None)
    done = subprocess.run(
        [str(cli), "token", "revoke", "--backend", "aws", token_id, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"token_id": token_id, "revoked": True, "refused_within_s": ttl}
    assert rpc(stack.mcp_url, token, "tools/list").status_code == 200  # the cached Allow, within the bound
    real = stack.gateway.clock
    stack.gateway.clock = lambda: real() + ttl
    try:
        denied = rpc(stack.mcp_url, token, "tools/list")
    finally:
        stack.gateway.clock = real
    assert denied.status_code == 401 and denied.json()["code"] == "unauthorized"


def test_a_remote_put_page_over_a_private_page_leaves_it_private_on_the_deployed_shape(stack):
    """The owner's private page (written on the store, as `fleetmem put-page --backend aws` does) is
    neither overwritten nor published by a tenant token's put_page through the gateway, on /v1 and
    on /mcp; a missing slug is still created."""
    from fleetmem.adapters.local.clock import SystemClock
    from fleetmem.models import Page

    tenant = f"owner-{uuid.uuid4().hex[:6]}"
    token = mint(stack, ["read", "write"], tenant=tenant)
    secret = f"The vault code of {tenant} is {uuid.uuid4().hex[:8]}"
    pages = engines.open_stores(stack.ddb, stack.prefix).pages
    now = SystemClock().now()
    pages.put(
        Page(
            tenant=tenant,
            slug="projects/vault",
            title="Vault Room",
            visibility="private",
            body=secret,
            created_at=now,
            updated_at=now,
            author="local",
        )
    )

    for arguments in ({}, {"expected_updated_at": ""}):
        r = v1(stack, token, "put_page", {"slug": "projects/vault", "content": "Open to all.", **arguments})
        body = r.json()
        assert (r.status_code, body["code"]) == (400, "invalid_params"), r.text
        assert body["detail"] == {"field": "slug", "reason": "slug_taken"} and secret not in r.text
    over_mcp = rpc(
        stack.mcp_url,
        token,
        "tools/call",
        {"name": "put_page", "arguments": {"slug": "projects/vault", "content": "Open to all."}},
    )
    result = over_mcp.json()["result"]
    assert result["isError"] is True and json.loads(result["content"][0]["text"])["detail"]["reason"] == "slug_taken"

    kept = pages.get(tenant, "projects/vault")
    assert kept is not None and kept.visibility == "private" and kept.body == secret
    assert v1(stack, token, "get_page", {"slug": "projects/vault"}).json()["code"] == "not_found"
    made = v1(stack, token, "put_page", {"slug": "projects/lobby", "content": "# Lobby\nOpen to all."})
    assert made.status_code == 200 and made.json()["status"] == "created"


@pytest.mark.parametrize("depth", [100, 100_000])
def test_a_v1_body_nested_too_deep_gets_the_envelope_with_its_correlation_id(stack, depth):
    """Regression: the tool function's body reader let RecursionError out (no envelope, no id)."""
    token = mint(stack, ["read"])
    r = httpx.post(
        f"{stack.base_url}/v1/recall",
        content=b'{"query": ' + b"[" * depth + b"]" * depth + b"}",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=60,
    )
    body = r.json()
    assert (r.status_code, body["code"]) == (400, "invalid_params"), r.text[:300]
    assert body["detail"] == {"reason": "too_deep", "max_depth": 32}
    assert body["correlation_id"] and r.headers["X-Correlation-Id"] == body["correlation_id"]
