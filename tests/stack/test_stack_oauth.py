"""People sign in to the deployed shape with OAuth 2.1: authorization code + PKCE at a real
authorization server, then MCP calls through the front, the authorizer function and the edge.

Real components: the authorization server is panva's oidc-provider (tests/oauth/oidc_server.mjs, a
node process on 127.0.0.1 in Cognito's place: Cognito's hosted endpoints cannot run here), driven
over HTTP with httpx through its login and consent forms; the stack's functions run under the
Lambda Runtime Interface Emulator with the clients table on DynamoDB Local (tests/stack/stack.py).
This module starts its own stack (the authorizer, the edge and the admin function, which serves
`whoami`) configured with that issuer and an authorizer cache TTL of 0, so a revocation is seen on
the next request without waiting."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from fleetmem.adapters.local.clock import SystemClock
from fleetmem.tokens import map_person
from tests.aws import engines
from tests.oauth.authorization_server import PersonClient, Refused
from tests.oauth.authorization_server import issuer as start_issuer

from .conftest import HEADERS, rpc
from .stack import ROOT, Stack

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack-oauth"),
]


@pytest.fixture(scope="module")
def oauth_issuer(request: pytest.FixtureRequest) -> str:
    return start_issuer(request.config)


@pytest.fixture(scope="module")
def people_stack(request: pytest.FixtureRequest, oauth_issuer: str) -> Iterator[Stack]:
    with Stack(
        config=request.config,
        groups=("authorizer", "mcp", "admin"),
        oauth_issuer=oauth_issuer,
        oauth_jwks_url=f"{oauth_issuer}/jwks",
        authorizer_cache_ttl_s=0,
    ) as s:
        yield s


@pytest.fixture
def assistant(oauth_issuer: str) -> Iterator[PersonClient]:
    c = PersonClient(oauth_issuer)
    yield c
    c.close()


def person(stack: Stack, oauth_issuer: str, scopes: list[str]) -> tuple[str, str, Any]:
    """A person mapped to a fresh tenant: (sub, tenant, mapping record)."""
    sub = f"person-{uuid.uuid4().hex[:8]}"
    tenant = f"people-{uuid.uuid4().hex[:6]}"
    stores = engines.open_stores(stack.ddb, stack.prefix)
    record, _ = map_person(
        stores.clients,
        SystemClock(),
        issuer=oauth_issuer,
        subject=sub,
        tenant=tenant,
        client_id="laptop",
        scopes=scopes,
    )
    return sub, tenant, record


def whoami(stack: Stack, token: str) -> httpx.Response:
    return rpc(stack.mcp_url, token, "tools/call", {"name": "whoami", "arguments": {}})


def identity(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert not result.get("isError"), result
    return dict(result.get("structuredContent") or json.loads(result["content"][0]["text"]))


def test_the_stage_points_a_client_at_its_authorization_server(people_stack, oauth_issuer):
    denied = httpx.post(people_stack.mcp_url, json={}, headers=HEADERS, timeout=30)
    assert denied.status_code == 401
    challenge = denied.headers["www-authenticate"]
    metadata_url = f"{people_stack.base_url}/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{metadata_url}"' in challenge
    assert 'scope="read write admin"' in challenge
    doc = httpx.get(metadata_url, timeout=30).json()
    assert doc["resource"] == people_stack.mcp_url
    assert doc["authorization_servers"] == [oauth_issuer]


def test_a_person_signed_in_with_code_and_pkce_calls_as_their_mapped_tenant(people_stack, oauth_issuer, assistant):
    sub, tenant, _ = person(people_stack, oauth_issuer, ["read", "write"])
    tokens = assistant.sign_in(person=sub, resource=people_stack.mcp_url)
    me = identity(whoami(people_stack, tokens.access_token))
    assert me["tenant"] == tenant
    assert me["client_id"] == "laptop"
    assert set(me["scopes"]) == {"read", "write"}


def test_scopes_are_the_least_of_the_token_and_the_mapping(people_stack, oauth_issuer, assistant):
    sub, _, _ = person(people_stack, oauth_issuer, ["read"])
    tokens = assistant.sign_in(person=sub, resource=people_stack.mcp_url, scope="openid read write admin")
    assert set(identity(whoami(people_stack, tokens.access_token))["scopes"]) == {"read"}
    # a token granting none of the mapping's scopes: valid, but not allowed here
    only_openid = assistant.sign_in(person=sub, resource=people_stack.mcp_url, scope="openid")
    refused = whoami(people_stack, only_openid.access_token)
    assert refused.status_code == 403 and refused.json()["code"] == "scope_denied"


@pytest.mark.parametrize("resource", ["http://127.0.0.1:1/mcp", "another stage"])
def test_a_token_for_another_resource_or_stage_is_refused(people_stack, oauth_issuer, assistant, resource):
    sub, _, _ = person(people_stack, oauth_issuer, ["read", "write"])
    if resource == "another stage":  # the same front, another stage name in the path
        resource = people_stack.mcp_url.replace("/mcp", "/prod/mcp")
    tokens = assistant.sign_in(person=sub, resource=resource)
    refused = whoami(people_stack, tokens.access_token)
    assert refused.status_code == 401, refused.text
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert refused.json()["code"] == "unauthorized"


def test_a_person_no_mapping_names_gets_403_and_no_tenant(people_stack, assistant):
    tokens = assistant.sign_in(person=f"stranger-{uuid.uuid4().hex[:8]}", resource=people_stack.mcp_url)
    refused = whoami(people_stack, tokens.access_token)
    assert refused.status_code == 403, refused.text
    body = refused.json()
    assert body["code"] == "scope_denied"
    assert "tenant" not in json.dumps(body.get("detail") or {})


def test_a_refreshed_token_works_and_revocation_ends_both_ways(people_stack, oauth_issuer, assistant):
    sub, tenant, record = person(people_stack, oauth_issuer, ["read", "write"])
    first = assistant.sign_in(person=sub, resource=people_stack.mcp_url)
    assert first.refresh_token
    fresh = assistant.refresh(first.refresh_token, resource=people_stack.mcp_url)
    assert identity(whoami(people_stack, fresh.access_token))["tenant"] == tenant

    # revoked at the authorization server: no new access token from that refresh token
    assert fresh.refresh_token
    assistant.revoke(fresh.refresh_token)
    with pytest.raises(Refused):
        assistant.refresh(fresh.refresh_token, resource=people_stack.mcp_url)

    # revoked at the stage (the mapping, as `token revoke per_…` does): the live access token is
    # refused from the next request (the authorizer cache TTL is 0 here: the bound is that TTL)
    stores = engines.open_stores(people_stack.ddb, people_stack.prefix)
    stores.clients.revoke(record.token_id, at=SystemClock().now())
    refused = whoami(people_stack, fresh.access_token)
    assert refused.status_code == 403, refused.text


def test_the_official_mcp_client_discovers_registers_signs_in_and_calls(people_stack, oauth_issuer):
    """The MCP Python SDK's `OAuthClientProvider` from the stage's 401: the protected-resource
    metadata, the authorization server's metadata, dynamic registration, code + PKCE with the
    resource indicator, token, then the call. Only the person's browser is scripted (the provider's
    login and consent forms, posted with httpx)."""
    import httpx2
    from mcp.client import Client as McpClient
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

    from tests.oauth.authorization_server import REDIRECT_URI, complete_authorization

    sub, tenant, _ = person(people_stack, oauth_issuer, ["read", "write"])
    landed: list[str] = []

    class Memory:
        tokens: Any = None
        client: Any = None

        async def get_tokens(self) -> Any:
            return self.tokens

        async def set_tokens(self, tokens: Any) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> Any:
            return self.client

        async def set_client_info(self, info: Any) -> None:
            self.client = info

    async def browser(url: str) -> None:
        with httpx.Client(timeout=10, follow_redirects=False) as http:
            landed.append(complete_authorization(http, url, person=sub, redirect_uri=REDIRECT_URI))

    async def callback() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(landed[-1]).query)
        return AuthorizationCodeResult(
            code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
        )

    storage = Memory()
    auth = OAuthClientProvider(
        people_stack.mcp_url,
        OAuthClientMetadata(
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            client_name="sdk assistant",
        ),
        storage,
        redirect_handler=browser,
        callback_handler=callback,
    )

    async def call() -> dict[str, Any]:
        async with httpx2.AsyncClient(auth=auth, timeout=60) as http:
            async with McpClient(streamable_http_client(people_stack.mcp_url, http_client=http)) as mcp:
                result = await mcp.call_tool("whoami", {})
                return dict(result.structured_content or json.loads(result.content[0].text))

    me = asyncio.run(call())
    assert me["tenant"] == tenant
    assert set(me["scopes"]) == {"read", "write"}  # the 401's scope asked for, capped by the mapping
    assert storage.client is not None and storage.tokens is not None  # registered, then signed in


TS_CLIENT = Path(__file__).with_name("ts_oauth_client.mjs")


class NodeLines:
    """A node process spoken to one JSON line at a time (stdout read on a thread, bounded waits)."""

    def __init__(self, *argv: str) -> None:
        self.errors = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: node never blocks on it
        self.proc = subprocess.Popen(
            list(argv),
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            text=True,
            preexec_fn=engines._die_with_parent,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.put(line)
            self.lines.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def read(self, timeout: float = 60) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            line = ""
        if not line:
            code = self.proc.poll() if line == "" else self.proc.wait()
            self.errors.seek(0)
            said = self.errors.read()[-2000:]
            raise AssertionError(f"no line from the TypeScript client in {timeout} s (exit {code}): {said}")
        return dict(json.loads(line))

    def write(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        engines.stop_process(self.proc)
        self.errors.close()


def test_the_typescript_sdk_discovers_registers_signs_in_calls_refreshes_and_is_revoked(people_stack, oauth_issuer):
    """The official MCP TypeScript SDK (@modelcontextprotocol/sdk 1.32.2, its
    `StreamableHTTPClientTransport` with an `OAuthClientProvider`; tests/stack/ts_oauth_client.mjs)
    from the stage's 401: the protected-resource metadata, the authorization server's metadata,
    dynamic registration, code + PKCE with the resource indicator, token, the call; then an expired
    access token sends it to refresh on the stage's 401, and once the refresh token is revoked at
    the authorization server the refresh and the call are refused (`invalid_grant`). Only the person's
    browser is the test's (the provider's login and consent forms, posted with httpx)."""
    node = shutil.which("node")
    if node is None or not (ROOT / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        engines.missing("Node.js and @modelcontextprotocol/sdk", "scripts/test installs it (npm ci)")
    from tests.oauth.authorization_server import REDIRECT_URI, complete_authorization

    sub, tenant, _ = person(people_stack, oauth_issuer, ["read", "write"])
    client = NodeLines(str(node), str(TS_CLIENT), people_stack.mcp_url, REDIRECT_URI)
    try:
        asked = client.read()
        authorize = urlsplit(asked["authorize"])
        params = parse_qs(authorize.query)
        assert params["resource"] == [people_stack.mcp_url]  # the audience it asks for: this stage
        assert params["code_challenge_method"] == ["S256"]
        assert f"{authorize.scheme}://{authorize.netloc}".startswith(oauth_issuer)
        with httpx.Client(timeout=10, follow_redirects=False) as browser:
            client.write(complete_authorization(browser, asked["authorize"], person=sub, redirect_uri=REDIRECT_URI))
        first = client.read()["whoami"]
        assert first["tenant"] == tenant
        assert set(first["scopes"]) == {"read", "write"}  # asked "read write admin", capped by the mapping

        refreshed = client.read()
        assert refreshed["renewed"] is True and refreshed["whoami"]["tenant"] == tenant
        assert refreshed["refresh_token"]
        meta = httpx.get(f"{oauth_issuer}/.well-known/openid-configuration", timeout=10).json()
        revoked = httpx.post(
            meta["revocation_endpoint"],
            data={"token": refreshed["refresh_token"], "client_id": refreshed["client_id"]},
            timeout=10,
        )
        assert revoked.status_code == 200, revoked.text
        client.write("again")
        assert client.read() == {"refused": "InvalidGrantError"}  # the refresh, and so the call
    finally:
        client.close()


def fleetmem(stack: Stack, *args: str) -> dict:
    """The real CLI on the stack's clients table (`--backend aws`), as a stage's operator runs it."""
    cli = Path(sys.executable).parent / "fleetmem"
    done = subprocess.run(
        [str(cli), *args, "--backend", "aws", "--json"],
        env={**os.environ, **stack.client_env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_operator_maps_and_unmaps_a_person_with_the_cli(people_stack, oauth_issuer, assistant):
    sub, tenant = f"person-{uuid.uuid4().hex[:8]}", f"people-{uuid.uuid4().hex[:6]}"
    tokens = assistant.sign_in(person=sub, resource=people_stack.mcp_url)
    assert whoami(people_stack, tokens.access_token).status_code == 403  # not mapped yet
    mapped = fleetmem(
        people_stack,
        *("token", "map-person", "--issuer", oauth_issuer, "--subject", sub),
        *("--tenant", tenant, "--client", "phone", "--scopes", "read"),
    )
    assert mapped["mapped"] is True and mapped["token_id"].startswith("per_")
    me = identity(whoami(people_stack, tokens.access_token))  # the next request: the cache TTL is 0
    assert (me["tenant"], me["client_id"], me["scopes"]) == (tenant, "phone", ["read"])
    listed = fleetmem(people_stack, "token", "list", "--tenant", tenant)["tokens"]
    assert [t["token_id"] for t in listed] == [mapped["token_id"]]
    fleetmem(people_stack, "token", "revoke", mapped["token_id"])
    assert whoami(people_stack, tokens.access_token).status_code == 403
