"""Verb functions trust tenant and scopes from an invoke payload only when the edge signed it
(HMAC-SHA256, key in Secrets Manager — moto's server here — read once per sandbox). Anyone else
with `lambda:InvokeFunction` gets `unauthorized` and nothing is done. A proxy event (`POST /v1/<tool>`,
`/mcp`) is trusted only with the authorizer context the authorizer signed with the same key: a
hand-made proxy-shaped event invoked directly is `unauthorized` too."""

from __future__ import annotations

import json
import time

import pytest

from fleetmem.adapters.aws.invoker import SIGNATURE_VALIDITY, PayloadSigner
from fleetmem.transport.aws_lambda import runtime

from .conftest import call, load_event

pytestmark = pytest.mark.usefixtures("deps")


def payload(fact: str = "Acme renewal is on Thursday") -> dict:
    event = load_event("remember", "invoke")
    event["arguments"] = {**event["arguments"], "fact": fact}
    return event


def test_a_payload_signed_with_the_stage_key_is_served(deps):
    out = call("remember", payload())  # conftest signs as the edge does
    assert out["is_error"] is False and out["body"]["status"] == "inserted"


@pytest.mark.parametrize("how", ["unsigned", "other_key", "tampered_tenant", "tampered_scopes", "expired"])
def test_an_unsigned_or_forged_payload_is_refused_and_writes_nothing(deps, how):
    event = payload(f"forged {how}")
    if how == "unsigned":
        forged = event
    elif how == "other_key":
        forged = PayloadSigner(secret=b"guessed").sign(event)
    elif how == "expired":
        stage_key = runtime.signer().secret()
        old = PayloadSigner(secret=stage_key, now=lambda: time.time() - SIGNATURE_VALIDITY - 5)
        forged = old.sign(event)
    else:
        signed = runtime.signer().sign(event)
        caller = dict(signed["caller"])
        if how == "tampered_tenant":
            caller["tenant"] = "globex"
        else:
            caller["scopes"] = ["read", "write", "admin"]
        forged = {**signed, "caller": caller}
    out = call("remember", forged, sign=False)
    assert out["is_error"] is True and out["body"]["code"] == "unauthorized"
    assert out["body"]["suggestion"]
    for tenant in ("acme", "globex"):
        texts = [f.text for f in deps.fact_listing.recent(tenant, now=deps.clock.now(), world_only=False)]
        assert f"forged {how}" not in texts


def test_without_a_configured_key_every_invoke_payload_is_refused(deps, monkeypatch):
    monkeypatch.delenv("FLEETMEM_INVOKE_SIGNING_SECRET_ARN")
    runtime.reset()
    out = call("remember", PayloadSigner(secret=b"anything").sign(payload("no key")), sign=False)
    assert out["body"]["code"] == "unauthorized"


def test_the_v1_route_trusts_the_authorizer_context_the_authorizer_signed(deps):
    out = call("remember", load_event("remember", "v1"))  # conftest signs as the authorizer does
    assert out["statusCode"] == 200


def forged_context(event: dict, how: str) -> dict:
    """`event` with an authorizer context the stage's authorizer did not sign as it stands."""
    from fleetmem.transport.aws_lambda.authorizer import signed_context

    ctx = event["requestContext"]
    auth = dict(ctx["authorizer"])
    if how == "unsigned":
        pass
    elif how == "other_key":
        claims = {k: auth[k] for k in ("tenant", "client_id", "scopes")}
        auth["proof"] = PayloadSigner(secret=b"guessed").sign_claims(claims, valid_for_s=300)
    elif how == "expired":
        stage_key = runtime.signer().secret()
        claims = {k: auth[k] for k in ("tenant", "client_id", "scopes")}
        old = PayloadSigner(secret=stage_key, now=lambda: time.time() - 3600)
        auth["proof"] = old.sign_claims(claims, valid_for_s=60)
    elif how == "tampered_tenant":  # a genuine proof for globex, the tenant swapped for acme
        auth |= signed_context("globex", auth["client_id"], auth["scopes"])
        auth["tenant"] = "acme"
    else:  # a genuine read-only proof, the scopes widened
        auth |= signed_context(auth["tenant"], auth["client_id"], "read")
        auth["scopes"] = "read write admin"
    return {**event, "requestContext": {**ctx, "authorizer": auth}}


FORGERIES = ["unsigned", "other_key", "expired", "tampered_tenant", "tampered_scopes"]


@pytest.mark.parametrize("how", FORGERIES)
def test_a_proxy_event_with_a_forged_authorizer_context_is_refused_and_writes_nothing(deps, how):
    event = load_event("remember", "v1")
    body = json.loads(event["body"]) | {"fact": f"forged proxy {how}"}
    out = call("remember", forged_context({**event, "body": json.dumps(body)}, how), sign=False)
    assert out["statusCode"] == 401
    assert json.loads(out["body"])["code"] == "unauthorized"
    for tenant in ("acme", "globex"):
        texts = [f.text for f in deps.fact_listing.recent(tenant, now=deps.clock.now(), world_only=False)]
        assert f"forged proxy {how}" not in texts


@pytest.mark.parametrize("how", FORGERIES)
def test_the_edge_serves_no_caller_from_a_forged_authorizer_context(deps, lambda_service, how):
    event = forged_context(load_event("mcp", "tools_call_remember"), how)
    out = call("mcp", event, sign=False)
    assert out["statusCode"] == 401
    assert lambda_service.calls == []  # no verb function was invoked


def test_the_edge_serves_the_caller_of_a_signed_authorizer_context(deps, lambda_service):
    out = call("mcp", load_event("mcp", "tools_call_remember"))
    assert out["statusCode"] == 200 and lambda_service.calls == ["remember"]
