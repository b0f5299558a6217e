"""The local stack shared by every test module of tests/stack (one per test session), and the two
ways a test reaches it as a client: a token minted in its client store, a JSON-RPC call over HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
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


@pytest.fixture(scope="session")
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    with Stack(config=request.config) as s:
        yield s


def rpc(url: str, token: str, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    headers = {**HEADERS, "Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-06-18"}
    return httpx.post(url, json=body, headers=headers, timeout=60)
