"""The `Auth` port on AWS: `fm_…` API tokens in the DynamoDB clients table, then Cognito
client-credentials access tokens (RS256 against the pool's JWKS), refusing app clients on the
deny-list kept in the same clients table (`fleetmem.tokens.deny_cognito_client`)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import cast

from fleetmem.models import Caller
from fleetmem.ports import ClientStore, Clock
from fleetmem.protocol import SCOPES, Scope
from fleetmem.tokens import TOKEN_PREFIX, ApiTokenAuth, cognito_client_denied, id_problem

log = logging.getLogger("fleetmem.auth")

#: A compact JWS: three base64url parts. Anything else is refused before the JWKS is consulted
#: (a made-up key id would otherwise make PyJWT fetch the pool's keys again).
_JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]{4,2048}\.[A-Za-z0-9_-]{4,8192}\.[A-Za-z0-9_-]{16,2048}")


class CognitoAuth:
    """Cognito access tokens: RS256 signature against the pool's JWKS (keys cached by PyJWT),
    issuer, expiry, `token_use == "access"`, a configured app client that is not on the
    deny-list, and at least one of this API's scopes."""

    def __init__(
        self,
        issuer: str,
        clients: Mapping[str, Mapping[str, str]],
        resource_server: str,
        *,
        deny_store: ClientStore | None = None,
        clock: Clock | None = None,
        jwks_url: str | None = None,
    ) -> None:
        import jwt

        self.issuer = issuer.rstrip("/")
        self.clients = clients
        self.resource_server = resource_server
        self.deny_store = deny_store
        self.clock = clock
        self.jwks = jwt.PyJWKClient(
            jwks_url or f"{self.issuer}/.well-known/jwks.json", cache_keys=True, lifespan=3600, timeout=3
        )

    def verify(self, token: str) -> Caller | None:
        import jwt

        if _JWT_SHAPE.fullmatch(token) is None:
            return None
        try:
            key = self.jwks.get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=["RS256"],
                issuer=self.issuer,
                options={"require": ["exp", "iss", "token_use", "client_id"], "verify_aud": False},
            )
        except jwt.PyJWTError as exc:
            log.info("jwt rejected", extra={"event": "jwt_rejected", "exc_type": type(exc).__name__})
            return None
        if claims.get("token_use") != "access":
            return None
        app_client = str(claims.get("client_id"))
        mapped = self.clients.get(app_client)
        if not mapped:
            return None
        if id_problem("tenant", str(mapped.get("tenant"))) or id_problem("client", str(mapped.get("client_id"))):
            # the deploy config refuses such ids; a hand-edited mapping must not reach the stores
            log.error("cognito client mapping refused", extra={"event": "cognito_mapping_invalid"})
            return None
        prefix = f"{self.resource_server}/"
        scopes = frozenset(
            s[len(prefix) :]
            for s in str(claims.get("scope") or "").split()
            if s.startswith(prefix) and s[len(prefix) :] in SCOPES
        )
        if not scopes:
            return None
        if self.deny_store is not None and self.clock is not None:
            if cognito_client_denied(self.deny_store, app_client, self.clock.now()):
                log.info("cognito client denied", extra={"event": "cognito_client_denied"})
                return None
        return Caller(
            tenant=mapped["tenant"], client_id=mapped["client_id"], scopes=cast(frozenset[Scope], scopes), remote=True
        )


class BearerAuth:
    """An `fm_…` API token or, when a Cognito pool is configured, a Cognito access token."""

    def __init__(self, api_tokens: ApiTokenAuth, cognito: CognitoAuth | None) -> None:
        self.api_tokens = api_tokens
        self.cognito = cognito

    def verify(self, token: str) -> Caller | None:
        if token.startswith(TOKEN_PREFIX):
            return self.api_tokens.verify(token)  # checks the token's shape before any store read
        return self.cognito.verify(token) if self.cognito is not None else None
