"""The direct `tools/call` answer (`fast_call.FastToolCalls`) sends the bytes the SDK sends.

Two real apps over one SQLite store, one with the direct answer and one without (`fast_calls=False`:
the SDK answers every request), each served on 127.0.0.1. Every request below goes to both and the
answers must match byte for byte: status, every header but `date`, and the body, with only the
per-call correlation ids (random by design) replaced by one placeholder of the same length. Both
protocol eras, successes, refusals and malformed requests alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.ports import Deps
from fleetmem.tokens import create_client
from fleetmem.transport.fast_call import FastToolCalls
from fleetmem.transport.http_local import build_local_app, serve_in_thread
from fleetmem.wiring import HashEmbedder, SortableIds
from tests.transport.test_token_lookup import NOW

CID = re.compile(rb"c_[0-9a-f]{32}")
ACCEPT = "application/json, text/event-stream"


def _call(n: Any, name: str | None, arguments: Any = None, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": dict(params)}
    if name is not None:
        body["params"]["name"] = name
    if arguments is not None:
        body["params"]["arguments"] = arguments
    return body


#: (label, token key, extra headers, JSON body or raw bytes)
REQUESTS: list[tuple[str, str, dict[str, str], Any]] = [
    ("whoami", "rw", {}, _call(1, "whoami", {})),
    ("whoami, string id, no arguments", "rw", {}, _call("a-1", "whoami")),
    ("whoami, 2025-11-25", "rw", {"MCP-Protocol-Version": "2025-11-25"}, _call(2, "whoami", {})),
    ("whoami, no version header", "rw", {"MCP-Protocol-Version": ""}, _call(3, "whoami", {})),
    ("get_page miss", "rw", {}, _call(4, "get_page", {"slug": "nobody/nothing"})),
    ("recall with a session _meta", "rw", {}, _call(5, "recall", {"entity": "people/x"}, _meta={"session_id": "s-1"})),
    ("remember, read-only token: scope_denied", "ro", {}, _call(6, "remember", {"fact": "x", "provenance": "t"})),
    ("remember, invalid params", "rw", {}, _call(7, "remember", {"provenance": "t"})),
    ("unknown tool", "rw", {}, _call(8, "no_such_tool", {})),
    ("arguments not an object", "rw", {}, _call(9, "whoami", [1, 2])),
    ("no tool name", "rw", {}, _call(10, None, {})),
    ("params not an object", "rw", {}, {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": [1]}),
    ("a notification", "rw", {}, {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "whoami"}}),
    ("a batch", "rw", {}, [_call(12, "whoami", {}), _call(13, "whoami", {})]),
    ("tools/list", "rw", {}, {"jsonrpc": "2.0", "id": 14, "method": "tools/list"}),
    ("bad JSON", "rw", {}, b'{"jsonrpc": "2.0", "id": 15, "method": "tools/call", '),
    ("Content-Type in capitals", "rw", {"Content-Type": "Application/JSON"}, _call(16, "whoami", {})),
    ("unsupported version", "rw", {"MCP-Protocol-Version": "1999-01-01"}, _call(17, "whoami", {})),
    (
        "2026-era whoami",
        "rw",
        {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "whoami"},
        _call(18, "whoami", {}),
    ),
    (
        "2026-era get_page miss",
        "rw",
        {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "get_page"},
        _call(19, "get_page", {"slug": "nobody/nothing"}),
    ),
]


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[str, str, dict[str, str]]]:
    data_dir = tmp_path / "data"
    stores = open_local(data_dir)
    clock = FixedClock(NOW)
    deps = Deps.over(stores, clock=clock, ids=SortableIds(), embedder=HashEmbedder())
    tokens = {
        "rw": create_client(stores.clients, clock, tenant="t1", client_id="rw", scopes=("read", "write"))[0],
        "ro": create_client(stores.clients, clock, tenant="t1", client_id="ro", scopes=("read",))[0],
    }
    fast = build_local_app(lambda: deps, data_dir=data_dir)
    sdk = build_local_app(lambda: deps, data_dir=data_dir, fast_calls=False)
    with serve_in_thread(fast) as fast_url, serve_in_thread(sdk) as sdk_url:
        yield fast_url, sdk_url, tokens
    stores.close()


def _answer(client: httpx.Client, url: str, token: str, headers: dict[str, str], body: Any) -> tuple[Any, ...]:
    sent = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Content-Type": "application/json"}
    sent.update({"MCP-Protocol-Version": "2025-06-18"} | headers)
    sent = {k: v for k, v in sent.items() if v}
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = client.post(f"{url}/mcp", content=raw, headers=sent)
    kept = [(k, CID.sub(b"c_" + b"0" * 32, v.encode()).decode()) for k, v in r.headers.multi_items() if k != "date"]
    return r.status_code, kept, CID.sub(b"c_" + b"0" * 32, r.content)


def test_every_request_gets_the_same_bytes_with_and_without_the_direct_answer(
    servers: tuple[str, str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast_url, sdk_url, tokens = servers
    direct: list[bool] = []
    real = FastToolCalls.answer

    async def answer(self: FastToolCalls, raw: bytes, request: Any) -> Any:
        response = await real(self, raw, request)
        direct.append(response is not None)
        return response

    monkeypatch.setattr(FastToolCalls, "answer", answer)
    taken = set()
    with httpx.Client(timeout=20) as client:
        statuses = set()
        for label, who, headers, body in REQUESTS:
            first = _answer(client, sdk_url, tokens[who], headers, body)
            direct.clear()
            second = _answer(client, fast_url, tokens[who], headers, body)
            assert second == first, label
            statuses.add(first[0])
            if any(direct):
                taken.add(label)
    # the list reaches successes, JSON-RPC errors and HTTP refusals alike
    assert {200, 202} <= statuses and any(status >= 400 for status in statuses), statuses
    # and the direct answer really answered the handshake-era calls, refusals included, and no other
    assert taken == {
        "whoami",
        "whoami, string id, no arguments",
        "whoami, 2025-11-25",
        "whoami, no version header",
        "get_page miss",
        "recall with a session _meta",
        "remember, read-only token: scope_denied",
        "remember, invalid params",
        "unknown tool",
    }, taken
