"""The REQUEST authorizer: a bearer credential through the `Auth` port (API token or Cognito access
token, `wiring.build_auth`) -> an Allow policy for every route of the stage, or 401."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetmem.ports import Deps
from fleetmem.transport.aws_lambda import runtime


class Unauthorized(Exception):
    """Raised to make API Gateway answer 401 (the message must be exactly "Unauthorized")."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


def usage_key_for(client_id: str) -> str | None:
    """The API Gateway usage-plan key of this client (its own, else the shared default), read from
    Secrets Manager and cached by Powertools for five minutes."""
    secrets = runtime.settings().usage_key_secrets
    arn = secrets.get(client_id) or secrets.get("*")
    if not arn:
        return None
    from aws_lambda_powertools.utilities import parameters

    return str(parameters.get_secret(arn, max_age=300))


def authorize(event: Mapping[str, Any], deps: Deps | None = None) -> dict[str, Any]:
    """REQUEST authorizer: an Allow policy for every route of this API stage, with context
    `{tenant, client_id, scopes}` and the caller's usage key; raises `Unauthorized` otherwise."""
    from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
        APIGatewayAuthorizerRequestEvent,
        APIGatewayAuthorizerResponse,
    )

    request = APIGatewayAuthorizerRequestEvent(dict(event))
    header = request.headers.get("authorization") or ""
    scheme, _, token = header.partition(" ")
    caller = None
    if scheme.lower() == "bearer" and token.strip():
        caller = runtime.get_auth(deps).verify(token.strip())
    if caller is None:
        _count_denial()
        raise Unauthorized()
    arn = request.parsed_arn
    response = APIGatewayAuthorizerResponse(
        principal_id=f"{caller.tenant}/{caller.client_id}",
        region=arn.region,
        aws_account_id=arn.aws_account_id,
        api_id=arn.api_id,
        stage=arn.stage,
        context={
            "tenant": caller.tenant,
            "client_id": caller.client_id,
            "scopes": " ".join(sorted(caller.scopes)),
        },
        usage_identifier_key=usage_key_for(caller.client_id),
        partition=arn.partition,
    )
    # The result is cached per Authorization header, so it must cover every route of the stage.
    response.allow_all_routes()
    return response.asdict()


def _count_denial() -> None:
    from aws_lambda_powertools import Metrics
    from aws_lambda_powertools.metrics import MetricUnit

    metrics = Metrics()
    metrics.add_metric(name="AuthorizerDenied", unit=MetricUnit.Count, value=1)
    metrics.flush_metrics()
