"""The `Auth` port on AWS: `fm_…` API tokens in the DynamoDB clients table, then JWT access tokens
(RS256 against the issuer's JWKS) of two issuers, told apart by their `iss`:

- Cognito client-credentials tokens of the stage's pool, whose app client is mapped to a (tenant,
  client, tier) in the same table (`fleetmem.tokens.map_cognito_client`), refusing app clients on
  the deny-list kept there too (`fleetmem.tokens.deny_cognito_client`);
- people's tokens from the stage's OAuth authorization server (one issuer setting), whose `aud`
  must name the stage's `/mcp` resource (RFC 8707) and whose person (`iss` + `sub`) is mapped to a
  (tenant, client, tier) and the scopes they may use (`fleetmem.tokens.map_person`); a person
  without a mapping raises `CallerForbidden` (the authorizer's Deny, 403), not a guessed tenant.

A mapping found is kept for `mapping_ttl_s` (the stage's revocation bound, the authorizer cache
TTL: a revoked mapping is refused no later than a cached Allow would be); a missing one is asked
again on the next request, so an app client or person mapped at run time works from then on."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any, cast

from fleetmem.config import AuthSettings
from fleetmem.models import Caller, ClientRecord
from fleetmem.ports import ClientStore, Clock
from fleetmem.protocol import SCOPES, Scope
from fleetmem.tokens import (
    TOKEN_PREFIX,
    ApiTokenAuth,
    CallerForbidden,
    cognito_client_denied,
    cognito_client_mapping,
    id_problem,
    person_mapping,
)

log = logging.getLogger("fleetmem.auth")

#: A compact JWS: three base64url parts. Anything else is refused before the JWKS is consulted
#: (a made-up key id would otherwise make PyJWT fetch the pool's keys again).
_JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]{4,2048}\.[A-Za-z0-9_-]{4,8192}\.[A-Za-z0-9_-]{16,2048}")


class JwtIssuer:
    """What every JWT access token of one issuer is checked for: the compact-JWS shape (before any
    JWKS fetch), an RS256 signature against the issuer's JWKS (keys cached by PyJWT), `iss`, `exp`
    and the `required` claims, and `aud` when an `audience` is given."""

    def __init__(self, issuer: str, jwks_url: str, *, required: tuple[str, ...], audience: str | None = None) -> None:
        import jwt

        self.issuer = issuer.rstrip("/")
        self.audience = audience
        self.required = ("exp", "iss", *required, *(("aud",) if audience else ()))
        self.jwks = jwt.PyJWKClient(jwks_url, cache_keys=True, lifespan=3600, timeout=3)

    def claims(self, token: str) -> dict[str, Any] | None:
        """The verified claims, or None (logged by exception type, never the token)."""
        import jwt

        if _JWT_SHAPE.fullmatch(token) is None:
            return None
        try:
            key = self.jwks.get_signing_key_from_jwt(token)
            return dict(
                jwt.decode(
                    token,
                    key.key,
                    algorithms=["RS256"],
                    issuer=self.issuer,
                    audience=self.audience,
                    options={"require": list(self.required), "verify_aud": self.audience is not None},
                )
            )
        except jwt.PyJWTError as exc:
            log.info("jwt rejected", extra={"event": "jwt_rejected", "exc_type": type(exc).__name__})
            return None


class MappingCache:
    """Live clients-table mappings by key, each kept for `ttl_s` (the revocation bound); a missing
    one is not kept. `read(key)` is the one table lookup."""

    #: mappings one sandbox keeps at most (then it starts over)
    SIZE = 4096

    def __init__(self, ttl_s: float, read: Callable[[str], ClientRecord | None]) -> None:
        self.ttl_s = max(0.0, ttl_s)
        self.read = read
        self._kept: dict[str, tuple[float, ClientRecord]] = {}

    def get(self, key: str) -> ClientRecord | None:
        now = time.monotonic()
        cached = self._kept.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        record = self.read(key)
        if record is None:
            self._kept.pop(key, None)
            return None
        if len(self._kept) >= self.SIZE:
            self._kept.clear()
        if self.ttl_s > 0:
            self._kept[key] = (now + self.ttl_s, record)
        return record


def _mapped_ids_valid(record: ClientRecord) -> bool:
    if id_problem("tenant", record.tenant) or id_problem("client", record.client_id):
        # the mapping's writer refuses such ids; a hand-edited item must not reach the stores
        log.error("credential mapping refused", extra={"event": "mapping_invalid"})
        return False
    return True


class CognitoAuth:
    """Cognito access tokens: RS256 signature against the pool's JWKS (keys cached by PyJWT),
    issuer, expiry, `token_use == "access"`, an app client mapped in the clients table that is not
    on the deny-list, and at least one of this API's scopes."""

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
        self.jwt = JwtIssuer(
            issuer, jwks_url or f"{issuer.rstrip('/')}/.well-known/jwks.json", required=("token_use", "client_id")
        )
        self.issuer = self.jwt.issuer
        self.resource_server = resource_server
        self.store = store
        self.clock = clock
        self.mappings = MappingCache(mapping_ttl_s, lambda app: cognito_client_mapping(store, app, clock.now()))

    def verify(self, token: str) -> Caller | None:
        claims = self.jwt.claims(token)
        if claims is None or claims.get("token_use") != "access":
            return None
        app_client = str(claims.get("client_id"))
        mapped = self.mappings.get(app_client)
        if mapped is None:
            log.info("cognito client not mapped", extra={"event": "cognito_client_unmapped"})
            return None
        if not _mapped_ids_valid(mapped):
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
        """The app client's live mapping (`MappingCache`)."""
        return self.mappings.get(app_client)


class PersonAuth:
    """People's access tokens from the stage's OAuth authorization server: RS256 against its JWKS,
    issuer, expiry, `sub`, and an `aud` naming this stage's `/mcp` resource (a token for another
    resource or stage is refused). The person (`iss` + `sub`) must be mapped in the clients table;
    their scopes are the least of the token's `scope` and the mapping's. Valid but unmapped, or no
    scope left: `CallerForbidden`."""

    def __init__(
        self, issuer: str, jwks_url: str, resource: str, *, store: ClientStore, clock: Clock, mapping_ttl_s: float
    ) -> None:
        self.jwt = JwtIssuer(issuer, jwks_url, required=("sub",), audience=resource)
        self.issuer = self.jwt.issuer
        self.mappings = MappingCache(mapping_ttl_s, lambda sub: person_mapping(store, self.issuer, sub, clock.now()))

    def verify(self, token: str) -> Caller | None:
        claims = self.jwt.claims(token)
        if claims is None:
            return None
        mapped = self.mappings.get(str(claims["sub"]))
        if mapped is None:
            log.info("person not mapped", extra={"event": "person_unmapped"})
            raise CallerForbidden("unmapped")
        if not _mapped_ids_valid(mapped):
            return None
        granted = {s for s in str(claims.get("scope") or "").split() if s in SCOPES}
        scopes = frozenset(granted) & mapped.scopes
        if not scopes:
            log.info("person token grants no allowed scope", extra={"event": "person_no_scope"})
            raise CallerForbidden("no_scope")
        return Caller(
            tenant=mapped.tenant,
            client_id=mapped.client_id,
            scopes=cast(frozenset[Scope], scopes),
            remote=True,
            tier=mapped.tier,
        )


class BearerAuth:
    """An `fm_…` API token or, when their issuers are configured, a Cognito access token or a
    person's access token, chosen by the token's (unverified) `iss` and then fully verified."""

    def __init__(self, api_tokens: ApiTokenAuth, *issuers: CognitoAuth | PersonAuth | None) -> None:
        self.api_tokens = api_tokens
        self.issuers = {i.issuer: i for i in issuers if i is not None}

    def verify(self, token: str) -> Caller | None:
        if token.startswith(TOKEN_PREFIX):
            return self.api_tokens.verify(token)  # checks the token's shape before any store read
        verifier = self.issuers.get(_unverified_issuer(token))
        return verifier.verify(token) if verifier is not None else None


def _unverified_issuer(token: str) -> str:
    """The `iss` a token claims (only to choose its verifier, which then checks it), or ""."""
    import jwt

    if _JWT_SHAPE.fullmatch(token) is None:
        return ""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return ""
    iss = claims.get("iss") if isinstance(claims, dict) else None
    return iss.rstrip("/") if isinstance(iss, str) else ""


def bearer_auth(api_tokens: ApiTokenAuth, settings: AuthSettings, *, store: ClientStore, clock: Clock) -> BearerAuth:
    """The authorizer's `Auth`: API tokens, and the JWT issuers `settings` configure (a Cognito
    pool; people's OAuth issuer with the stage's resource). A mapping is kept no longer than a
    cached Allow lives: the authorizer cache TTL, the revocation bound."""
    ttl = settings.authorizer_cache_ttl_s
    cognito = (
        CognitoAuth(
            settings.cognito_issuer, settings.cognito_resource_server, store=store, clock=clock, mapping_ttl_s=ttl
        )
        if settings.cognito_issuer
        else None
    )
    people = (
        PersonAuth(
            settings.oauth_issuer,
            settings.oauth_jwks_url or f"{settings.oauth_issuer.rstrip('/')}/.well-known/jwks.json",
            settings.oauth_resource,
            store=store,
            clock=clock,
            mapping_ttl_s=ttl,
        )
        if settings.oauth_issuer and settings.oauth_resource
        else None
    )
    return BearerAuth(api_tokens, cognito, people)
