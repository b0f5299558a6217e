"""The stage's signing keys: Secrets Manager's own version stages of one secret, and its rotation.

Secrets Manager rotation is native to version stages: a rotation writes the new key as a version
labelled AWSPENDING, then moves AWSCURRENT onto it, and Secrets Manager moves AWSPREVIOUS onto the
version AWSCURRENT left. So the ring reads exactly two versions (`get_secret_value(VersionStage=...)`)
and needs no JSON of its own: the signer signs with AWSCURRENT, a verifier accepts AWSCURRENT or
AWSPREVIOUS. Every signature names its key by `key_id` (a digest of the key, never the key), so a
verifier computes one HMAC, with the key named, and compares it in constant time.

A ring keeps what it read for `ttl_s` (setting `FLEETMEM_SIGNING_KEY_TTL_S`, default 300 s) and
reads again once, at once, when a signature names a key it does not hold. A read that still
does not find the key (a made-up key id, or one older than AWSPREVIOUS) holds further such reads
off for `FORCED_REFRESH_INTERVAL_S`, so a stream of forged key ids costs one read per interval,
while a read that finds a new key holds nothing off. A sandbox
whose ring is older than a rotation therefore still verifies the new key's signatures, and a
sandbox that still signs with the old key is verified by the others until the next rotation: a
key stays accepted for one rotation period after it stops being current, which the deploy config
keeps above the ring TTL plus the authorizer cache TTL (infra/config.py `_rotation_outlasts_caches`).

`rotation_step` is the rotation function's body: the four steps Secrets Manager invokes
(createSecret, setSecret, testSecret, finishSecret) for a key only fleetmem reads. Its createSecret
refuses (fails the rotation, changing nothing, logged `signing_key_rotation_refused`) while the
current key is younger than the overlap window (`ENV_KEY_ACCEPTED_S`: how long a replaced key may
still be presented after a rotation, infra/config.py `signing_key_accepted_s`): rotating again
then would retire the previous key while sandboxes and cached authorizer contexts still present it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

#: How long a signed invoke payload stays valid (seconds, either side of the verifier's clock;
#: adapters/aws/invoker.py signs and checks with it, the rotation's overlap window counts it).
SIGNATURE_VALIDITY = 60

log = logging.getLogger("fleetmem.signing")

CURRENT, PREVIOUS, PENDING = "AWSCURRENT", "AWSPREVIOUS", "AWSPENDING"
#: Seconds a ring keeps the keys it read before reading them again.
DEFAULT_KEY_TTL_S = 300
#: Seconds after a read that did not find a signature's key before an unknown key id causes another.
FORCED_REFRESH_INTERVAL_S = 1.0
#: Characters of a generated key: letters and digits from Secrets Manager's generator, as the
#: deploy generates the first one (infra/constructs/signing.py), about 380 bits.
KEY_LENGTH = 64
#: The rotation function's overlap window in seconds (set by the deploy from
#: `DeployConfig.signing_key_accepted_s()`: key TTL + authorizer cache TTL + signature validity).
ENV_KEY_ACCEPTED_S = "FLEETMEM_SIGNING_KEY_ACCEPTED_S"


def key_id(secret: bytes) -> str:
    """A short public name for a key: 16 hex digits of a domain-separated SHA-256 of it."""
    return hashlib.sha256(b"fleetmem-signing-key-id\x00" + secret).hexdigest()[:16]


@dataclass(frozen=True)
class SigningKey:
    kid: str
    secret: bytes

    @classmethod
    def of(cls, secret: bytes) -> SigningKey:
        return cls(key_id(secret), secret)


#: Reads (current, previous) key material; previous is None when the secret was never rotated.
Fetch = Callable[[], tuple[bytes, bytes | None]]


@dataclass(eq=False, repr=False)  # no repr: the ring holds secrets
class KeyRing:
    """The current and previous signing keys, read through `fetch` and kept for `ttl_s`."""

    fetch: Fetch
    _: KW_ONLY
    ttl_s: float = DEFAULT_KEY_TTL_S
    clock: Callable[[], float] = time.monotonic
    _keys: dict[str, SigningKey] = field(default_factory=dict, init=False)
    _current: SigningKey | None = field(default=None, init=False)
    _read_at: float = field(default=0.0, init=False)
    _fruitless_at: float | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    @classmethod
    def fixed(cls, secret: bytes) -> KeyRing:
        """A ring of one key that never changes (tests, and a stage without a secret ARN)."""
        return cls(lambda: (secret, None), ttl_s=float("inf"))

    def current(self) -> SigningKey:
        """The key to sign with; reads the secret when the ring is empty or older than its TTL."""
        with self._lock:
            if self._current is None or self.clock() - self._read_at >= self.ttl_s:
                self._refresh()
            assert self._current is not None
            return self._current

    def find(self, kid: object) -> SigningKey | None:
        """The accepted key named `kid` (current or previous), reading the secret again once when
        the ring does not hold it; None when no accepted key has that name."""
        if not isinstance(kid, str):
            return None
        self.current()  # TTL refresh
        with self._lock:
            key = self._keys.get(kid)
            if key is not None:
                return key
            if self._fruitless_at is not None and self.clock() - self._fruitless_at < FORCED_REFRESH_INTERVAL_S:
                return None
            self._refresh()
            key = self._keys.get(kid)
            if key is None:
                self._fruitless_at = self.clock()
            return key

    def _refresh(self) -> None:
        """Read both stages; when the read fails and keys are held, keep them (logged) rather than
        refuse every call while Secrets Manager is unreachable."""
        try:
            current, previous = self.fetch()
        except Exception as exc:
            if self._current is None:
                raise
            log.warning(
                "signing keys not refreshed", extra={"event": "signing_keys_stale", "exc_type": type(exc).__name__}
            )
            self._read_at = self.clock()
            return
        self._current = SigningKey.of(current)
        keys = [self._current] + ([SigningKey.of(previous)] if previous else [])
        self._keys = {k.kid: k for k in keys}
        self._read_at = self.clock()


def secrets_manager_fetch(client: Any, secret_id: str) -> Fetch:
    """(AWSCURRENT, AWSPREVIOUS) of `secret_id` through a boto3 Secrets Manager client."""

    def fetch() -> tuple[bytes, bytes | None]:
        current = client.get_secret_value(SecretId=secret_id, VersionStage=CURRENT)
        try:
            previous = client.get_secret_value(SecretId=secret_id, VersionStage=PREVIOUS)
        except client.exceptions.ResourceNotFoundException:
            return _material(current), None
        return _material(current), _material(previous)

    return fetch


def _material(value: Mapping[str, Any]) -> bytes:
    return str(value["SecretString"]).encode()


# ---------------------------------------------------------------------------------------------
# rotation


class RotationError(Exception):
    """A rotation request this function refuses (Secrets Manager records the message)."""


def key_accepted_s() -> int:
    """The overlap window the deploy set (`ENV_KEY_ACCEPTED_S`); without it, the one the default
    settings give (default key TTL + default authorizer cache TTL + signature validity)."""
    from fleetmem.config import DEFAULT_AUTHORIZER_CACHE_TTL_S

    raw = os.environ.get(ENV_KEY_ACCEPTED_S, "")
    return int(raw) if raw.isdigit() else DEFAULT_KEY_TTL_S + DEFAULT_AUTHORIZER_CACHE_TTL_S + SIGNATURE_VALIDITY


def _refuse_inside_overlap(client: Any, arn: str, stages: Mapping[str, Any], accepted_s: float, now: float) -> None:
    """Raise (changing nothing) while the current key is younger than `accepted_s`: its version was
    created by the rotation that made it current, and the key it replaced (AWSPREVIOUS) is still
    presented until `accepted_s` after that. A secret never rotated (no AWSPREVIOUS) has no window."""
    if not any(PREVIOUS in s for s in stages.values()):
        return
    created = client.get_secret_value(SecretId=arn, VersionStage=CURRENT).get("CreatedDate")
    if created is None:
        return
    age = now - created.timestamp()
    if age < accepted_s:
        wait = int(accepted_s - age) + 1
        log.warning(
            "signing key rotation refused",
            extra={
                "event": "signing_key_rotation_refused",
                "current_key_age_s": int(age),
                "overlap_window_s": int(accepted_s),
            },
        )
        raise RotationError(
            f"rotation refused: the current signing key was created {int(age)} s ago and the key it "
            f"replaced is still presented for up to {int(accepted_s)} s after a rotation; nothing was "
            f"changed, rotate again in {wait} s"
        )


def rotation_step(
    client: Any, event: Mapping[str, Any], *, accepted_s: float | None = None, now: Callable[[], float] = time.time
) -> None:
    """One step of Secrets Manager's rotation protocol for the signing key.

    createSecret: a fresh random key (Secrets Manager's generator) as the AWSPENDING version
    `ClientRequestToken` (kept if a retried step finds it written); refused while the current key
    is younger than `accepted_s` (default `key_accepted_s()`). setSecret: nothing, the key
    lives only in this secret. testSecret: the pending key is readable and well formed.
    finishSecret: AWSCURRENT moves to the pending version, and Secrets Manager labels the old
    current AWSPREVIOUS.
    """
    arn, token, step = (str(event.get(k) or "") for k in ("SecretId", "ClientRequestToken", "Step"))
    if not arn or not token:
        raise RotationError("a rotation event names SecretId and ClientRequestToken")
    stages = client.describe_secret(SecretId=arn).get("VersionIdsToStages") or {}
    if CURRENT in stages.get(token, ()):
        return  # this version is already current: a retried finishSecret, nothing left to do
    if token in stages and PENDING not in stages[token]:
        raise RotationError(f"version {token} of the secret is not pending rotation")
    log.info("signing key rotation", extra={"event": "signing_key_rotation", "step": step})
    if step == "createSecret":
        try:
            client.get_secret_value(SecretId=arn, VersionId=token, VersionStage=PENDING)
        except client.exceptions.ResourceNotFoundException:
            window = key_accepted_s() if accepted_s is None else accepted_s
            _refuse_inside_overlap(client, arn, stages, window, now())
            key = client.get_random_password(PasswordLength=KEY_LENGTH, ExcludePunctuation=True)["RandomPassword"]
            client.put_secret_value(SecretId=arn, ClientRequestToken=token, SecretString=key, VersionStages=[PENDING])
    elif step == "setSecret":
        return
    elif step == "testSecret":
        pending = _material(client.get_secret_value(SecretId=arn, VersionId=token, VersionStage=PENDING))
        if len(pending) < KEY_LENGTH:
            raise RotationError("the pending signing key is shorter than a generated key")
    elif step == "finishSecret":
        current = next((v for v, s in stages.items() if CURRENT in s), None)
        moved = {"RemoveFromVersionId": current} if current else {}
        client.update_secret_version_stage(SecretId=arn, VersionStage=CURRENT, MoveToVersionId=token, **moved)
    else:
        raise RotationError(
            f"unknown rotation step {step!r}: expected createSecret, setSecret, testSecret or finishSecret"
        )
