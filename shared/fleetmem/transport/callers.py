"""Who is calling, and at which address: the caller an edge puts in the request's ASGI scope
(a bearer token through the `Auth` port locally, the authorizer's context behind API Gateway) and
the public base URL the request was sent to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from fleetmem.contract.routes import PRM_MCP_PATH
from fleetmem.models import Caller
from fleetmem.ports import Auth
from fleetmem.transport.gateway import caller_from_authorizer

CALLER_SCOPE_KEY = "fleetmem.caller"
#: The public base URL of this one request, when the host knows it better than the headers do (the
#: Lambda edge puts it there from each event; one app serves every invocation of a sandbox).
PUBLIC_URL_SCOPE_KEY = "fleetmem.public_url"

CallerFromRequest = Callable[[Request], Caller | None]
CallerFromContext = Callable[[Any], Caller | None]


def public_base_url(request: Request, configured: str | None = None) -> str:
    if configured:
        return configured.rstrip("/")
    per_request = request.scope.get(PUBLIC_URL_SCOPE_KEY)
    if per_request:
        return str(per_request).rstrip("/")
    proto = request.headers.get("x-forwarded-proto") or request.url.scheme
    host = request.headers.get("x-forwarded-host") or request.headers.get("host") or request.url.netloc
    return f"{proto}://{host}"


def resource_metadata_url(base: str) -> str:
    return f"{base}{PRM_MCP_PATH}"


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization") or ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def bearer_caller(auth_factory: Callable[[], Auth]) -> CallerFromRequest:
    """Local server: the token is verified through the `Auth` port on every request (the SQLite
    client store keeps lookups only while nothing was committed to its file), so tokens created or
    revoked by the CLI while the server runs take effect at once. Cheap enough for the event loop:
    the guard calls it there, with no worker-thread hop."""

    def caller(request: Request) -> Caller | None:
        token = bearer_token(request)
        if token is None:
            return None
        return auth_factory().verify(token)

    return caller


def gateway_caller(request: Request) -> Caller | None:
    """Behind API Gateway: the caller from the authorizer context of the event the edge handler put
    in the ASGI scope as `aws.event` (see `fleetmem.transport.gateway`)."""
    return caller_from_authorizer(request.scope.get("aws.event"))
