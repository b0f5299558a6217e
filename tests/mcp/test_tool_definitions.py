"""tools/list as MCP clients of both eras see it, over real HTTP with the official SDK client: every
tool has a human `title` and an `outputSchema` generated from its result model, and every tool's
`structuredContent` validates (jsonschema) against the `outputSchema` it declared. The 2026-07-28
tools/list says how long it stays fresh (`ttlMs`) and that it is per token (`cacheScope`).

The LLM `synthesize` calls is the scripted stand-in (Bedrock cannot run here); everything else is
the real local server over a real store."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import jsonschema
import pytest

from fleetmem.contract.tools import TOOL_TITLES
from fleetmem.memory.registry import REGISTRY
from fleetmem.ports import Deps
from fleetmem.transport.listing import TOOLS_LIST_TTL_MS
from tests.mcp.conftest import mcp_session
from tests.mcp.test_http_jsonrpc_edges import ACCEPT, MODERN, message
from tests.transport.test_result_models import ACME, ALICE, ScriptedLLM

MODES = ["legacy", "auto"]


def test_every_registered_tool_has_a_title_of_its_own() -> None:
    assert set(TOOL_TITLES) == set(REGISTRY)
    assert len(set(TOOL_TITLES.values())) == len(TOOL_TITLES)
    assert all(title != name and title[0].isupper() for name, title in TOOL_TITLES.items())


@pytest.mark.parametrize("mode", MODES)
def test_every_listed_tool_has_a_title_and_an_output_schema_its_results_validate_against(
    mode: str, server_url: str, tokens: dict[str, str], http_deps: Deps
) -> None:
    http_deps.llm = ScriptedLLM()
    seen: set[str] = set()

    async def scenario() -> set[str]:
        async with mcp_session(server_url, tokens["admin"], mode) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            for name, tool in listed.items():
                assert tool.title == TOOL_TITLES[name], name
                schema = tool.output_schema
                assert schema and schema["type"] == "object" and schema["properties"], name
                jsonschema.Draft202012Validator.check_schema(schema)

            async def call(tool: str, **args: Any) -> dict[str, Any]:
                result = await client.call_tool(tool, args)
                assert not result.is_error, result.content[0].text
                body = result.structured_content
                jsonschema.validate(body, listed[tool].output_schema, cls=jsonschema.Draft202012Validator)
                assert body == json.loads(result.content[0].text)
                seen.add(tool)
                return body

            await call("put_page", slug="people/alice-example", content=ALICE)
            await call("put_page", slug="companies/acme-example", content=ACME, idempotency_key=f"k-{mode}")
            replay = await call("put_page", slug="companies/acme-example", content=ACME, idempotency_key=f"k-{mode}")
            assert replay["idempotent_replay"] is True
            first = await call("remember", fact="Alice prefers tea", provenance="chat", entity="people/alice-example")
            await call("remember", fact="Alice will send the roadmap", provenance="standup", entity="Ali")
            await call("recall", query="tea", budget_tokens=40)
            await call("recall", entity="Alice Example")
            await call("entity", name="Ali")
            await call("entity", name="nobody-at-all")
            await call("context_pack", entities="people/alice-example,companies/acme-example", budget_tokens=60)
            await call("delta", session_id=f"hb-{mode}")
            await call("delta", since="1970-01-01", budget_tokens=3)
            await call("get_page", slug="people/alice-example")
            await call("list_pages", limit=1)
            await call("list_facts", state="any", limit=2)
            await call("list_activity", action="write", limit=2)
            exported = await call("export_pack", entity="people/alice-example")
            await call("import_pack", pack=exported["pack"], dry_run=True)
            await call("trace_fact", id=first["id"])
            await call("memory_stats")
            await call("whoami")
            await call("synthesize", question="What does Alice prefer?")
            await call("forget", id=first["id"], reason="corrected")
            await call("purge_fact", id=first["id"], reason="deletion request")
            await call("put_page", slug="projects/rocket", content="# Rocket\n\nA project.")
            await call("delete_page", slug="projects/rocket")
            await call("list_followers")
            minted = await call("create_token", client=f"agent-{mode}", scopes=["admin"])
            await call("list_tokens")
            await call("revoke_token", token_id=minted["token_id"])
            await call("get_write_request", request_id=f"k-{mode}")  # D22 receipts
            await call("list_write_requests", limit=2)
            await call("cancel_write_request", request_id=f"k-{mode}")
            return set(listed)

    listed = anyio.run(scenario)
    assert seen == listed == set(REGISTRY)


def _modern_tools_list(server_url: str, token: str) -> dict[str, Any]:
    headers = {
        "Accept": ACCEPT,
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/list",
    }
    r = httpx.post(server_url + "/mcp", json=message("tools/list", modern=True), headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["result"]


def test_the_stateless_tools_list_says_it_stays_fresh_for_its_token(server_url: str, tokens: dict[str, str]) -> None:
    result = _modern_tools_list(server_url, tokens["read"])
    assert result["ttlMs"] == TOOLS_LIST_TTL_MS > 0
    assert result["cacheScope"] == "private"  # what is listed depends on the token's scopes
    admin = _modern_tools_list(server_url, tokens["admin"])
    assert {t["name"] for t in result["tools"]} != {t["name"] for t in admin["tools"]}
