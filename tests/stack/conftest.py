"""The local stack shared by every test module of tests/stack (one per test session), and the two
ways a test reaches it as a client: a token minted in its client store, a JSON-RPC call over HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetmem.adapters.local.clock import SystemClock
from tests.aws import engines

from .stack import Stack

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def mint(stack: Stack, scopes: list[str], tenant: str = "e2e", client_id: str = "") -> str:
    """A token in the stack's client store, as `fleetmem token create --backend aws` mints it."""
    from fleetmem.tokens import create_client

    stores = engines.open_stores(stack.ddb, stack.prefix)
    token, _ = create_client(
        stores.clients, SystemClock(), tenant=tenant, client_id=client_id or f"c-{uuid.uuid4().hex[:6]}", scopes=scopes
    )
    return str(token)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here shares the session's one stack: xdist keeps them on one worker (a module
    without the group would start a second stack on the other worker)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.xdist_group("stack"))


@pytest.fixture(scope="package")
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    """One stack for the package's tests (they run one after another on one worker). It stops, and
    its tables and search index go, when the last of them is done: the worker goes on with other
    tests, and an idle stack would keep polling its streams and DynamoDB Local holding its tables."""
    with Stack(config=request.config) as s:
        yield s
    engines.drop_tables(s.ddb, s.prefix)
    httpx.delete(f"{s.search_url}/{s.index_prefix}-docs-*", timeout=60)


def rpc(url: str, token: str, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    headers = {**HEADERS, "Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-06-18"}
    return httpx.post(url, json=body, headers=headers, timeout=60)
