"""context_pack as the reference 0.60 takes it (D32) on the deployed shape (the local stack: front,
authorizer, each verb's own function under the Runtime Interface Emulator, DynamoDB Local, the
OpenSearch node): `/v1` straight to the tool function packs a core block without a private core page
or fenced content. The section's conformance cases run in both MCP eras through every function
process with the whole suite, in test_stack_e2e."""

from __future__ import annotations

import uuid

import httpx
import pytest

from .conftest import mint

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]


def test_v1_packs_the_core_block_without_private_content(stack):
    token = mint(stack, ["read", "write"])
    marker = uuid.uuid4().hex[:8]

    def v1(tool: str, args: dict) -> dict:
        out = httpx.post(
            f"{stack.base_url}/v1/{tool}", json=args, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )
        assert out.status_code == 200, (tool, out.text)
        return out.json()

    public = f"me/profile-{marker}"
    v1(
        "put_page",
        {
            "slug": public,
            "content": f"---\ncore: true\n---\nIntro {marker}.\n<!-- private -->\nFenced {marker}\n<!-- /private -->\n",
        },
    )
    v1(
        "put_page",
        {"slug": f"me/plans-{marker}", "content": f"---\ncore: true\nvisibility: private\n---\nPlan {marker}\n"},
    )
    bare = v1("context_pack", {})
    assert bare["entities"] == [] and public in bare["core"]["pages"]
    assert f"Intro {marker}." in bare["text"]
    assert f"Fenced {marker}" not in bare["text"] and f"Plan {marker}" not in bare["text"]
    named = v1("context_pack", {"entities": [" ", f"nobody-{marker}"], "budget_tokens": 4000})
    assert named["entities"] == [f"nobody-{marker}"] and named["core"]["revision"] == bare["core"]["revision"]
