"""The REQUEST authorizer: a bearer credential through the `Auth` port (API token, Cognito access
token or a person's OAuth access token, `wiring.build_auth`) -> an Allow policy for every route of
the stage, or 401; a valid credential that may not act here (a person no mapping names) -> a Deny
policy for every route, which API Gateway answers 403 (its ACCESS_DENIED gateway response).

Its context `{tenant, client_id, scopes}` is signed with the stage's signing key (`proof`), and
every function behind API Gateway acts on an authorizer context only through `vouched_event`, which
drops a context whose proof is missing, forged or expired. So a proxy-shaped event invoked directly
(any principal allowed `lambda:InvokeFunction`) carries no caller. The proof cannot name the request:
API Gateway reuses a cached answer for every request with the same Authorization header, for the
cache TTL; it expires a signature-validity margin after that TTL.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fleetmem.ports import Deps
from fleetmem.transport.aws_lambda import runtime

log = logging.getLogger("fleetmem.lambda")

#: The authorizer-context key holding the signature over `CLAIMS`.
PROOF_FIELD = "proof"
#: The context values the proof covers; nothing else in a context is read.
CLAIMS = ("tenant", "client_id", "scopes")


def credential_shape() -> str:
    """A regex matching every `Authorization` value `authorize` can accept: the `Bearer` scheme
    (any case), then an API token (`fleetmem.tokens`: prefix, length, alphabet) or a compact JWS
    (the Cognito shape `fleetmem.adapters.aws.auth` checks before any JWKS fetch, its upper length
    bounds dropped), whitespace around it allowed as `authorize` strips it. WAF reads it to tell a
    well-formed credential from none, so it is written in WAF's PCRE dialect: no capturing group
    and no large repeat count. It says nothing about whether the credential is valid."""
    import re

    from fleetmem.tokens import _TOKEN_PATTERN
    from fleetmem.wiring import _JWT_SHAPE

    scheme = "".join(f"[{c.upper()}{c}]" for c in "bearer")
    jws = re.sub(r"\{(\d+),\d+\}", r"{\1,}", _JWT_SHAPE.pattern)
    return rf"^{scheme} \s*(?:{_TOKEN_PATTERN.pattern}|{jws})\s*$"


class Unauthorized(Exception):
    """Raised to make API Gateway answer 401 (the message must be exactly "Unauthorized")."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


def usage_key_for(tier: str | None) -> str | None:
    """The API Gateway usage-plan key of the caller's tier (from its clients-table item), read from
    Secrets Manager and cached by Powertools for five minutes. No tier, or one the stage has no
    plan for: the stage's default tier (logged); a stage without keys: None (API Gateway answers 403)."""
    settings = runtime.auth_settings()
    secrets = settings.usage_key_secrets
    arn = secrets.get(tier or settings.default_tier)
    if not arn and tier:
        log.warning("credential names a tier without a usage plan", extra={"event": "tier_unknown", "tier": tier})
        arn = secrets.get(settings.default_tier)
    if not arn:
        return None
    from aws_lambda_powertools.utilities import parameters

    return str(parameters.get_secret(arn, max_age=300))


def authorize(event: Mapping[str, Any], deps: Deps | None = None) -> dict[str, Any]:
    """REQUEST authorizer: an Allow policy for every route of this API stage, with context
    `{tenant, client_id, scopes}` and the usage key of the caller's tier; raises `Unauthorized` otherwise."""
    from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
        APIGatewayAuthorizerRequestEvent,
        APIGatewayAuthorizerResponse,
    )

    from fleetmem.tokens import CallerForbidden

    request = APIGatewayAuthorizerRequestEvent(dict(event))
    header = request.headers.get("authorization") or ""
    scheme, _, token = header.partition(" ")
    caller = None
    arn = request.parsed_arn
    if scheme.lower() == "bearer" and token.strip():
        try:
            caller = runtime.get_auth(deps).verify(token.strip())
        except CallerForbidden as forbidden:
            log.info(
                "credential valid but not allowed here", extra={"event": "authorizer_deny", "reason": forbidden.reason}
            )
            _count_denial()
            denied = APIGatewayAuthorizerResponse(
                principal_id="forbidden",
                region=arn.region,
                aws_account_id=arn.aws_account_id,
                api_id=arn.api_id,
                stage=arn.stage,
                partition=arn.partition,
            )
            # cached per Authorization header like an Allow, so it covers every route too
            denied.deny_all_routes()
            return denied.asdict()
    if caller is None:
        _count_denial()
        raise Unauthorized()
    response = APIGatewayAuthorizerResponse(
        principal_id=f"{caller.tenant}/{caller.client_id}",
        region=arn.region,
        aws_account_id=arn.aws_account_id,
        api_id=arn.api_id,
        stage=arn.stage,
        context=signed_context(caller.tenant, caller.client_id, " ".join(sorted(caller.scopes))),
        usage_identifier_key=usage_key_for(caller.tier),
        partition=arn.partition,
    )
    # The result is cached per Authorization header, so it must cover every route of the stage.
    response.allow_all_routes()
    return response.asdict()


def signed_context(tenant: str, client_id: str, scopes: str) -> dict[str, str]:
    """The authorizer context with its proof, valid for the cache TTL plus the signature margin."""
    from fleetmem.wiring import SIGNATURE_VALIDITY

    claims = {"tenant": tenant, "client_id": client_id, "scopes": scopes}
    valid_for = runtime.auth_settings().authorizer_cache_ttl_s + SIGNATURE_VALIDITY
    return {**claims, PROOF_FIELD: runtime.signer().sign_claims(claims, valid_for_s=valid_for)}


def vouched_event(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """`event` with its authorizer context reduced to the signed claims, or without any authorizer
    context when the proof does not verify (then no caller reaches the handler: 401). Fails closed
    when no signing key is configured or it cannot be read. Logs why, never the claims or proof."""
    ctx = event.get("requestContext")
    if not isinstance(ctx, Mapping) or "authorizer" not in ctx:
        return event
    auth = ctx.get("authorizer")
    if isinstance(auth, Mapping) and isinstance(auth.get("lambda"), Mapping):
        auth = auth["lambda"]  # HTTP API shape
    claims: dict[str, str] = {}
    reason = ""
    if not isinstance(auth, Mapping) or PROOF_FIELD not in auth:
        reason = "unsigned"
    elif not all(isinstance(auth.get(k), str) for k in CLAIMS):
        reason = "malformed"
    else:
        claims = {k: str(auth[k]) for k in CLAIMS}
        s = runtime.signer()
        if not s.configured:
            reason = "no_signing_key"
        else:
            try:
                if not s.verify_claims(claims, auth[PROOF_FIELD]):
                    reason = "forged_or_expired"
            except Exception as exc:
                log.error(
                    "signing secret unreadable",
                    extra={"event": "invoke_secret_error", "exc_type": type(exc).__name__},
                )
                reason = "signing_key_unreadable"
    out = dict(event)
    if reason:
        log.warning(
            "authorizer context refused",
            extra={"event": "authorizer_context_refused", "reason": reason, "request_id": ctx.get("requestId")},
        )
        out["requestContext"] = {k: v for k, v in ctx.items() if k != "authorizer"}
    else:
        out["requestContext"] = {**ctx, "authorizer": claims}
    return out


def _count_denial() -> None:
    from aws_lambda_powertools import Metrics
    from aws_lambda_powertools.metrics import MetricUnit

    metrics = Metrics()
    metrics.add_metric(name="AuthorizerDenied", unit=MetricUnit.Count, value=1)
    metrics.flush_metrics()
