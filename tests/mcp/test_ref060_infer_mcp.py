"""Reference 0.60 writes over the local server's real HTTP edges (D24): the request's
`_meta.session_id` on a `tools/call` through the official `mcp` SDK client in both protocol
eras, `_meta` in a `/v1` body, and entity inference with its answer fields over MCP."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx
import pytest

from fleetmem.models import Page
from fleetmem.ports import Deps
from tests.mcp.conftest import mcp_session

MODES = ["legacy", "auto"]


def body(result: Any) -> dict[str, Any]:
    return json.loads(result.content[0].text)


@pytest.mark.parametrize("mode", MODES)
def test_the_requests_meta_session_id_files_the_fact_and_recall_finds_it(
    mode: str, server_url: str, tokens: dict[str, str]
) -> None:
    session = f"s-{mode}-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        async with mcp_session(server_url, tokens["write"], mode) as client:
            saved = await client.call_tool(
                "remember",
                {"fact": f"standup moved to 10:00 ({mode})", "provenance": "chat"},
                meta={"session_id": session},
            )
            assert not saved.is_error, body(saved)
            found = await client.call_tool("recall", {"session_id": session})
            assert [f["fact_id"] for f in body(found)["facts"]] == [body(saved)["id"]]
            assert body(found)["facts"][0]["session_id"] == session

    anyio.run(scenario)


@pytest.mark.parametrize("mode", MODES)
def test_inference_links_over_mcp_and_an_unattributed_save_warns(
    mode: str, server_url: str, tokens: dict[str, str], http_deps: Deps
) -> None:
    name = f"Quinn Halvorsen {mode.title()}"
    slug = f"people/quinn-halvorsen-{mode}"
    now = datetime.now(UTC)
    http_deps.pages.put(Page(tenant="t1", slug=slug, title=name, created_at=now, updated_at=now))  # the tokens' tenant

    async def scenario() -> None:
        async with mcp_session(server_url, tokens["write"], mode) as client:
            linked = await client.call_tool(
                "remember", {"fact": f"{name} approved the budget", "provenance": "chat", "content_origin": "user_said"}
            )
            assert not linked.is_error, body(linked)
            assert (body(linked)["entity_slug"], body(linked)["entity_inferred"]) == (slug, "mention")
            alone = await client.call_tool("remember", {"fact": f"nobody in particular ({mode})", "provenance": "chat"})
            assert body(alone)["warnings"] == ["NO_ENTITY"] and "`entity`" in body(alone)["hint"]
            found = await client.call_tool("recall", {"entity": slug})
            (item,) = body(found)["facts"]
            assert (item["trust_tier"], item["origin"]) == ("agent_written", "user_said")

    anyio.run(scenario)


def test_meta_session_id_in_a_v1_body(server_url: str, tokens: dict[str, str]) -> None:
    auth = {"Authorization": f"Bearer {tokens['write']}"}
    session = f"s-v1-{uuid.uuid4().hex[:8]}"
    saved = httpx.post(
        f"{server_url}/v1/remember",
        json={"fact": "the v1 session fact", "provenance": "p", "_meta": {"session_id": session}},
        headers=auth,
    )
    assert saved.status_code == 200, saved.text
    found = httpx.post(f"{server_url}/v1/recall", json={"session_id": session}, headers=auth).json()
    assert [f["fact_id"] for f in found["facts"]] == [saved.json()["id"]]
