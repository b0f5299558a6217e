"""The HTTP edge around the SDK: 405/406/401, WWW-Authenticate, the protected-resource document,
/health, token changes seen while the server runs, and JSON-RPC errors left to the SDK."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request

from fleetmem.adapters.local import LocalStores, open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.ports import Deps
from fleetmem.tokens import create_client
from fleetmem.transport.http_local import serve_in_thread
from fleetmem.transport.mcp_app import build_mcp_app, gateway_caller

ACCEPT = "application/json, text/event-stream"
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall", "arguments": {}}}


def post(
    url: str, payload: Any, token: str | None = None, accept: str | None = ACCEPT, **headers: str
) -> httpx.Response:
    h = {"MCP-Protocol-Version": "2025-11-25", **headers}
    if accept is not None:
        h["Accept"] = accept
    if token:
        h["Authorization"] = f"Bearer {token}"
    if isinstance(payload, bytes):
        return httpx.post(url + "/mcp", content=payload, headers={**h, "Content-Type": "application/json"}, timeout=10)
    return httpx.post(url + "/mcp", json=payload, headers=h, timeout=10)


def test_a_wildcard_accept_header_accepts_both_media_types(server_url: str, tokens: dict[str, str]) -> None:
    assert post(server_url, LIST, tokens["read"], accept="*/*").status_code == 200


def test_get_mcp_is_405_and_never_opens_an_event_stream(server_url: str, tokens: dict[str, str]) -> None:
    r = httpx.get(
        server_url + "/mcp",
        headers={"Accept": "text/event-stream", "Authorization": f"Bearer {tokens['read']}"},
        timeout=5,
    )
    assert r.status_code == 405
    assert r.headers["allow"] == "POST"
    env = r.json()
    assert env["code"] == "invalid_params" and env["suggestion"] and env["correlation_id"]


@pytest.mark.parametrize("accept", ["", "application/json", "text/event-stream", "text/html"])
def test_a_post_without_the_dual_accept_header_is_406(
    server_url: str, tokens: dict[str, str], accept: str | None
) -> None:
    r = post(server_url, LIST, tokens["read"], accept=accept)
    assert r.status_code == 406
    env = r.json()
    assert env["code"] == "invalid_params" and env["suggestion"] and env["contract_version"] == 1


def test_a_missing_token_is_401_with_the_resource_metadata_challenge_and_an_envelope(server_url: str) -> None:
    r = post(server_url, LIST)
    assert r.status_code == 401
    challenge = r.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{server_url}/.well-known/oauth-protected-resource/mcp"' in challenge
    env = r.json()
    assert env["code"] == "unauthorized"
    assert env["suggestion"] and env["correlation_id"]
    assert env["fix"]["next"] == "tell_user_to_run"


@pytest.mark.parametrize("authorization", ["Bearer fm_" + "x" * 43, "Bearer not-a-token", "Basic dTpw", "Bearer"])
def test_an_unknown_or_malformed_token_is_401(server_url: str, authorization: str) -> None:
    r = post(server_url, CALL, Authorization=authorization)
    assert r.status_code == 401
    assert r.json()["code"] == "unauthorized"


def test_a_token_created_while_the_server_runs_works_at_once(
    server_url: str, data_dir: Path, clock: FixedClock
) -> None:
    with open_local(data_dir) as cli_stores:  # a second process's view: the CLI writes the same file
        token, _ = create_client(cli_stores.clients, clock, tenant="t1", client_id="late", scopes=("read",))
    assert post(server_url, LIST, token).status_code == 200


def test_a_token_revoked_while_the_server_runs_is_refused_at_once(
    server_url: str, tokens: dict[str, str], data_dir: Path, clock: FixedClock
) -> None:
    assert post(server_url, LIST, tokens["read"]).status_code == 200
    with open_local(data_dir) as cli_stores:
        record = next(r for r in cli_stores.clients.list("t1") if r.client_id == "agent-read")
        cli_stores.clients.revoke(record.token_id, at=clock.now() - timedelta(seconds=1))
    r = post(server_url, LIST, tokens["read"])
    assert r.status_code == 401
    assert 'error="invalid_token"' in r.headers["www-authenticate"]


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"])
def test_the_protected_resource_document_lists_resource_servers_and_scopes(server_url: str, path: str) -> None:
    doc = httpx.get(server_url + path, timeout=5).json()
    assert doc["resource"] == server_url + "/mcp"
    # Locally there is no OAuth server to name (tests/mcp/test_http_errors.py); AWS names Cognito.
    assert "authorization_servers" not in doc
    assert doc["scopes_supported"] == ["read", "write", "admin"]
    assert doc["bearer_methods_supported"] == ["header"]


def test_health_is_ok_and_holds_no_secret(server_url: str, tokens: dict[str, str], data_dir: Path) -> None:
    r = httpx.get(server_url + "/health", timeout=5)
    assert r.status_code == 200
    assert r.json()["status"] == "ok"
    assert str(data_dir) not in r.text and all(t not in r.text for t in tokens.values())


def test_malformed_json_rpc_stays_a_json_rpc_error(server_url: str, tokens: dict[str, str]) -> None:
    r = post(server_url, b"{not json", tokens["read"])
    assert r.status_code < 500
    assert r.json()["error"]["code"] == -32700


def test_an_unknown_method_stays_a_json_rpc_error(server_url: str, tokens: dict[str, str]) -> None:
    r = post(server_url, {"jsonrpc": "2.0", "id": 3, "method": "no/such", "params": {}}, tokens["read"])
    assert r.status_code < 500
    assert r.json()["error"]["code"] == -32601


def test_a_tool_error_is_a_tool_result_not_a_json_rpc_error(server_url: str, tokens: dict[str, str]) -> None:
    r = post(
        server_url,
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
        tokens["read"],
    )
    assert r.status_code == 200
    result = r.json()["result"]
    assert result["isError"] is True and len(result["content"]) == 1


def test_a_foreign_host_header_is_refused_locally(server_url: str, tokens: dict[str, str]) -> None:
    r = post(server_url, LIST, tokens["read"], Host="evil.example")
    assert r.status_code in (400, 403, 421)


def test_behind_the_gateway_any_host_is_accepted_and_the_caller_comes_from_the_authorizer(
    http_deps: Deps,
) -> None:
    app = build_mcp_app(lambda: http_deps, caller_from_request=gateway_caller, behind_gateway=True)
    event = {"requestContext": {"authorizer": {"tenant": "t1", "client_id": "gw", "scopes": "read write"}}}

    async def with_event(scope: Any, receive: Any, send: Any) -> None:
        scope["aws.event"] = event
        await app(scope, receive, send)

    with serve_in_thread(with_event) as url:
        r = post(url, LIST, Host="abc.execute-api.eu-west-1.amazonaws.com")
        assert r.status_code == 200
        names = {t["name"] for t in r.json()["result"]["tools"]}
        assert "remember" in names


@pytest.mark.parametrize(
    ("authorizer", "expected"),
    [
        ({"tenant": "t1", "client_id": "c", "scopes": "read,write"}, ("t1", "c", {"read", "write"})),
        (
            {"lambda": {"tenant_id": "t2", "client_id": "d", "scopes": ["admin", "bogus"]}},
            ("t2", "d", {"admin"}),
        ),
        ({"client_id": "c"}, None),
        ({}, None),
    ],
)
def test_the_gateway_caller_reads_rest_and_http_api_authorizer_contexts(authorizer: dict, expected: Any) -> None:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [],
        "query_string": b"",
        "aws.event": {"requestContext": {"authorizer": authorizer}},
    }
    who = gateway_caller(Request(scope))
    if expected is None:
        assert who is None
    else:
        assert who is not None and (who.tenant, who.client_id, set(who.scopes)) == expected and who.remote


def test_a_tenant_sees_only_its_own_facts_over_http(
    server_url: str, tokens: dict[str, str], file_stores: LocalStores
) -> None:
    saved = post(
        server_url,
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {
                "name": "remember",
                "arguments": {"fact": "Alice code 9876", "provenance": "p", "entity": "Alice"},
            },
        },
        tokens["write"],
    )
    assert saved.json()["result"]["isError"] is False
    other = post(
        server_url,
        {
            "jsonrpc": "2.0",
            "id": 6,
            "method": "tools/call",
            "params": {"name": "recall", "arguments": {"entity": "Alice"}},
        },
        tokens["other_tenant"],
    )
    assert "9876" not in other.text
