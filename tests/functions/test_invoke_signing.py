"""Verb functions trust tenant and scopes from an invoke payload only when the edge signed it
(HMAC-SHA256, key in Secrets Manager — moto's server here — read once per sandbox). Anyone else
with `lambda:InvokeFunction` gets `unauthorized` and nothing is done. `POST /v1/<tool>` through
API Gateway keeps trusting the authorizer context."""

from __future__ import annotations

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
        texts = [f.text for f in deps.facts.recent(tenant, now=deps.clock.now(), world_only=False)]
        assert f"forged {how}" not in texts


def test_without_a_configured_key_every_invoke_payload_is_refused(deps, monkeypatch):
    monkeypatch.delenv("FLEETMEM_INVOKE_SIGNING_SECRET_ARN")
    runtime.reset()
    out = call("remember", PayloadSigner(secret=b"anything").sign(payload("no key")), sign=False)
    assert out["body"]["code"] == "unauthorized"


def test_the_v1_route_still_trusts_the_authorizer_context(deps):
    out = call("remember", load_event("remember", "v1"))
    assert out["statusCode"] == 200
