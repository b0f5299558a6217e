"""The `Auth` port on AWS: `fm_…` API tokens in the DynamoDB clients table, then Cognito
client-credentials access tokens (RS256 against the pool's JWKS) whose app client is mapped to a
(tenant, client, tier) in the same table (`fleetmem.tokens.map_cognito_client`), refusing app
clients on the deny-list kept there too (`fleetmem.tokens.deny_cognito_client`).

A mapping found is kept for `mapping_ttl_s` (the stage's revocation bound, the authorizer cache
TTL: a revoked mapping is refused no later than a cached Allow would be); a missing one is asked
again on the next request, so an app client mapped at run time works from then on."""

from __future__ import annotations

import logging
import re
import time
from typing import cast

from fleetmem.models import Caller, ClientRecord
from fleetmem.ports import ClientStore, Clock
from fleetmem.protocol import SCOPES, Scope
from fleetmem.tokens import TOKEN_PREFIX, ApiTokenAuth, cognito_client_denied, cognito_client_mapping, id_problem

log = logging.getLogger("fleetmem.auth")

#: A compact JWS: three base64url parts. Anything else is refused before the JWKS is consulted
#: (a made-up key id would otherwise make PyJWT fetch the pool's keys again).
_JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]{4,2048}\.[A-Za-z0-9_-]{4,8192}\.[A-Za-z0-9_-]{16,2048}")


class CognitoAuth:
    """Cognito access tokens: RS256 signature against the pool's JWKS (keys cached by PyJWT),
    issuer, expiry, `token_use == "access"`, an app client mapped in the clients table that is not
    on the deny-list, and at least one of this API's scopes."""

    #: mappings one sandbox keeps at most (then it starts over)
    MAPPING_CACHE_SIZE = 4096

    def __init__(
        self,
        issuer: str,
        resource_server: str,
        *,
        store: ClientStore,
        clock: Clock,
        mapping_ttl_s: float,
        jwks_url: str | None = None,
    ) -> None:
        import jwt

        self.issuer = issuer.rstrip("/")
        self.resource_server = resource_server
        self.store = store
        self.clock = clock
        self.mapping_ttl_s = max(0.0, mapping_ttl_s)
        self._mappings: dict[str, tuple[float, ClientRecord]] = {}
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
        mapped = self.mapping(app_client)
        if mapped is None:
            log.info("cognito client not mapped", extra={"event": "cognito_client_unmapped"})
            return None
        if id_problem("tenant", mapped.tenant) or id_problem("client", mapped.client_id):
            # the mapping's writer refuses such ids; a hand-edited item must not reach the stores
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
        if cognito_client_denied(self.store, app_client, self.clock.now()):
            log.info("cognito client denied", extra={"event": "cognito_client_denied"})
            return None
        return Caller(
            tenant=mapped.tenant,
            client_id=mapped.client_id,
            scopes=cast(frozenset[Scope], scopes),
            remote=True,
            tier=mapped.tier,
        )

    def mapping(self, app_client: str) -> ClientRecord | None:
        """The app client's live mapping: from this sandbox's cache while younger than
        `mapping_ttl_s`, else one read of the clients table (a missing mapping is not kept)."""
        now = time.monotonic()
        cached = self._mappings.get(app_client)
        if cached is not None and cached[0] > now:
            return cached[1]
        record = cognito_client_mapping(self.store, app_client, self.clock.now())
        if record is None:
            self._mappings.pop(app_client, None)
            return None
        if len(self._mappings) >= self.MAPPING_CACHE_SIZE:
            self._mappings.clear()
        if self.mapping_ttl_s > 0:
            self._mappings[app_client] = (now + self.mapping_ttl_s, record)
        return record


class BearerAuth:
    """An `fm_…` API token or, when a Cognito pool is configured, a Cognito access token."""

    def __init__(self, api_tokens: ApiTokenAuth, cognito: CognitoAuth | None) -> None:
        self.api_tokens = api_tokens
        self.cognito = cognito

    def verify(self, token: str) -> Caller | None:
        if token.startswith(TOKEN_PREFIX):
            return self.api_tokens.verify(token)  # checks the token's shape before any store read
        return self.cognito.verify(token) if self.cognito is not None else None
