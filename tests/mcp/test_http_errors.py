"""Every non-2xx answer of the local server is the AGENT_OPERATOR envelope (issue 8 item 10): wrong
content type (400), no token (401), unknown path (404), wrong method (405), wrong Accept (406),
oversized body (413), foreign Host (421). The body limit is `MAX_REQUEST_BYTES`. Also the 401 fix
names the command that mints a token in THIS server's store, and the local protected-resource
document names no authorization server (item 11). Real uvicorn on 127.0.0.1, a free port."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetmem.ports import Deps
from fleetmem.transport.http_local import build_local_app, serve_in_thread, token_command
from fleetmem.transport.mcp_app import MAX_REQUEST_BYTES

ACCEPT = "application/json, text/event-stream"
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
NEXT_STEPS = {"run", "ask_user", "tell_user_to_run", "wait", "report"}


def _headers(token: str | None = None, **extra: str) -> dict[str, str]:
    h = {"Accept": ACCEPT, "Content-Type": "application/json", "MCP-Protocol-Version": "2025-11-25"}
    if token:
        h["Authorization"] = f"Bearer {token}"
    h.update(extra)
    return {k: v for k, v in h.items() if v}


def assert_envelope(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text[:300]
    assert r.headers["content-type"].startswith("application/json"), r.headers.get("content-type")
    env = r.json()
    for key in ("error", "code", "message", "suggestion", "correlation_id"):
        assert isinstance(env[key], str) and env[key].strip(), key
    assert env["class"] in {"caller", "consent", "retryable", "unavailable", "server", "host_only"}
    assert isinstance(env["retryable"], bool)
    assert env["protocol_version"] == 1 and env["contract_version"] == 1
    fix = env["fix"]
    assert fix["next"] in NEXT_STEPS and fix["why"].strip() and fix["consent"] == []
    assert ".." not in env["message"] + env["suggestion"] + fix["why"]
    return env


@pytest.fixture
def app_url(http_deps: Deps, data_dir: Path) -> Iterator[str]:
    with serve_in_thread(build_local_app(lambda: http_deps, data_dir=data_dir)) as url:
        yield url


def _chunks(total: int, size: int = 256 * 1024) -> Iterator[bytes]:
    yield b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"'
    sent = 0
    while sent < total:
        n = min(size, total - sent)
        yield b"x" * n
        sent += n
    yield b'"}}'


@pytest.mark.parametrize(
    ("method", "path", "status", "kind"),
    [
        ("POST", "/mcp", 400, "text/plain"),
        ("POST", "/mcp", 400, "no content type"),
        ("GET", "/nope", 404, "unknown path"),
        ("POST", "/mcp/extra", 404, "unknown sub-path"),
        ("GET", "/mcp", 405, "wrong method"),
        ("DELETE", "/mcp", 405, "wrong method"),
        ("POST", "/health", 405, "wrong method elsewhere"),
        ("POST", "/mcp", 406, "wrong accept"),
        ("POST", "/mcp", 413, "declared oversized"),
        ("POST", "/mcp", 413, "streamed oversized"),
        ("POST", "/mcp", 421, "foreign host"),
        ("POST", "/mcp", 401, "no token"),
    ],
)
def test_every_non_2xx_answer_is_the_envelope_with_suggestion_and_fix(
    app_url: str, tokens: dict[str, str], method: str, path: str, status: int, kind: str
) -> None:
    token = tokens["read"]
    body: Any = json.dumps(LIST).encode()
    headers = _headers(token)
    if kind == "text/plain":
        headers["Content-Type"] = "text/plain"
    elif kind == "no content type":
        headers.pop("Content-Type")
    elif kind == "wrong accept":
        headers["Accept"] = "text/html"
    elif kind == "declared oversized":
        body = b"x" * (MAX_REQUEST_BYTES + 1)
    elif kind == "streamed oversized":
        body = _chunks(MAX_REQUEST_BYTES + 1)  # no Content-Length: counted while it streams
    elif kind == "foreign host":
        headers["Host"] = "evil.example"
    elif kind == "no token":
        headers.pop("Authorization")
    r = httpx.request(method, app_url + path, content=body, headers=headers, timeout=30)
    env = assert_envelope(r, status)
    if status == 413:
        assert env["detail"]["max_bytes"] == MAX_REQUEST_BYTES
        assert str(MAX_REQUEST_BYTES) in env["message"]
    if status == 405:
        assert r.headers["allow"]
    if status == 404:
        assert env["code"] == "not_found" and "POST /mcp" in env["suggestion"]
    if status == 401:
        assert r.headers["www-authenticate"].startswith("Bearer ")


def test_a_request_under_the_body_limit_reaches_the_server(app_url: str, tokens: dict[str, str]) -> None:
    """The limit is the limit: a put_page just under it is parsed and answered by the tool (whose
    own page-body rule refuses it as a tool error), not refused by the HTTP edge."""
    content = "x" * (MAX_REQUEST_BYTES - 4096)
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "put_page", "arguments": {"slug": "notes/huge", "content": content}},
    }
    r = httpx.post(app_url + "/mcp", content=json.dumps(call).encode(), headers=_headers(tokens["write"]), timeout=60)
    assert r.status_code == 200
    result = r.json()["result"]
    assert result["isError"] is True
    assert json.loads(result["content"][0]["text"])["code"] == "invalid_params"


def test_json_rpc_errors_stay_json_rpc_errors(app_url: str, tokens: dict[str, str]) -> None:
    r = httpx.post(app_url + "/mcp", content=b"{not json", headers=_headers(tokens["read"]), timeout=10)
    assert r.json()["error"]["code"] == -32700


def test_the_401_fix_names_token_create_and_asks_for_the_data_directory_without_showing_it(
    app_url: str, data_dir: Path, tokens: dict[str, str]
) -> None:
    """Even on loopback: a 401 answers anyone who reaches the port, so it never names the path."""
    for path in ("/mcp", "/v1/whoami"):
        for token in (None, "fm_" + "x" * 43):
            r = httpx.post(app_url + path, json=LIST, headers=_headers(token), timeout=10)
            env = assert_envelope(r, 401)
            assert str(data_dir) not in r.text, path
            argv = env["fix"]["argv"]
            assert argv[:3] == ["fleetmem", "token", "create"]
            assert argv[argv.index("--data-dir") + 1] == "<data_dir>"
            assert [i["name"] for i in env["fix"]["inputs"]] == ["data_dir"]
            assert env["fix"]["command"] in env["fix"]["user_message"]
            assert env["fix"]["command"] in env["suggestion"]


def test_off_loopback_the_401_fix_asks_for_the_data_directory_instead_of_showing_it(tmp_path: Path) -> None:
    argv, inputs = token_command(tmp_path, "0.0.0.0")  # not bound: only the command is built
    assert str(tmp_path) not in argv
    assert argv[argv.index("--data-dir") + 1] == "<data_dir>"
    assert inputs == [{"name": "data_dir", "how": inputs[0]["how"]}] and inputs[0]["how"]
    assert token_command(tmp_path, "::1")[0][-1] == str(tmp_path)


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"])
def test_the_local_protected_resource_document_names_no_authorization_server(app_url: str, path: str) -> None:
    doc = httpx.get(app_url + path, timeout=5).json()
    assert "authorization_servers" not in doc
    assert doc["resource"] == app_url + "/mcp"
    assert doc["scopes_supported"] == ["read", "write", "admin"]


def test_a_configured_authorization_server_is_named(http_deps: Deps) -> None:
    app = build_local_app(lambda: http_deps, authorization_server="https://cognito-idp.example/pool")
    with serve_in_thread(app) as url:
        doc = httpx.get(url + "/.well-known/oauth-protected-resource/mcp", timeout=5).json()
    assert doc["authorization_servers"] == ["https://cognito-idp.example/pool"]
