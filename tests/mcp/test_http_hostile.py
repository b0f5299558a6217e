"""Property over real HTTP: hostile tools/call arguments never give a 5xx or `internal`, and every
error is one text block holding an envelope with a non-empty suggestion."""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.transport.test_hostile_arguments import TOOLS, arguments, json_value

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tool=st.one_of(st.sampled_from(TOOLS), st.text(max_size=20)), args=st.one_of(arguments, json_value))
def test_hostile_calls_over_http_never_break_the_server(
    server_url: str, tokens: dict[str, str], tool: str, args: Any
) -> None:
    payload = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}}
    # json.dumps escapes unpaired surrogates (\ud800), which a JSON body may legally carry.
    r = httpx.post(
        server_url + "/mcp",
        content=json.dumps(payload).encode(),
        timeout=30,
        headers={**HEADERS, "Content-Type": "application/json", "Authorization": f"Bearer {tokens['admin']}"},
    )
    assert r.status_code < 500
    reply = r.json()
    if "error" in reply:
        # The SDK answers at the JSON-RPC layer when arguments are not an object (invalid params) or
        # hold an unpaired surrogate, which its strict JSON parser refuses (parse error).
        assert not isinstance(args, dict) or "\\ud" in json.dumps(args).lower(), reply
        return
    result = reply["result"]
    if result["isError"]:
        assert len(result["content"]) == 1
        env = json.loads(result["content"][0]["text"])
        assert env["code"] != "internal", (tool, args, env)
        assert env["suggestion"].strip()
    else:
        json.loads(result["content"][0]["text"])
