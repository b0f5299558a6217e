"""D23 on the local stack (tests/stack/stack.py): forget withdraws a claim in the forget function's
DynamoDB transaction, and the remember function — another emulated Lambda process — refuses the
claim with `fact_withdrawn`, over `POST /v1` and over MCP. Stand-ins as in test_stack_e2e.py."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from .conftest import mint, rpc

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]


def _post(stack, token: str, tool: str, args: dict) -> httpx.Response:
    return httpx.post(
        f"{stack.base_url}/v1/{tool}", json=args, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )


def test_a_forgotten_claim_is_refused_by_the_remember_function(stack):
    token = mint(stack, ["read", "write"], tenant="wd-" + uuid.uuid4().hex[:8])
    fact = {"fact": "The ferry to Hydra leaves at 09:00", "provenance": "stack", "entity": "places/hydra"}
    saved = _post(stack, token, "remember", fact)
    assert saved.status_code == 200, saved.text
    fact_id = saved.json()["id"]
    gone = _post(stack, token, "forget", {"id": fact_id})
    assert gone.status_code == 200, gone.text
    assert gone.json()["expired"] is True and gone.json()["similar_active"]["semantic_review"] == "off"

    again = _post(stack, token, "remember", {**fact, "fact": "the ferry to hydra  leaves at 09:00"})
    assert again.status_code == 400, again.text
    body = again.json()
    assert body["code"] == "invalid_params" and body["message"].startswith("fact_withdrawn")
    assert body["detail"]["withdrawn_fact_id"] == fact_id
    assert body["fix"]["mcp"]["arguments"]["restore_withdrawn"] is True

    over_mcp = rpc(stack.mcp_url, token, "tools/call", {"name": "remember", "arguments": fact})
    result = over_mcp.json()["result"]
    assert result["isError"] is True
    assert json.loads(result["content"][0]["text"])["message"].startswith("fact_withdrawn")

    restored = _post(stack, token, "remember", body["fix"]["mcp"]["arguments"])
    assert restored.status_code == 200 and restored.json()["status"] == "inserted", restored.text
