"""Over MCP with the real MiniLM model: `recall {query}` puts a fact that shares no keyword with the
query in its top 5 among thirty unrelated facts, in both protocol eras, without search_degraded."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from fleetmem.adapters.local.embedder import MiniLMEmbedder
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.config import Settings
from fleetmem.embedder_build import build_embedder
from fleetmem.ports import Deps
from tests.mcp.conftest import mcp_session
from tests.unit.embedder.test_hybrid_recall_minilm import BY_MEANING, FACTS

pytestmark = pytest.mark.slow


@pytest.fixture
def http_deps(file_stores, clock) -> Deps:
    """The served deps, with the real model instead of the hashing embedder."""
    model_dir: Path = Settings().model_dir
    build_embedder(model_dir, progress=lambda _line: None)
    return Deps.over(file_stores, clock=clock, ids=SortableIds(), embedder=MiniLMEmbedder(model_dir))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_recall_by_meaning_over_mcp(mode: str, server_url: str, tokens: dict[str, str]) -> None:
    async def scenario() -> None:
        async with mcp_session(server_url, tokens["write"], mode) as client:
            ids = {}
            for text in FACTS:
                saved = await client.call_tool("remember", {"fact": text, "provenance": "test"})
                assert not saved.is_error
                ids[text] = json.loads(saved.content[0].text)["id"]
            for fact, query in BY_MEANING:
                result = await client.call_tool("recall", {"query": query})
                assert not result.is_error
                body = json.loads(result.content[0].text)
                assert "search_degraded" not in body
                assert ids[fact] in [f["fact_id"] for f in body["facts"][:5]], (query, body["facts"][:5])

    anyio.run(scenario)
