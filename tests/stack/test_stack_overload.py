"""A slow search must not starve every verb: on the local stack (tests/stack/stack.py) with the
search node not answering, the verbs that never wait on search keep answering, recall answers
`unavailable` with a Retry-After (and, after a few search timeouts, at once: the sandbox's
breaker), and once the node answers again everything recovers.

How the node is paused: the OpenSearch node is shared by every test module and xdist worker, so
SIGSTOP on it would break tests running at the same time. The stack's functions reach it through
a TCP forwarder of their own (`Stack.search_path`); `freeze()` stops it moving bytes while every
connection stays open and new ones are still accepted, which is exactly what a client sees of a
SIGSTOPped process (the kernel accepts for it, nothing answers). It is always thawed in a
`finally`.

While frozen the front's synchronous stream drain is switched off: it is the stack's convenience
(each call's writes searchable before the next call), not the deployed shape, where indexing runs
asynchronously off the stream; the stack's poller keeps delivering batches to the indexer
meanwhile, as the event source mapping does on AWS.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from fleetmem.adapters.aws.deadlines import BREAKER_FAILURES

from .conftest import mint, rpc
from .stack import Stack

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]


def call(stack: Stack, token: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """(is_error, content[0] as JSON) of one tools/call through the front and the edge."""
    out = rpc(stack.mcp_url, token, "tools/call", {"name": tool, "arguments": arguments})
    assert out.status_code == 200, f"{tool}: HTTP {out.status_code} {out.text[:500]}\n{stack.function_log('mcp')}"
    result = out.json()["result"]
    return bool(result.get("isError")), json.loads(result["content"][0]["text"])


def ok(stack: Stack, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    is_error, body = call(stack, token, tool, arguments)
    assert not is_error, f"{tool} failed: {body}\n{stack.function_log(tool if tool in stack.functions else 'pages')}"
    return body


@contextmanager
def search_paused(stack: Stack) -> Iterator[None]:
    drain = stack.gateway.after_call
    stack.gateway.after_call = lambda: None
    stack.search_path.freeze()
    try:
        yield
    finally:
        stack.search_path.thaw()
        stack.gateway.after_call = drain


def recall_until_answered(stack: Stack, token: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """recall, honouring each `unavailable` answer's Retry-After, until it answers (the breaker
    lets a call through once its open period is over); at most a few rounds."""
    body: dict[str, Any] = {}
    for _ in range(6):
        is_error, body = call(stack, token, "recall", arguments)
        if not is_error:
            return body
        assert body["code"] == "unavailable", body
        time.sleep(body["fix"]["retry_after_seconds"])
    raise AssertionError(f"recall did not recover after the search node answered again: {body}")


def test_with_search_paused_writes_delta_entity_and_get_page_answer_and_recall_sheds(stack):
    tenant = f"overload-{uuid.uuid4().hex[:6]}"
    token = mint(stack, ["read", "write"], tenant=tenant)
    word = f"zebrafish{uuid.uuid4().hex[:6]}"
    entity = "projects/overload"
    slug = f"projects/overload-{uuid.uuid4().hex[:6]}"
    ok(stack, token, "put_page", {"slug": slug, "content": f"# Overload\n\nThe {word} tank page."})
    ok(stack, token, "remember", {"fact": f"The {word} tank is in room 4.", "provenance": "t", "entity": entity})
    assert ok(stack, token, "recall", {"query": word})["facts"], "search works before the pause"
    ok(stack, token, "delta", {"session_id": "overload"})  # the session's cursor: past all of that

    later = f"The {word} tank moved to room 9 on Tuesday."
    with search_paused(stack):
        # recall with a query waits on search: every answer is the `unavailable` envelope with a
        # wait fix, never a function timeout (`internal`) or a hang; after BREAKER_FAILURES search
        # timeouts the sandbox stops asking the node and says so
        answers = [call(stack, token, "recall", {"query": word}) for _ in range(BREAKER_FAILURES + 1)]
        for is_error, body in answers:
            assert is_error and body["code"] == "unavailable", body
            assert body["fix"]["next"] == "wait" and body["fix"]["retry_after_seconds"] >= 1, body
        assert answers[-1][1]["detail"]["reason"] == "circuit_open", answers[-1][1]
        # what never waits on search keeps answering
        saved = ok(stack, token, "remember", {"fact": later, "provenance": "t", "entity": entity})
        assert saved["status"] in {"inserted", "superseded"} and saved["search_state"] == "pending", saved
        put = ok(stack, token, "put_page", {"slug": slug, "content": f"# Overload\n\nThe {word} tank, room 9."})
        assert put["slug"] == slug, put
        changed = ok(stack, token, "delta", {"session_id": "overload"})
        assert later in json.dumps(changed["facts"]), changed
        assert ok(stack, token, "entity", {"name": entity})["found"] is True
        assert "room 9" in ok(stack, token, "get_page", {"slug": slug})["content"]
        # recall by entity reads DynamoDB only: it answers too
        assert later in json.dumps(ok(stack, token, "recall", {"entity": entity})["facts"])

    # afterwards: the breaker lets recall through again and the write made meanwhile is searchable
    stack.drain()
    found = recall_until_answered(stack, token, {"query": word})
    assert "search_degraded" not in found, found
    assert later in json.dumps(found["facts"]), found
