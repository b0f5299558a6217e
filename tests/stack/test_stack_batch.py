"""`remember{items}` (D26) on the local stack (tests/stack/stack.py): `/v1/remember` -> the front ->
the authorizer -> the remember function (a Runtime Interface Emulator process) -> DynamoDB Local,
its stream -> the indexer -> OpenSearch, with the local MiniLM model behind Bedrock's shape. The
stand-ins are the stack's own (see its docstring); nothing here adds one.

A batch of 20 is one invocation of the remember function, 20 facts readable back; the same key
replays every item; a batch with a bad item is refused whole and writes nothing."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from .conftest import mint

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]


def post(stack: Any, token: str, tool: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{stack.base_url}/v1/{tool}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=120
    )


def test_a_batch_of_twenty_runs_in_one_remember_invocation_and_replays_exactly(stack):
    run = uuid.uuid4().hex[:8]
    token = mint(stack, ["read", "write"], tenant=f"batch-{run}")
    session = f"stack-batch-{run}"
    items = [f"Stack batch {run}: harbour berth {i} opens at {i + 5} o'clock" for i in range(20)]
    args = {"items": items, "provenance": "stack batch", "session_id": session, "idempotency_key": f"b-{run}"}

    bad = post(stack, token, "remember", {**args, "items": [*items[:7], {"fact": "bad", "ttl": "P30D"}]})
    assert bad.status_code == 400 and bad.json()["message"].startswith("items[7]: "), bad.text

    calls = stack.functions["remember"].invocations
    first = post(stack, token, "remember", args)
    assert first.status_code == 200, first.text
    body = first.json()
    assert (body["saved"], body["failed"], body["partial"]) == (20, 0, False)
    assert stack.functions["remember"].invocations == calls + 1

    again = post(stack, token, "remember", args)
    assert again.status_code == 200, again.text
    assert [i["id"] for i in again.json()["items"]] == [i["id"] for i in body["items"]]

    read = post(stack, token, "recall", {"session_id": session, "limit": 100})
    assert read.status_code == 200, read.text
    assert sorted(f["fact_id"] for f in read.json()["facts"]) == sorted(i["id"] for i in body["items"])
