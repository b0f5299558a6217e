"""Clients as data on the deployed shape: a client no deploy config names, minted while the stage
runs, works on its next request with its tier's usage-plan key.

The stack's front holds the tiers' usage-plan keys as API Gateway's usage plans do (API key source
AUTHORIZER) and answers 403 when the authorizer's `usageIdentifierKey` is not one of them; it
counts the tier of each key it accepts (`gateway.usage_by_tier`). The tokens are minted by the
real CLI (`fleetmem token create --backend aws`, a subprocess on the stack's DynamoDB Local) and by
the `create_token` tool through `/mcp`, the edge and its function."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from infra.config import EXAMPLE, load_config

from .conftest import mint, rpc


def token_create(stack, *args: str) -> dict:
    cli = Path(sys.executable).parent / "fleetmem"
    done = subprocess.run(
        [str(cli), "token", "create", "--backend", "aws", *args, "--json"],
        env={**os.environ, **stack.client_env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def used(stack, tier: str) -> int:
    return stack.gateway.usage_by_tier.get(tier, 0)


def test_a_token_minted_at_run_time_for_an_unconfigured_client_works_on_its_next_request(stack):
    cfg = load_config(EXAMPLE)
    configured = {c.client_id for c in cfg.clients}
    client = f"bot-{uuid.uuid4().hex[:8]}"
    assert client not in configured
    minted = token_create(
        stack, "--client", client, "--tenant", "fleet-e2e", "--scopes", "read,write", "--tier", "fleet"
    )
    before = used(stack, "fleet")
    answer = rpc(stack.mcp_url, minted["token"], "tools/list")
    assert answer.status_code == 200, answer.text
    assert used(stack, "fleet") == before + 1  # let in with the fleet tier's key

    # no tier named: the config's default tier's key
    plain = token_create(stack, "--client", f"bot-{uuid.uuid4().hex[:8]}", "--tenant", "fleet-e2e", "--scopes", "read")
    before = used(stack, cfg.default_tier)
    assert rpc(stack.mcp_url, plain["token"], "tools/list").status_code == 200
    assert used(stack, cfg.default_tier) == before + 1


def test_a_token_minted_by_the_create_token_tool_works_on_the_next_request(stack):
    admin = mint(stack, ["read", "write", "admin"], tenant=f"mint-{uuid.uuid4().hex[:6]}")
    made = rpc(
        stack.mcp_url,
        admin,
        "tools/call",
        {"name": "create_token", "arguments": {"client": f"bot-{uuid.uuid4().hex[:8]}", "scopes": ["read"]}},
    )
    assert made.status_code == 200, made.text
    result = made.json()["result"]
    assert not result.get("isError"), result
    token = (result.get("structuredContent") or json.loads(result["content"][0]["text"]))["token"]
    before = used(stack, load_config(EXAMPLE).default_tier)
    assert rpc(stack.mcp_url, token, "tools/list").status_code == 200
    assert used(stack, load_config(EXAMPLE).default_tier) == before + 1
