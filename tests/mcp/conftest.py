"""Real-HTTP fixtures: the local MCP app under uvicorn on a free 127.0.0.1 port, over stores in a
temporary data directory, with tokens minted the way `fleetmem token create` does."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from fleetmem.adapters.local import LocalStores, open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.models import Caller
from fleetmem.pack_transfer import PackFiles
from fleetmem.ports import Deps
from fleetmem.tokens import create_client, verify_token
from fleetmem.transport.http_local import build_local_app, serve_in_thread
from tests.result_contract import validate_every_dispatch

#: The scope sets tokens are minted with, by name.
TOKEN_SCOPES: dict[str, tuple[str, ...]] = {
    "read": ("read",),
    "write": ("read", "write"),
    "write_only": ("write",),
    "admin": ("admin",),
}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def file_stores(data_dir: Path) -> Iterator[LocalStores]:
    s = open_local(data_dir)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def http_deps(file_stores: LocalStores, clock: FixedClock) -> Deps:
    return Deps.over(
        file_stores,
        clock=clock,
        ids=SortableIds(),
        embedder=HashEmbedder(),
        packs=PackFiles(),  # as wiring gives every backend
    )


@pytest.fixture
def tokens(file_stores: LocalStores, clock: FixedClock) -> dict[str, str]:
    out = {}
    for name, scopes in TOKEN_SCOPES.items():
        token, _ = create_client(file_stores.clients, clock, tenant="t1", client_id=f"agent-{name}", scopes=scopes)  # type: ignore[arg-type]
        out[name] = token
    out["other_tenant"], _ = create_client(
        file_stores.clients, clock, tenant="t2", client_id="agent-x", scopes=("read", "write")
    )
    return out


def caller_for(deps: Deps, token: str) -> Caller:
    who = verify_token(deps.clients, token, deps.clock.now())
    assert who is not None
    return who


@pytest.fixture
def serve(http_deps: Deps) -> Iterator[Callable[..., Any]]:
    """serve(surface="full") -> base URL of a running server (stopped at teardown)."""
    stack: list[Any] = []

    def start(surface: str = "full") -> str:
        cm = serve_in_thread(build_local_app(lambda: http_deps, surface=surface))  # type: ignore[arg-type]
        url = cm.__enter__()
        stack.append(cm)
        return url

    yield start
    for cm in reversed(stack):
        cm.__exit__(None, None, None)


@pytest.fixture
def server_url(serve: Callable[..., str]) -> str:
    return serve("full")


@asynccontextmanager
async def mcp_session(base_url: str, token: str | None, mode: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(base_url + "/mcp", http_client=http), mode=mode) as client:  # type: ignore[arg-type]
            yield client


@pytest.fixture(autouse=True)
def responses_match_their_result_models(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every successful dispatch in these tests must match its tool's result model."""
    checks = validate_every_dispatch(monkeypatch)
    yield
    checks.assert_clean()
