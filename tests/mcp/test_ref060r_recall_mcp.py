"""recall's reference 0.60 reads over the local server's real HTTP edges (D31): `since` ANDed with
`session_id`, and `budget_policy` with its `budget_packing`, through the official `mcp` SDK client
in both protocol eras and through `/v1`; a bad policy is `invalid_params` on each edge."""

from __future__ import annotations

import json
import uuid
from typing import Any

import anyio
import httpx
import pytest

from tests.mcp.conftest import mcp_session

MODES = ["legacy", "auto"]
FUTURE = "2999-01-01T00:00:00Z"


def body(result: Any) -> dict[str, Any]:
    return json.loads(result.content[0].text)


@pytest.mark.parametrize("mode", MODES)
def test_since_ands_with_session_id_and_query_first_reports_its_packing(
    mode: str, server_url: str, tokens: dict[str, str]
) -> None:
    session = f"s-{mode}-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        async with mcp_session(server_url, tokens["write"], mode) as client:
            saved = await client.call_tool(
                "remember", {"fact": f"gate code changed ({mode})", "provenance": "chat", "session_id": session}
            )
            assert not saved.is_error, body(saved)
            everything = body(await client.call_tool("recall", {"session_id": session}))
            assert len(everything["facts"]) == 1
            later = body(await client.call_tool("recall", {"session_id": session, "since": FUTURE}))
            assert later["facts"] == []
            packed = body(
                await client.call_tool(
                    "recall",
                    {"session_id": session, "query": "gate code", "budget_tokens": 500, "budget_policy": "query_first"},
                )
            )
            assert packed["budget_packing"]["policy"] == "query_first" and packed["budget_packing"]["applied"]
            assert packed["budget_packing"]["facts"]["kept"] == 1
            bad = await client.call_tool("recall", {"session_id": session, "budget_policy": "pages_first"})
            assert bad.is_error and body(bad)["error"] == "invalid_params"

    anyio.run(scenario)


def test_v1_recall_takes_since_with_session_id_and_budget_policy(server_url: str, tokens: dict[str, str]) -> None:
    auth = {"Authorization": f"Bearer {tokens['write']}"}
    session = f"s-v1-{uuid.uuid4().hex[:8]}"
    saved = httpx.post(
        f"{server_url}/v1/remember",
        json={"fact": "the v1 gate fact", "provenance": "p", "session_id": session},
        headers=auth,
    )
    assert saved.status_code == 200, saved.text
    later = httpx.post(f"{server_url}/v1/recall", json={"session_id": session, "since": FUTURE}, headers=auth)
    assert later.status_code == 200 and later.json()["facts"] == []
    packed = httpx.post(
        f"{server_url}/v1/recall",
        json={"session_id": session, "budget_tokens": 1, "budget_policy": "facts_first"},
        headers=auth,
    ).json()
    assert packed["budget_packing"] == {
        "policy": "facts_first",
        "applied": True,
        "reason": "first_items_exceed_budget",
        "facts": {"candidates": 1, "kept": 0, "dropped": 1, "used": 0},
        "results": {"candidates": 0, "kept": 0, "dropped": 0, "used": 0},
    }
    bad = httpx.post(f"{server_url}/v1/recall", json={"budget_policy": 7}, headers=auth)
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_params"
