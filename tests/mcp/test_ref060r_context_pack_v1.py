"""context_pack as the reference 0.60 takes it (D32) over `/v1` and MCP on a real `fleetmem serve`
(127.0.0.1, free port): `{}` and an array of entities, and the core block without private pages or
fenced content for a remote caller; /v1 and MCP give the same body."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx

from tests.mcp.conftest import mcp_session

PER_CALL = {"latency_ms"}


def _v1(server_url: str, token: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(f"{server_url}/v1/{tool}", json=args, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    return {k: v for k, v in r.json().items() if k not in PER_CALL}


def test_v1_and_mcp_pack_the_core_block_without_private_content(server_url, tokens):
    token = tokens["write"]
    _v1(
        server_url,
        token,
        "put_page",
        {
            "slug": "me/profile",
            "content": (
                "---\ncore: true\n---\nPublic intro.\n<!-- private -->\nHome is 12 Hidden Lane\n<!-- /private -->\n"
            ),
        },
    )
    _v1(
        server_url,
        token,
        "put_page",
        {"slug": "me/plans", "content": "---\ncore: true\nvisibility: private\n---\nBuy the rival.\n"},
    )
    _v1(server_url, token, "put_page", {"slug": "people/carol", "content": "# Carol\nCarol runs ops."})
    calls = [("context_pack", {}), ("context_pack", {"entities": ["Carol", " ", "nobody"]})]
    over_http = [_v1(server_url, token, tool, args) for tool, args in calls]

    async def over_mcp() -> list[dict[str, Any]]:
        out = []
        async with mcp_session(server_url, token, "legacy") as client:
            for tool, args in calls:
                result = await client.call_tool(tool, args)
                out.append({k: v for k, v in json.loads(result.content[0].text).items() if k not in PER_CALL})
        return out

    assert anyio.run(over_mcp) == over_http
    bare, named = over_http
    assert bare["core"]["pages"] == ["me/profile"] and bare["cards"] == []
    assert named["entities"] == ["Carol", "nobody"] and [c["slug"] for c in named["cards"]] == ["people/carol"]
    for body in over_http:
        assert "Public intro." in body["text"]
        assert "Hidden Lane" not in body["text"] and "Buy the rival" not in body["text"]
