"""A served memory for the client and framework tests: a real `fleetmem serve` on 127.0.0.1 (a free
port, the full surface, the `hash` embedder), one per test module, and plain `/v1` calls against it.
Import the fixtures by name (`from tests.clients.served import server, token_env`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.conformance.test_conformance_local import Server, start_server


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    name = request.module.__name__.rsplit(".", 1)[-1]
    yield from start_server(tmp_path_factory.mktemp(name), surface="full", embedder="hash")


@pytest.fixture
def token_env(monkeypatch: pytest.MonkeyPatch, server: Server) -> Server:
    """The admin token in FLEETMEM_TOKEN (the client never takes a token argument)."""
    monkeypatch.setenv("FLEETMEM_TOKEN", server.token)
    return server


def base(server: Server) -> str:
    """The server's base URL (its `/mcp` URL without the path)."""
    return server.url.removesuffix("/mcp")


def v1(server: Server, tool: str, arguments: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    """A plain `/v1` request, as any HTTP caller makes it: the body (or the envelope) it answers."""
    response = httpx2.post(
        f"{base(server)}/v1/{tool}",
        json=arguments,
        headers={"Authorization": f"Bearer {token or server.token}"},
        timeout=30,
    )
    return response.json()
