"""The signing-key ring and the rotation steps.

The ring's unit cases read keys through an injected `fetch` and an injected clock (no sleeping).
The Secrets Manager cases run against moto's server (a real Secrets Manager API on 127.0.0.1):
the rotation function's four steps, and a ring reading AWSCURRENT / AWSPREVIOUS from the secret.
"""

from __future__ import annotations

import time
import uuid

import boto3
import pytest

from fleetmem.adapters.aws.invoker import PayloadSigner
from fleetmem.adapters.aws.signing_keys import (
    FORCED_REFRESH_INTERVAL_S,
    PENDING,
    PREVIOUS,
    KeyRing,
    RotationError,
    key_id,
    rotation_step,
    secrets_manager_fetch,
)
from tests.aws import engines


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Secret:
    """Key material as Secrets Manager's stages would hold it, counting the reads."""

    def __init__(self, *keys: bytes) -> None:
        self.keys = list(keys)  # oldest first; the last is current
        self.reads = 0

    def rotate(self) -> bytes:
        self.keys.append(uuid.uuid4().hex.encode() * 2)
        return self.keys[-1]

    def fetch(self) -> tuple[bytes, bytes | None]:
        self.reads += 1
        return self.keys[-1], (self.keys[-2] if len(self.keys) > 1 else None)


def signer(secret: Secret, clock: Clock, ttl: float = 300) -> PayloadSigner:
    return PayloadSigner(ring=KeyRing(secret.fetch, ttl_s=ttl, clock=clock))


PAYLOAD = {"tool": "recall", "arguments": {"query": "q"}, "caller": {"tenant": "t", "client_id": "c"}}
CLAIMS = {"tenant": "t", "client_id": "c", "scopes": "read"}


def test_current_and_previous_keys_verify_and_an_older_one_is_refused() -> None:
    secret, clock = Secret(b"k0" * 32), Clock()
    edge = signer(secret, clock, ttl=0)  # reads on every call: always the current key
    by_k0, claims_k0 = edge.sign(PAYLOAD), edge.sign_claims(CLAIMS, valid_for_s=60)
    secret.rotate()
    by_k1 = edge.sign(PAYLOAD)
    verifier = signer(secret, clock)
    assert verifier.verify(by_k1) and verifier.verify(by_k0)
    assert verifier.verify_claims(CLAIMS, claims_k0)
    secret.rotate()  # k0 is now older than AWSPREVIOUS
    fresh = signer(secret, clock)
    assert fresh.verify(by_k1)
    assert not fresh.verify(by_k0)
    assert not fresh.verify_claims(CLAIMS, claims_k0)


def test_a_signature_names_its_key_and_never_carries_it() -> None:
    secret, clock = Secret(b"k0" * 32), Clock()
    signed = signer(secret, clock).sign(PAYLOAD)
    assert signed["signature"]["kid"] == key_id(b"k0" * 32)
    assert "k0k0" not in repr(signed)
    proof = signer(secret, clock).sign_claims(CLAIMS, valid_for_s=60)
    assert proof.split(".")[1] == key_id(b"k0" * 32) and "k0k0" not in proof


def test_a_stale_verifier_reads_again_once_when_a_signature_names_a_key_it_lacks() -> None:
    secret, clock = Secret(b"k0" * 32), Clock()
    verifier = signer(secret, clock)
    assert verifier.verify(signer(secret, clock).sign(PAYLOAD))
    assert secret.reads == 2  # each signer's first read
    secret.rotate()
    by_new = signer(secret, clock).sign(PAYLOAD)  # a sandbox that read after the rotation
    reads = secret.reads
    assert verifier.verify(by_new)  # within its TTL, yet it catches up
    assert secret.reads == reads + 1
    assert verifier.verify(by_new)
    assert secret.reads == reads + 1  # held now: no further read


def test_unknown_key_ids_cause_at_most_one_read_per_interval() -> None:
    secret, clock = Secret(b"k0" * 32), Clock()
    verifier = signer(secret, clock)
    forged = PayloadSigner(secret=b"guessed" * 8)
    assert not verifier.verify(forged.sign(PAYLOAD))
    reads = secret.reads
    for _ in range(5):
        assert not verifier.verify(forged.sign(PAYLOAD))
        assert not verifier.verify_claims(CLAIMS, forged.sign_claims(CLAIMS, valid_for_s=60))
    assert secret.reads == reads
    clock.t += FORCED_REFRESH_INTERVAL_S
    assert not verifier.verify(forged.sign(PAYLOAD))
    assert secret.reads == reads + 1


def test_a_read_that_finds_the_new_key_holds_no_later_read_off() -> None:
    secret, clock = Secret(b"k0" * 32), Clock()
    verifier = signer(secret, clock)
    verifier.verify(signer(secret, clock).sign(PAYLOAD))
    secret.rotate()
    assert verifier.verify(signer(secret, clock).sign(PAYLOAD))
    secret.rotate()  # a second rotation at the same instant
    assert verifier.verify(signer(secret, clock).sign(PAYLOAD))


def test_the_ring_reads_again_after_its_ttl_and_not_before() -> None:
    secret, clock = Secret(b"k0" * 32), Clock()
    edge = signer(secret, clock, ttl=300)
    first = edge.sign(PAYLOAD)["signature"]["kid"]
    new = secret.rotate()
    clock.t += 299
    assert edge.sign(PAYLOAD)["signature"]["kid"] == first  # still inside the TTL
    clock.t += 1
    assert edge.sign(PAYLOAD)["signature"]["kid"] == key_id(new)


def test_a_failed_read_keeps_the_keys_held_and_a_first_read_failure_is_raised() -> None:
    secret, clock = Secret(b"k0" * 32), Clock()
    edge = signer(secret, clock, ttl=10)
    kid = edge.sign(PAYLOAD)["signature"]["kid"]

    def down() -> tuple[bytes, bytes | None]:
        raise ConnectionError("secrets manager unreachable")

    edge.ring.fetch = down
    clock.t += 11
    assert edge.sign(PAYLOAD)["signature"]["kid"] == kid
    with pytest.raises(ConnectionError):
        PayloadSigner(ring=KeyRing(down, clock=clock)).sign(PAYLOAD)


def test_a_forged_mac_under_a_known_key_id_is_refused() -> None:
    secret, clock = Secret(b"k0" * 32), Clock()
    s = signer(secret, clock)
    signed = s.sign(PAYLOAD)
    signed["signature"] = {**signed["signature"], "mac": "0" * 64}
    assert not s.verify(signed)
    kid = key_id(b"k0" * 32)
    assert not s.verify_claims(CLAIMS, f"v2.{kid}.{int(time.time()) + 60}.{'0' * 64}")


# ---------------------------------------------------------------------------------------------
# against Secrets Manager (moto's server)


@pytest.fixture
def sm(moto_endpoint: str):
    return boto3.client("secretsmanager", endpoint_url=moto_endpoint, **engines.CREDENTIALS)


#: The overlap window these tests give the rotation (seconds).
WINDOW = 390


def rotate(sm, arn: str, *, later_s: float = 0) -> str:
    """What Secrets Manager does for one rotation: the four steps with one token, in order;
    `later_s` seconds from now by the rotation's clock."""
    token = str(uuid.uuid4())
    for step in ("createSecret", "setSecret", "testSecret", "finishSecret"):
        rotation_step(
            sm,
            {"SecretId": arn, "ClientRequestToken": token, "Step": step},
            accepted_s=WINDOW,
            now=lambda: time.time() + later_s,
        )
    return token


def test_rotation_makes_a_new_current_key_and_labels_the_old_one_previous(sm) -> None:
    arn = sm.create_secret(Name=f"signing-{uuid.uuid4().hex[:8]}", SecretString="a" * 64)["ARN"]
    fetch = secrets_manager_fetch(sm, arn)
    assert fetch() == (b"a" * 64, None)
    token = rotate(sm, arn)
    current, previous = fetch()
    assert previous == b"a" * 64 and current != previous and len(current) == 64
    stages = sm.describe_secret(SecretId=arn)["VersionIdsToStages"]
    assert "AWSCURRENT" in stages[token]
    assert not any(PENDING in s for v, s in stages.items() if v != token)
    rotate(sm, arn, later_s=WINDOW)  # the next rotation, once the replaced key is no longer presented
    newest, prior = fetch()
    assert prior == current and newest not in (current, previous)


def test_a_rotation_inside_the_previous_ones_overlap_window_is_refused_and_changes_nothing(sm, caplog) -> None:
    """Two rotations in a row would retire the first key while sandboxes (key TTL) and cached
    authorizer contexts still present it: the second createSecret refuses, logged, and the secret
    keeps its versions; once the window has passed the same rotation goes through."""
    arn = sm.create_secret(Name=f"signing-{uuid.uuid4().hex[:8]}", SecretString="d" * 64)["ARN"]
    rotate(sm, arn)  # never rotated before: no window
    stages = sm.describe_secret(SecretId=arn)["VersionIdsToStages"]
    event = {"SecretId": arn, "ClientRequestToken": str(uuid.uuid4()), "Step": "createSecret"}
    with caplog.at_level("WARNING", logger="fleetmem.signing"), pytest.raises(RotationError, match="refused"):
        rotation_step(sm, event, accepted_s=WINDOW, now=lambda: time.time() + WINDOW - 30)
    refused = [r for r in caplog.records if r.name == "fleetmem.signing" and r.levelname == "WARNING"]
    assert [r.__dict__.get("event") for r in refused] == ["signing_key_rotation_refused"]
    assert sm.describe_secret(SecretId=arn)["VersionIdsToStages"] == stages  # nothing written
    rotation_step(sm, event, accepted_s=WINDOW, now=lambda: time.time() + WINDOW)
    assert PENDING in sm.describe_secret(SecretId=arn)["VersionIdsToStages"][event["ClientRequestToken"]]


def test_rotation_steps_are_safe_to_retry_and_refuse_what_they_do_not_own(sm) -> None:
    arn = sm.create_secret(Name=f"signing-{uuid.uuid4().hex[:8]}", SecretString="b" * 64)["ARN"]
    token = str(uuid.uuid4())
    event = {"SecretId": arn, "ClientRequestToken": token}
    rotation_step(sm, {**event, "Step": "createSecret"})
    pending = sm.get_secret_value(SecretId=arn, VersionStage=PENDING)["SecretString"]
    rotation_step(sm, {**event, "Step": "createSecret"})  # a retried step keeps the written key
    assert sm.get_secret_value(SecretId=arn, VersionStage=PENDING)["SecretString"] == pending
    rotation_step(sm, {**event, "Step": "testSecret"})
    rotation_step(sm, {**event, "Step": "finishSecret"})
    rotation_step(sm, {**event, "Step": "finishSecret"})  # already current: nothing to do
    assert sm.get_secret_value(SecretId=arn, VersionStage="AWSCURRENT")["SecretString"] == pending
    assert sm.get_secret_value(SecretId=arn, VersionStage=PREVIOUS)["SecretString"] == "b" * 64
    old = next(v for v, s in sm.describe_secret(SecretId=arn)["VersionIdsToStages"].items() if PREVIOUS in s)
    with pytest.raises(RotationError, match="not pending"):
        rotation_step(sm, {"SecretId": arn, "ClientRequestToken": old, "Step": "createSecret"})
    with pytest.raises(RotationError, match="unknown rotation step"):
        rotation_step(sm, {**event, "ClientRequestToken": str(uuid.uuid4()), "Step": "dropSecret"})


def test_a_ring_on_secrets_manager_accepts_a_signature_across_a_rotation(sm) -> None:
    arn = sm.create_secret(Name=f"signing-{uuid.uuid4().hex[:8]}", SecretString="c" * 64)["ARN"]
    clock = Clock()
    edge = PayloadSigner(ring=KeyRing(secrets_manager_fetch(sm, arn), ttl_s=300, clock=clock))
    verb = PayloadSigner(ring=KeyRing(secrets_manager_fetch(sm, arn), ttl_s=300, clock=clock))
    before = edge.sign(PAYLOAD)
    assert verb.verify(before)
    rotate(sm, arn)
    after = PayloadSigner(ring=KeyRing(secrets_manager_fetch(sm, arn), clock=clock)).sign(PAYLOAD)
    assert verb.verify(after) and verb.verify(before)
    assert edge.sign(PAYLOAD)["signature"]["kid"] == before["signature"]["kid"]  # inside its TTL
    clock.t += 300
    assert edge.sign(PAYLOAD)["signature"]["kid"] == after["signature"]["kid"]
