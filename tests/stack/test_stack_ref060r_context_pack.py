"""context_pack as the reference 0.60 takes it (D32) on the deployed shape: the section's
conformance cases in both MCP eras through every function process (the local stack: front,
authorizer, the MCP edge, each verb's own function under the Runtime Interface Emulator, DynamoDB
Local, the OpenSearch node), and `/v1` straight to the tool function: `{}`, an array of entities,
and a core block without a private core page or fenced content."""

from __future__ import annotations

import uuid

import httpx
import pytest

from fleetmem.conformance import run as run_conformance

from .conftest import mint

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]

SECTION = "reference 0.60 reads: context_pack"


def test_the_context_pack_section_passes_in_both_eras_through_the_functions(stack):
    token, read_token = mint(stack, ["read", "write", "admin"]), mint(stack, ["read"])
    report = run_conformance(
        stack.mcp_url, token, json=True, read_token=read_token, surface="full", log=lambda _l: None, sections=(SECTION,)
    )
    failed = [f"[{c['era']}] {c['id']}: {c['detail']}" for c in report["cases"] if c["status"] == "failed"]
    assert failed == [], "\n".join(failed) + "\n" + stack.function_log("mcp")
    passed = {(c["era"], c["id"]) for c in report["cases"] if c["status"] == "passed"}
    assert {era for era, _ in passed} == {"legacy", "auto"} and len(passed) == len(report["cases"]) >= 8


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
