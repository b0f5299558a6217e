"""The caller behind API Gateway: the Lambda authorizer verified the credential, and its context
names tenant, client and scopes. Kept free of heavy imports: every Lambda handler reads it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from fleetmem.models import Caller
from fleetmem.protocol import SCOPES, Scope


def caller_from_authorizer(event: Mapping[str, Any] | None) -> Caller | None:
    """The caller the authorizer vouched for, or None (then the request is denied).

    REST APIs put the authorizer's context under `requestContext.authorizer`; HTTP APIs under
    `requestContext.authorizer.lambda`. Context values are strings: scopes are space- or
    comma-separated (a list is accepted too). Unknown scope names are dropped."""
    if not isinstance(event, Mapping):
        return None
    auth = (event.get("requestContext") or {}).get("authorizer") or {}
    if isinstance(auth.get("lambda"), Mapping):
        auth = auth["lambda"]
    tenant = auth.get("tenant") or auth.get("tenant_id")
    client_id = auth.get("client_id") or auth.get("clientId")
    if not tenant or not client_id:
        return None
    raw = auth.get("scopes") or ""
    names = raw.replace(",", " ").split() if isinstance(raw, str) else list(raw)
    scopes = frozenset(cast(Scope, s) for s in names if s in SCOPES)
    return Caller(tenant=str(tenant), client_id=str(client_id), scopes=scopes, remote=True)
