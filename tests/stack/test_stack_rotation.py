"""Signing-key rotation in the middle of traffic on the local stack (tests/stack/stack.py).

Calls go through `/mcp` (authorizer -> edge -> verb function, an invoke payload signed by the
edge) and `POST /v1/<tool>` (authorizer -> verb function, an authorizer context signed by the
authorizer) from several threads while the stage's rotation function (`functions/signing_rotation`,
run from the asset under the emulator) performs Secrets Manager's four rotation steps on the
signing secret in moto's server, as Secrets Manager invokes them on AWS. No call is refused. The
functions re-read the keys every `SIGNING_KEY_TTL_S` (the stack's short setting); each phase of
traffic lasts at least that long after its rotation, so every function signs with the new key
before the next rotation.

A second rotation right after the first is refused by the rotation function (the previous key is
still inside its overlap window, `Stack.signing_key_accepted_s`: the key TTL, the authorizer cache
TTL and the signature validity, as the CDK app sets FLEETMEM_SIGNING_KEY_ACCEPTED_S) and changes
nothing, while the traffic keeps being answered; the next rotation goes through once the window
has passed (the test waits it out: about 90 s).

Afterwards a payload or an authorizer context signed with the current or the previous key is
accepted and one signed with the key before them is refused.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import boto3
import httpx
import pytest

from fleetmem.adapters.aws.invoker import PayloadSigner
from tests.aws import engines
from tests.functions.conftest import load_event
from tests.functions.gateway import FunctionError

from .conftest import mint, rpc
from .stack import SIGNING_KEY_TTL_S, Stack

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]

#: Calls every phase makes before its rotation, and at least after it.
CALLS_BEFORE, CALLS_AFTER = 6, 12


def secret_stage(stack: Stack, stage: str) -> bytes:
    sm = boto3.client("secretsmanager", endpoint_url=stack.moto, **engines.CREDENTIALS)
    return str(sm.get_secret_value(SecretId=stack.signing_secret_arn, VersionStage=stage)["SecretString"]).encode()


def rotate(stack: Stack) -> None:
    """One rotation as Secrets Manager runs it: the rotation function, once per step, one token."""
    token = str(uuid.uuid4())
    for step in ("createSecret", "setSecret", "testSecret", "finishSecret"):
        stack.invoke(
            "signing_rotation", {"SecretId": stack.signing_secret_arn, "ClientRequestToken": token, "Step": step}
        )


def _mcp_call(stack: Stack, token: str, tool: str, arguments: dict[str, Any]) -> str:
    """'' when the call succeeded, else what went wrong."""
    r = rpc(stack.mcp_url, token, "tools/call", {"name": tool, "arguments": arguments})
    if r.status_code != 200:
        return f"/mcp {tool}: HTTP {r.status_code} {r.text[:300]}"
    body = r.json()
    if "error" in body or body.get("result", {}).get("isError"):
        return f"/mcp {tool}: {json.dumps(body)[:300]}"
    return ""


def _v1_call(stack: Stack, token: str, tool: str, arguments: dict[str, Any]) -> str:
    r = httpx.post(
        f"{stack.base_url}/v1/{tool}", json=arguments, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    return "" if r.status_code == 200 else f"/v1 {tool}: HTTP {r.status_code} {r.text[:300]}"


class Traffic:
    """Threads calling the stage until stopped; counts calls and keeps every failure."""

    def __init__(self, stack: Stack, tenant: str) -> None:
        self.stack = stack
        self.tenant = tenant
        self.calls = 0
        self.failures: list[str] = []
        self.changed = threading.Condition()
        self.stopping = threading.Event()
        mcp_token = mint(stack, ["read", "write"], tenant=tenant)
        v1_token = mint(stack, ["read", "write"], tenant=tenant)
        n = uuid.uuid4().hex[:6]
        workers: list[Callable[[int], str]] = [
            lambda i: _mcp_call(
                stack, mcp_token, "remember", {"fact": f"mcp fact {n}-{i}", "provenance": "rotation test"}
            ),
            lambda i: _mcp_call(stack, mcp_token, "recall", {"query": f"mcp fact {n}"}),
            lambda i: _v1_call(
                stack, v1_token, "remember", {"fact": f"v1 fact {n}-{i}", "provenance": "rotation test"}
            ),
            lambda i: _v1_call(stack, v1_token, "recall", {"query": f"v1 fact {n}"}),
        ]
        self.threads = [threading.Thread(target=self._run, args=(w,), daemon=True) for w in workers]

    def _run(self, call: Callable[[int], str]) -> None:
        i = 0
        while not self.stopping.is_set():
            try:
                problem = call(i)
            except Exception as exc:  # a transport error is a refused call too
                problem = f"{type(exc).__name__}: {exc}"
            i += 1
            with self.changed:
                self.calls += 1
                if problem:
                    self.failures.append(problem)
                self.changed.notify_all()

    def wait_until(self, done: Callable[[], bool]) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: done() or bool(self.failures), timeout=300), "traffic stalled"

    def __enter__(self) -> Traffic:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=120)


def versions(stack: Stack) -> dict[str, list[str]]:
    sm = boto3.client("secretsmanager", endpoint_url=stack.moto, **engines.CREDENTIALS)
    return dict(sm.describe_secret(SecretId=stack.signing_secret_arn)["VersionIdsToStages"])


def phase_with_a_rotation(stack: Stack, *, then_again: bool = False) -> tuple[Traffic, float]:
    """Traffic with fresh tokens; one rotation once it runs (with `then_again`, a second one right
    after it, which must be refused and change nothing); on until at least CALLS_AFTER more calls
    and the key TTL (plus a second) have passed since the rotation. Returns the traffic and the
    wall-clock time the rotation had finished by."""
    with Traffic(stack, f"rot-{uuid.uuid4().hex[:6]}") as traffic:
        traffic.wait_until(lambda: traffic.calls >= CALLS_BEFORE)
        before = traffic.calls
        rotate(stack)
        rotated_at, finished = time.monotonic(), time.time()
        if then_again:
            kept = versions(stack)
            with pytest.raises(FunctionError, match="rotation refused"):
                rotate(stack)
            assert versions(stack) == kept
        traffic.wait_until(
            lambda: traffic.calls >= before + CALLS_AFTER and time.monotonic() > rotated_at + SIGNING_KEY_TTL_S + 1
        )
    return traffic, finished


def signed_invoke(stack: Stack, key: bytes, tenant: str) -> dict[str, Any]:
    payload = load_event("recall", "invoke")
    payload["caller"] = {**payload["caller"], "tenant": tenant}
    return dict(stack.invoke("recall", PayloadSigner(secret=key).sign(payload)))


def signed_v1(stack: Stack, key: bytes, tenant: str) -> dict[str, Any]:
    event = load_event("recall", "v1")
    claims = {"tenant": tenant, "client_id": "rotation", "scopes": "read"}
    proof = PayloadSigner(secret=key).sign_claims(claims, valid_for_s=60)
    event["requestContext"]["authorizer"] = {"principalId": f"{tenant}/rotation", **claims, "proof": proof}
    return dict(stack.invoke("recall", event))


def test_rotating_mid_traffic_refuses_no_call_a_rotation_inside_the_window_is_refused_and_the_oldest_key_retires(
    stack,
):
    oldest = secret_stage(stack, "AWSCURRENT")
    traffic, finished = phase_with_a_rotation(stack, then_again=True)
    assert traffic.failures == [], traffic.failures[:5]
    assert traffic.calls >= CALLS_BEFORE + CALLS_AFTER
    # the next rotation once nothing presents the retired key any more (the window is measured
    # from the current key's creation, which came before `finished`)
    time.sleep(max(0.0, finished + stack.signing_key_accepted_s + 1 - time.time()))
    traffic, _ = phase_with_a_rotation(stack)
    assert traffic.failures == [], traffic.failures[:5]
    assert traffic.calls >= CALLS_BEFORE + CALLS_AFTER

    current, previous = secret_stage(stack, "AWSCURRENT"), secret_stage(stack, "AWSPREVIOUS")
    assert len({oldest, previous, current}) == 3
    tenant = f"rot-{uuid.uuid4().hex[:6]}"
    for key in (current, previous):
        accepted = signed_invoke(stack, key, tenant)
        assert accepted["is_error"] is False, accepted
        assert signed_v1(stack, key, tenant)["statusCode"] == 200
    refused = signed_invoke(stack, oldest, tenant)
    assert refused["is_error"] is True and refused["body"]["code"] == "unauthorized"
    v1_refused = signed_v1(stack, oldest, tenant)
    assert v1_refused["statusCode"] == 401 and json.loads(v1_refused["body"])["code"] == "unauthorized"
