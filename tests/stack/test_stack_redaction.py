"""Credential redaction (D25) on the deployed shape: through the local stack's front, authorizer and
each verb's own function (the built asset under the Runtime Interface Emulator, DynamoDB Local,
the OpenSearch node), a fact and a page holding an AWS key, a GitHub token and a connection-string
password come back to a remote caller — /v1 and the MCP edge — redacted from every read verb."""

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

AWS_KEY = "AKIAZ7Q2M4N8P1R5T9V3"
GITHUB = "ghp_" + "Xq7Lm2Pz9Rt4Vw8Ky3Nb6Hd1Gf5Js0Ca2Ue4"
PASSWORD = "Zq8rT2mK9vLx"
SECRETS = (AWS_KEY, GITHUB, PASSWORD)


def test_no_read_verb_returns_a_secret_through_the_functions(stack):
    token = mint(stack, ["read", "write", "admin"])
    slug = f"people/redaction-{uuid.uuid4().hex[:8]}"

    def v1(tool: str, args: dict) -> httpx.Response:
        out = httpx.post(
            f"{stack.base_url}/v1/{tool}", json=args, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )
        assert out.status_code == 200, (tool, out.text)
        return out

    fact = f"Deploy key {AWS_KEY} and CI token {GITHUB}"
    v1("remember", {"fact": fact, "provenance": f"postgres://svc:{PASSWORD}@db:5432/app", "entity": slug})
    page = f"---\ntitle: Redaction Person\ntype: person\n---\nRuns deploys with key {AWS_KEY} and {GITHUB}.\n"
    v1("put_page", {"slug": slug, "content": page})
    fact_id = v1("list_facts", {"entity": slug}).json()["facts"][0]["fact_id"]
    reads = {
        "recall": {"entity": slug},
        "entity": {"name": slug},
        "context_pack": {"entities": slug},
        "delta": {"since": "2020-01-01T00:00:00Z", "entities": slug},
        "get_page": {"slug": slug},
        "list_facts": {"entity": slug},
        "trace_fact": {"id": fact_id},
    }
    for tool, args in reads.items():
        text = v1(tool, args).text
        assert [s for s in SECRETS if s in text] == [], tool
        assert "<REDACTED:" in text, tool
    recalled = v1("recall", {"entity": slug}).json()["facts"][0]
    assert recalled["fact"] == "Deploy key <REDACTED:aws_access_key> and CI token <REDACTED:github_token>"
    assert recalled["provenance"] == "postgres://svc:<REDACTED:basic_auth>@db:5432/app"
    over_mcp = rpc(stack.mcp_url, token, "tools/call", {"name": "recall", "arguments": {"entity": slug}})
    assert over_mcp.status_code == 200, over_mcp.text
    result = json.dumps(over_mcp.json()["result"])
    assert [s for s in SECRETS if s in result] == [] and "<REDACTED:aws_access_key>" in result
