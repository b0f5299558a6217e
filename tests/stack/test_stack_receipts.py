"""D22 write receipts through the deployed shape on the local stack (tests/stack/stack.py): a
remember with a `request_id` runs in the remember function, its replay (over MCP, through the edge)
answers the stored result, and `get_write_request` / `list_write_requests` run in the admin
function against the idempotency table's records (DynamoDB Local); another client's view of the
same id is `not_found`. Stand-ins as in the stack's docstring (no mocks of the stores)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from .conftest import mint, rpc
from .stack import Stack

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]


def v1(stack: Stack, token: str, tool: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{stack.base_url}/v1/{tool}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )


def mcp_call(stack: Stack, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    out = rpc(stack.mcp_url, token, "tools/call", {"name": tool, "arguments": arguments})
    assert out.status_code == 200, out.text
    result = out.json()["result"]
    return dict(result.get("structuredContent") or json.loads(result["content"][0]["text"]))


def test_a_request_id_round_trips_replays_and_its_receipt_is_read_through_the_functions(stack: Stack) -> None:
    token = mint(stack, ["read", "write"])
    fact = f"Receipts on the stack {uuid.uuid4().hex[:8]}: the harbour office opens at nine"
    body = {"fact": fact, "provenance": "stack receipts", "request_id": "stack-write-1"}
    calls = {g: stack.functions[g].invocations for g in ("remember", "admin")}

    first = v1(stack, token, "remember", body)
    assert first.status_code == 200, first.text
    saved = first.json()
    assert saved["client_request_id"] == "stack-write-1" and saved["state"] == "committed"
    assert uuid.UUID(saved["request_id"]).version == 5
    assert saved["write_request"]["request_id"] == saved["request_id"]

    again = mcp_call(stack, token, "remember", body)
    assert again["idempotent_replay"] is True and again["id"] == saved["id"]

    got = mcp_call(stack, token, "get_write_request", {"request_id": "stack-write-1"})
    assert got["write_request"]["state"] == "committed"
    assert got["write_request"]["outcome"] == {"tool": "remember", "id": saved["id"], "status": saved["status"]}
    assert fact not in json.dumps(got)
    listed = v1(stack, token, "list_write_requests", {"limit": 5})
    assert listed.status_code == 200, listed.text
    assert [w["request_id"] for w in listed.json()["write_requests"]] == [saved["request_id"]]
    assert stack.functions["remember"].invocations == calls["remember"] + 2
    assert stack.functions["admin"].invocations >= calls["admin"] + 2

    other = mint(stack, ["read", "write"])
    missing = v1(stack, other, "get_write_request", {"request_id": "stack-write-1"})
    assert missing.status_code == 404 and missing.json()["code"] == "not_found", missing.text
