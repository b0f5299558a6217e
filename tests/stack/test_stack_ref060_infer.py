"""Reference 0.60 writes on the local stack (tests/stack/stack.py): a page written by the pages
function, then a remember with no entity through the MCP edge and the remember function is linked
to it by inference (the name items of the DynamoDB page table, D24); the request's
`_meta.session_id` crosses the edge's invoke payload and files the fact under the session; the
content_origin reads back as recall's trust stamp. Stand-ins as in tests/stack/test_stack_e2e.py."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from .conftest import mint, rpc

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]


def _call(
    stack: Any, token: str, tool: str, args: dict[str, Any], meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": args}
    if meta is not None:
        params["_meta"] = meta
    answer = rpc(stack.mcp_url, token, "tools/call", params)
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    body = json.loads(result["content"][0]["text"])
    assert result.get("isError") is not True, body
    return dict(body)


def test_inference_and_meta_session_through_the_function_processes(stack):
    token = mint(stack, ["read", "write"], tenant=f"inf{uuid.uuid4().hex[:8]}")
    mark = uuid.uuid4().hex[:6]
    slug, title = f"people/ines-okafor-{mark}", f"Ines Okafor {mark}"
    content = f'---\ntitle: {title}\ntype: person\naliases: ["Dr Okafor {mark}"]\n---\nA stack person.\n'
    _call(stack, token, "put_page", {"slug": slug, "content": content})
    session = f"s-{mark}"
    linked = _call(
        stack,
        token,
        "remember",
        {
            "fact": f"dr okafor {mark} moved the review to Friday",
            "provenance": "stack",
            "content_origin": "tool_output",
        },
        meta={"session_id": session},
    )
    assert (linked["entity_slug"], linked["entity_inferred"]) == (slug, "mention")
    competing = _call(
        stack,
        token,
        "remember",
        {"fact": f"{title} met Nobody Else {mark}", "provenance": "stack", "infer_entity": False},
    )
    assert competing["entity_slug"] is None and competing["warnings"] == ["NO_ENTITY"]
    (item,) = _call(stack, token, "recall", {"session_id": session})["facts"]
    assert (item["fact_id"], item["entity_slug"]) == (linked["id"], slug)
    assert (item["trust_tier"], item["origin"]) == ("external_untrusted", "tool_output")
    by_entity = _call(stack, token, "recall", {"entity": slug})["facts"]
    assert [f["fact_id"] for f in by_entity] == [linked["id"]]
