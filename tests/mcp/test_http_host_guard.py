"""One guard for every route of the local server (uvicorn on 127.0.0.1): a foreign Host is 421 and a
foreign Origin 403 on /mcp, /v1, /health, the protected-resource document and unknown paths alike
(DNS-rebinding protection), and a POST /v1/<tool> body must be declared `application/json`, as a
POST /mcp body must. Every refusal is the envelope, and a refused write writes nothing."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest

from tests.mcp.test_http_errors import ACCEPT, LIST, assert_envelope

ROUTES = [
    ("POST", "/mcp"),
    ("POST", "/v1/recall"),
    ("POST", "/v1/remember"),
    ("GET", "/v1/tools"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/health"),
    ("GET", "/.well-known/oauth-protected-resource"),
    ("GET", "/.well-known/oauth-protected-resource/mcp"),
    ("GET", "/nope"),
]
FACT = {"fact": "Guarded route fact", "provenance": "test"}


def request(url: str, method: str, path: str, token: str, **extra: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", **extra}
    body = None
    if method == "POST":
        headers.setdefault("Content-Type", "application/json")
        if path == "/mcp":
            headers |= {"Accept": ACCEPT, "MCP-Protocol-Version": "2025-11-25"}
        body = httpx.Request("POST", url, json=LIST if path == "/mcp" else FACT).read()
    return httpx.request(method, url + path, content=body, headers=headers, timeout=10)


def recalled(url: str, token: str) -> list[dict]:
    r = httpx.post(url + "/v1/recall", json={"query": FACT["fact"]}, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text[:300]
    return r.json()["facts"]


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize(
    ("header", "value", "status"),
    [("Host", "evil.example", 421), ("Host", "127.0.0.1.evil.example:80", 421), ("Origin", "http://evil.example", 403)],
)
def test_a_foreign_host_or_origin_is_refused_on_every_route(
    server_url: str, tokens: dict[str, str], method: str, path: str, header: str, value: str, status: int
) -> None:
    r = request(server_url, method, path, tokens["write"], **{header: value})
    env = assert_envelope(r, status)
    assert env["code"] == "invalid_params" and env["detail"] == {"header": header.lower()}
    assert f"the {header} header does not name this server" in env["message"]
    assert "DNS-rebinding" in env["suggestion"]
    assert recalled(server_url, tokens["read"]) == []  # the refused remember wrote nothing


def test_the_servers_own_origins_and_host_names_are_served(server_url: str, tokens: dict[str, str]) -> None:
    port = urlsplit(server_url).port
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
        r = request(server_url, "POST", "/v1/remember", tokens["write"], Origin=origin)
        assert r.status_code == 200, r.text[:300]
    r = request(server_url, "GET", "/health", tokens["read"], Host=f"localhost:{port}")
    assert r.status_code == 200 and r.json()["status"] == "ok"
    assert len(recalled(server_url, tokens["read"])) == 1  # the same fact twice is one fact


@pytest.mark.parametrize(
    "content_type", ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain", None]
)
def test_a_v1_post_that_is_not_declared_json_is_400_and_writes_nothing(
    server_url: str, tokens: dict[str, str], content_type: str | None
) -> None:
    headers = {"Authorization": f"Bearer {tokens['write']}"}
    if content_type:
        headers["Content-Type"] = content_type
    body = b'{"fact": "Guarded route fact", "provenance": "test"}'
    r = httpx.post(server_url + "/v1/remember", content=body, headers=headers, timeout=10)
    env = assert_envelope(r, 400)
    assert env["message"] == "POST /v1/remember needs `Content-Type: application/json`."
    assert recalled(server_url, tokens["read"]) == []
    ok = httpx.post(
        server_url + "/v1/remember",
        content=body,
        headers={**headers, "Content-Type": "application/json; charset=utf-8"},
        timeout=10,
    )
    assert ok.status_code == 200 and ok.json()["status"] == "inserted"
