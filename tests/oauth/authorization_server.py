"""The suite's OAuth 2.1 authorization server (tests/oauth/oidc_server.mjs: panva's oidc-provider,
an OpenID-certified, maintained implementation from npm, in Cognito's place: Cognito's hosted
endpoints cannot run here), started once per test session on 127.0.0.1 on a free port, and a
person's OAuth client driving it over HTTP with httpx: dynamic registration, authorization code +
PKCE through the provider's login and consent forms (no browser), token, refresh, revocation."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx
import pytest

from tests.aws import engines

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = Path(__file__).with_name("oidc_server.mjs")
#: where the person's browser would be sent back; never fetched (the code is read from the redirect)
REDIRECT_URI = "http://127.0.0.1/callback"


def issuer(config: pytest.Config) -> str:
    """The session's authorization server (started on first use, stopped with the session)."""
    node = shutil.which("node")
    if node is None:
        engines.missing("Node.js (for the OAuth authorization server)", "apt-get install nodejs npm")
    if not (ROOT / "node_modules" / "oidc-provider").is_dir():
        engines.missing("the npm package oidc-provider", "scripts/test installs it (npm ci)")

    def start() -> tuple[str, Callable[[], None]]:
        port = engines.free_port()
        proc = subprocess.Popen(
            [str(node), str(LAUNCHER), str(port)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            preexec_fn=engines._die_with_parent,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()  # blocks until it listens or exits
        if not line.startswith("READY "):
            engines.stop_process(proc)
            raise RuntimeError(f"the authorization server did not start (code {proc.poll()})")
        return line.removeprefix("READY "), lambda: engines.stop_process(proc)

    return engines._once("oidc-provider", config, start)


def pkce_pair() -> tuple[str, str]:
    """(verifier, S256 challenge)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


@dataclass
class Tokens:
    access_token: str
    refresh_token: str | None
    scope: str


class Refused(Exception):
    """The authorization server answered with an OAuth error."""

    def __init__(self, error: str, description: str = "") -> None:
        super().__init__(f"{error}: {description}")
        self.error, self.description = error, description


def complete_authorization(http: httpx.Client, url: str, *, person: str, redirect_uri: str) -> str:
    """Follow an authorization request as a person's browser would, logging in as `person` and
    consenting on the provider's forms: the redirect to `redirect_uri` it ends in (code or error)."""
    for _ in range(12):
        r = http.get(url)
        if r.status_code in (302, 303):
            url = urljoin(url, r.headers["location"])
            if url.startswith(redirect_uri):
                return url
            continue
        if r.status_code == 200 and "/interaction/" in url:
            prompt = "login" if 'name="login"' in r.text else "consent"
            form = {"prompt": prompt, **({"login": person, "password": "x"} if prompt == "login" else {})}
            action = re.search(r'action="([^"]+)"', r.text)
            target = urljoin(url, action.group(1)) if action else url
            r = http.post(target, data=form)
            assert r.status_code in (302, 303), r.text[:300]
            url = urljoin(target, r.headers["location"])
            continue
        raise Refused("unexpected_answer", f"{r.status_code} {r.text[:200]}")
    raise Refused("too_many_redirects")


class PersonClient:
    """A public OAuth client (a person's assistant) registered dynamically at `issuer`."""

    def __init__(self, issuer: str, *, redirect_uri: str = REDIRECT_URI) -> None:
        self.issuer = issuer
        self.redirect_uri = redirect_uri
        self.http = httpx.Client(timeout=10, follow_redirects=False)
        self.meta = self.http.get(f"{issuer}/.well-known/openid-configuration").json()
        reg = self.http.post(
            self.meta["registration_endpoint"],
            json={
                "redirect_uris": [redirect_uri],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
                "client_name": "suite assistant",
            },
        )
        reg.raise_for_status()
        self.client_id = str(reg.json()["client_id"])

    def close(self) -> None:
        self.http.close()

    def authorize(
        self,
        *,
        person: str,
        resource: str,
        scope: str = "openid offline_access read write",
        challenge: str | None = None,
        method: str = "S256",
    ) -> str:
        """The authorization code after `person` logs in and consents (the provider's forms,
        posted as a browser would); raises `Refused` when the server answers an error instead."""
        params = {
            "client_id": self.client_id,
            "response_type": "code",
            "redirect_uri": self.redirect_uri,
            "scope": scope,
            "resource": resource,
            "state": secrets.token_urlsafe(8),
            "prompt": "consent",
        }
        if challenge is not None:
            params.update({"code_challenge": challenge, "code_challenge_method": method})
        url = f"{self.meta['authorization_endpoint']}?{urlencode(params)}"
        return self._code(complete_authorization(self.http, url, person=person, redirect_uri=self.redirect_uri))

    def _code(self, url: str) -> str:
        query = parse_qs(urlsplit(url).query)
        if "error" in query:
            raise Refused(query["error"][0], query.get("error_description", [""])[0])
        return query["code"][0]

    def token(self, code: str, verifier: str | None, *, resource: str | None = None) -> Tokens:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "client_id": self.client_id,
            **({"code_verifier": verifier} if verifier is not None else {}),
            **({"resource": resource} if resource else {}),
        }
        return self._tokens(form)

    def refresh(self, refresh_token: str, *, resource: str | None = None) -> Tokens:
        form = {
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
            "client_id": self.client_id,
            **({"resource": resource} if resource else {}),
        }
        return self._tokens(form)

    def revoke(self, token: str) -> None:
        r = self.http.post(self.meta["revocation_endpoint"], data={"token": token, "client_id": self.client_id})
        r.raise_for_status()

    def sign_in(self, *, person: str, resource: str, scope: str = "openid offline_access read write") -> Tokens:
        """The whole code + PKCE (S256) flow for `resource`."""
        verifier, challenge = pkce_pair()
        code = self.authorize(person=person, resource=resource, scope=scope, challenge=challenge)
        return self.token(code, verifier, resource=resource)

    def _tokens(self, form: dict[str, Any]) -> Tokens:
        r = self.http.post(self.meta["token_endpoint"], data=form)
        body = r.json()
        if r.status_code != 200:
            raise Refused(str(body.get("error")), str(body.get("error_description", "")))
        return Tokens(body["access_token"], body.get("refresh_token"), str(body.get("scope", "")))
