"""API tokens: minting, hashing and verification. Only the SHA-256 of a token is ever stored.

Token format: "fm_" + 43 url-safe base64 characters (256 random bits). The public handle
`token_id` is "tok_" + the first 10 hex digits of the hash, so `token list`/`token revoke` never
need the secret.

Tenant and client ids follow one grammar (`ID_PATTERN`), checked wherever a credential is made
(`create_client`: `fleetmem token create` and every other minting path; the deploy config's Cognito
clients and heartbeats; the authorizer's Cognito mapping): lower-case letters, digits, `_` and
`-`, starting with a letter or digit, 1..63 characters. No `#`, `/`, `:`, `.`, whitespace or any
other character a storage key could join fields with, so no id can reach another tenant's keys.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from fleetmem.errors import PortError
from fleetmem.models import Caller, ClientRecord
from fleetmem.ports import ClientStore, Clock
from fleetmem.protocol import SCOPES, Scope

log = logging.getLogger("fleetmem.auth")

TOKEN_PREFIX = "fm_"  # noqa: S105 (a format marker, not a secret)
_TOKEN_BODY_LEN = 43


#: The grammar of tenant and client ids (see the module docstring).
ID_REGEX = r"^[a-z0-9][a-z0-9_-]{0,62}$"
ID_PATTERN = re.compile(ID_REGEX)
#: How to fix an id the grammar refuses (CLI fix text, errors).
ID_FIX = "Use 1-63 lower-case letters, digits, '_' or '-', starting with a letter or digit, e.g. acme or team-x."


def id_problem(kind: str, value: str) -> str | None:
    """Why `value` cannot be a `kind` ("tenant" or "client") id, or None when it can."""
    if ID_PATTERN.fullmatch(value or ""):
        return None
    shown = (value or "")[:80]
    return f"{kind} id {shown!r} is not allowed: {ID_FIX}"


def mint_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_id_for(token_hash: str) -> str:
    return "tok_" + token_hash[:10]


_TOKEN_PATTERN = re.compile(re.escape(TOKEN_PREFIX) + rf"[A-Za-z0-9_-]{{{_TOKEN_BODY_LEN}}}")


def looks_like_token(token: str) -> bool:
    """Prefix, length and url-safe base64 alphabet: a token that fails this is never looked up."""
    return _TOKEN_PATTERN.fullmatch(token) is not None


class MintRefused(ValueError):
    """A token request the minting rules refuse. `field` names what is wrong: "scopes", "client"
    or "tenant"; the message says why (each caller words its own fix)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class TenantDeleted(MintRefused):
    """The tenant is deleted or being deleted (`fleetmem tenant delete`): no token is minted for it."""

    def __init__(self, tenant: str) -> None:
        super().__init__(
            "tenant",
            f"tenant {tenant[:80]!r} was deleted (fleetmem tenant delete); no token is minted for a deleted tenant",
        )


@dataclass(frozen=True)
class MintRequest:
    """A token request that passed `mint_request`: what `mint` stores."""

    tenant: str
    client_id: str
    scopes: frozenset[Scope]
    #: None: the stage's default tier
    tier: str | None = None


def mint_request(*, tenant: str, client: str, scopes: Iterable[str], tier: str | None = None) -> MintRequest:
    """The one check of a token request, for `fleetmem token create` and the `create_token` tool:
    scopes a non-empty subset of SCOPES (blank entries ignored), the client name stripped and not
    blank, tenant, client and tier (when given) inside the id grammar. Raises `MintRefused`."""
    wanted = [s.strip() for s in scopes if s.strip()]
    bad = [s for s in wanted if s not in SCOPES]
    if not wanted or bad:
        raise MintRefused("scopes", f"Unknown scope(s): {', '.join(bad) or '(none given)'}")
    name = client.strip()
    if not name:
        raise MintRefused("client", "client is blank")
    for kind, value in (("tenant", tenant), ("client", name), *((("tier", tier),) if tier is not None else ())):
        problem = id_problem(kind, value)
        if problem:
            raise MintRefused(kind, problem)
    return MintRequest(tenant=tenant, client_id=name, scopes=frozenset(wanted), tier=tier)  # type: ignore[arg-type]


def mint(store: ClientStore, clock: Clock, request: MintRequest) -> tuple[str, ClientRecord]:
    """Mint the token a checked request names (see `create_client`)."""
    return create_client(
        store, clock, tenant=request.tenant, client_id=request.client_id, scopes=request.scopes, tier=request.tier
    )


def create_client(
    store: ClientStore,
    clock: Clock,
    *,
    tenant: str,
    client_id: str,
    scopes: Iterable[Scope],
    tier: str | None = None,
) -> tuple[str, ClientRecord]:
    """Mint a token for (tenant, client_id) in usage-plan `tier` (None: the stage's default) and
    store its hash. Returns (token, record); the token is shown once and cannot be recovered."""
    request = mint_request(tenant=tenant, client=client_id, scopes=scopes, tier=tier)
    token = mint_token()
    digest = hash_token(token)
    return token, _store_record(store, clock, request, digest, token_id_for(digest))


def _store_record(store: ClientStore, clock: Clock, request: MintRequest, digest: str, token_id: str) -> ClientRecord:
    """Store the clients-table record of a checked request under `digest` (a token's hash or a
    mapping's key); refused (`TenantDeleted`) for a deleted tenant."""
    if tenant_deleted(store, request.tenant):
        raise TenantDeleted(request.tenant)
    record = ClientRecord(
        token_hash=digest,
        token_id=token_id,
        tenant=request.tenant,
        client_id=request.client_id,
        scopes=request.scopes,
        created_at=clock.now(),
        tier=request.tier,
    )
    store.create(record)
    return record


def _map_once(
    store: ClientStore, clock: Clock, request: MintRequest, digest: str, token_id: str
) -> tuple[ClientRecord, bool]:
    """A mapping stored once: (the record, True) when written now, (the stored one, False)."""
    existing = store.by_hash(digest)
    if existing is not None:
        return existing, False
    return _store_record(store, clock, request, digest, token_id), True


def _live(store: ClientStore, digest: str, now: datetime) -> ClientRecord | None:
    """The record stored under `digest` unless missing or revoked by `now` (one lookup)."""
    record = store.by_hash(digest)
    if record is None or (record.revoked_at is not None and record.revoked_at <= now):
        return None
    return record


def verify_token(store: ClientStore, token: str, now: datetime) -> Caller | None:
    """The remote Caller a token stands for, or None when it is malformed, unknown or revoked."""
    if not token or not looks_like_token(token):
        return None
    record = _live(store, hash_token(token), now)
    if record is None:
        return None
    if id_problem("tenant", record.tenant) or id_problem("client", record.client_id):
        # a credential stored before the id grammar was enforced (e.g. tenant "a#b"): its ids could
        # reach another tenant's keys, so it reads as an unknown token; the operator re-issues it
        log.warning(
            "credential refused: its tenant or client id breaks the id grammar",
            extra={"event": "credential_id_invalid", "token_id": record.token_id},
        )
        return None
    return Caller(tenant=record.tenant, client_id=record.client_id, scopes=record.scopes, remote=True, tier=record.tier)


def revocation_bound_s(backend: str, authorizer_cache_ttl_s: int) -> int:
    """Seconds after a revoke within which every request with the token is refused: 0 locally (no
    cache), the authorizer cache TTL on AWS (API Gateway reuses an Allow answer that long)."""
    return 0 if backend != "aws" else max(0, authorizer_cache_ttl_s)


def revocation_text(bound_s: int) -> str:
    """How the CLI states the bound."""
    if bound_s == 0:
        return "requests with it get 401 from the next request on"
    return (
        f"requests with it get 401 within {bound_s} s (the stage's authorizer cache TTL, "
        "api.authorizer_cache_ttl_s; set FLEETMEM_AUTHORIZER_CACHE_TTL_S if the stage uses another value)"
    )


class ApiTokenAuth:
    """The `Auth` port for `fm_…` API tokens over any `ClientStore` (the SQLite store locally, the
    DynamoDB clients table on AWS). No verdict is cached: a revoke takes effect on the next request
    (the SQLite store's lookup map is emptied by any commit, `adapters.local.sqlite.clients`).

    A token that passes is recorded as used (`ClientStore.touch`) at most once per
    `TOUCH_EVERY_S` per token and process: the time of the last write is remembered here, so a
    busy token costs one write a minute, not one per request. A failing write never fails the call.
    `record_in_background` (the local server, whose token check runs on its event loop) makes that
    write on one background thread, so a request never waits for the database's write lock."""

    #: the least time between two recorded uses of one token (per process or Lambda sandbox)
    TOUCH_EVERY_S = 60.0
    #: tokens whose last write one process remembers at most (then it starts over)
    TOUCH_MEMORY = 4096

    def __init__(self, store: ClientStore, clock: Clock, *, record_in_background: bool = False) -> None:
        self.store = store
        self.clock = clock
        self._touched: dict[str, datetime] = {}
        self._lock = threading.Lock()
        self._recorder = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="fleetmem-token-use") if record_in_background else None
        )

    def verify(self, token: str) -> Caller | None:
        now = self.clock.now()
        caller = verify_token(self.store, token, now)
        if caller is not None:
            self._note_use(hash_token(token), now)
        return caller

    def _note_use(self, digest: str, now: datetime) -> None:
        with self._lock:
            last = self._touched.get(digest)
            if last is not None and (now - last).total_seconds() < self.TOUCH_EVERY_S:
                return
            if len(self._touched) >= self.TOUCH_MEMORY:
                self._touched.clear()
            self._touched[digest] = now
        if self._recorder is not None:
            self._recorder.submit(self._record, digest, now)
        else:
            self._record(digest, now)

    def _record(self, digest: str, now: datetime) -> None:
        try:
            self.store.touch(digest, at=now)
        except PortError as exc:
            log.warning("token use not recorded", extra={"event": "token_touch_failed", "exc_type": type(exc).__name__})


# Cognito client-credentials tokens cannot be revoked at Cognito (no refresh token; the authorizer
# checks JWTs offline), so a deny-list entry in the clients table stands for "refuse every token of
# this app client". It is a ClientRecord keyed by a hash no API token can have (API token hashes are
# of "fm_…" strings), revoked at creation; `cognito_client_denied` is one lookup by that key.
_COGNITO_DENY_PREFIX = "cognito-app-client:"


def cognito_deny_hash(app_client_id: str) -> str:
    return hash_token(_COGNITO_DENY_PREFIX + app_client_id)


def deny_cognito_client(store: ClientStore, clock: Clock, *, app_client_id: str, tenant: str = "-") -> ClientRecord:
    """Put a Cognito app client on the deny-list; its tokens are refused from the next request
    (after the API Gateway authorizer cache, at most its TTL)."""
    if not app_client_id:
        raise ValueError("app_client_id is required")
    now = clock.now()
    digest = cognito_deny_hash(app_client_id)
    existing = store.by_hash(digest)
    if existing is not None:
        return existing
    record = ClientRecord(
        token_hash=digest,
        token_id="cog_" + digest[:10],
        tenant=tenant,
        client_id=f"cognito:{app_client_id}",
        scopes=frozenset({"read"}),
        created_at=now,
        revoked_at=now,
    )
    store.create(record)
    return record


def cognito_client_denied(store: ClientStore, app_client_id: str, now: datetime) -> bool:
    record = store.by_hash(cognito_deny_hash(app_client_id))
    return record is not None and record.revoked_at is not None and record.revoked_at <= now


# A Cognito app client's machine caller is data, like an API token: a ClientRecord keyed by a hash
# no API token can have, holding the (tenant, client_id, tier) the app client's access tokens act
# as, its `token_id` "app_" + the app client id (so `token list` shows it beside the tenant's API
# tokens, and `token revoke app_…` or a tenant's revocation ends the mapping). The scopes are the
# ones the app client may be granted; a token's own scopes still come from its `scope` claim.
_COGNITO_MAP_PREFIX = "cognito-app-client-map:"
#: `token_id` prefix of a Cognito app client's mapping
COGNITO_MAP_ID_PREFIX = "app_"


def cognito_map_hash(app_client_id: str) -> str:
    return hash_token(_COGNITO_MAP_PREFIX + app_client_id)


def map_cognito_client(
    store: ClientStore,
    clock: Clock,
    *,
    app_client_id: str,
    tenant: str,
    client_id: str,
    scopes: Iterable[Scope],
    tier: str | None = None,
) -> tuple[ClientRecord, bool]:
    """Map a Cognito app client to (tenant, client_id, tier) in the clients table. Idempotent:
    (the record, True) when written now, (the stored record, False) when it was already there."""
    if not app_client_id or not re.fullmatch(r"[A-Za-z0-9_-]{1,128}", app_client_id):
        raise ValueError("app_client_id must be 1-128 letters, digits, '_' or '-'")
    request = mint_request(tenant=tenant, client=client_id, scopes=scopes, tier=tier)
    return _map_once(store, clock, request, cognito_map_hash(app_client_id), COGNITO_MAP_ID_PREFIX + app_client_id)


def cognito_client_mapping(store: ClientStore, app_client_id: str, now: datetime) -> ClientRecord | None:
    """The live mapping of a Cognito app client (one lookup), or None: unknown or revoked."""
    return _live(store, cognito_map_hash(app_client_id), now)


# A tenant deletion (`fleetmem tenant delete --backend aws`) first leaves a tombstone in the clients
# table, the same way: a ClientRecord keyed by a hash no API token can have, revoked at creation,
# holding no tenant id (tenant "-", so the tenant's own listing never shows it). It stays after the
# deletion: no token is minted for the tenant again (`create_client`) and its configured heartbeats
# stop (`fleetmem.transport.aws_lambda.heartbeat`); a deleted tenant's id is not reused.
_TENANT_DELETED_PREFIX = "tenant-deleted:"


def tenant_deleted_hash(tenant: str) -> str:
    return hash_token(_TENANT_DELETED_PREFIX + tenant)


def mark_tenant_deleted(store: ClientStore, clock: Clock, tenant: str) -> ClientRecord:
    """Leave the tenant's tombstone (idempotent); from then on `tenant_deleted` is true."""
    digest = tenant_deleted_hash(tenant)
    existing = store.by_hash(digest)
    if existing is not None:
        return existing
    now = clock.now()
    record = ClientRecord(
        token_hash=digest,
        token_id="del_" + digest[:10],
        tenant="-",
        client_id="tenant-deleted",
        scopes=frozenset({"read"}),
        created_at=now,
        revoked_at=now,
    )
    store.create(record)
    return record


def tenant_deleted(store: ClientStore, tenant: str) -> bool:
    """One lookup: was the tenant deleted (or is it being deleted)?"""
    return store.by_hash(tenant_deleted_hash(tenant)) is not None


# A person signed in through the stage's OAuth authorization server is data too: a ClientRecord
# keyed by a hash of the token issuer and the person's `sub` (no API token can have it), holding the
# (tenant, client_id, tier) their access tokens act as and the scopes they may use at most, its
# `token_id` "per_" + the hash's first 10 hex digits (so `token list` shows it, and `token revoke` or
# a tenant's revocation ends it). A person without one is refused (403), never given a tenant.
_PERSON_MAP_PREFIX = "oauth-person-map:"
#: `token_id` prefix of a person's mapping
PERSON_MAP_ID_PREFIX = "per_"


class CallerForbidden(Exception):
    """A valid credential that may not act on this stage: a person no mapping names, or one whose
    token grants none of the scopes their mapping allows. The authorizer answers Deny (403)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def person_map_hash(issuer: str, subject: str) -> str:
    return hash_token(f"{_PERSON_MAP_PREFIX}{issuer.rstrip('/')}\n{subject}")


def map_person(
    store: ClientStore,
    clock: Clock,
    *,
    issuer: str,
    subject: str,
    tenant: str,
    client_id: str,
    scopes: Iterable[Scope],
    tier: str | None = None,
) -> tuple[ClientRecord, bool]:
    """Map the person `subject` of the OAuth `issuer` to (tenant, client_id, tier), allowed at most
    `scopes`. Idempotent: (the record, True) when written now, (the stored record, False) when it
    was already there."""
    if not issuer.strip() or not subject or len(subject) > 255:
        raise ValueError("issuer and subject (1-255 characters) are required")
    request = mint_request(tenant=tenant, client=client_id, scopes=scopes, tier=tier)
    digest = person_map_hash(issuer, subject)
    return _map_once(store, clock, request, digest, PERSON_MAP_ID_PREFIX + digest[:10])


def person_mapping(store: ClientStore, issuer: str, subject: str, now: datetime) -> ClientRecord | None:
    """The live mapping of a person (one lookup), or None: unknown or revoked."""
    return _live(store, person_map_hash(issuer, subject), now)
