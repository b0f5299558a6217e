"""The edge's way to a verb (the `Invoker` port of `fleetmem.contract.invoker`): one Lambda
function per verb, invoked synchronously with a signed payload, and the verb function's check of
that signature.

Signing (HMAC-SHA256): the edge signs the canonical JSON of the payload and the signing time
with the stage's current key (Secrets Manager, ARN in `FLEETMEM_INVOKE_SIGNING_SECRET_ARN`; the
current and previous versions, re-read on a TTL: `signing_keys`) and names the key; the verb
function recomputes it with the named key when that is the current or previous one, compares in
constant time, and refuses a payload that is unsigned, forged, signed with an older key, or signed
more than `SIGNATURE_VALIDITY` ago (or ahead). So a principal that may only call
`lambda:InvokeFunction` cannot act as another tenant, and a key rotation refuses no call.

The same key signs the REQUEST authorizer's context (`sign_claims`: tenant, client, scopes and an
expiry, as one string `proof`, since a context value must be a string): a function reached through
API Gateway acts on those claims only when `verify_claims` accepts them, so a hand-made proxy event
invoked directly carries no caller.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from fleetmem.adapters.aws.sdk_clients import INVOKE_READ_TIMEOUT_S
from fleetmem.adapters.aws.signing_keys import DEFAULT_KEY_TTL_S, SIGNATURE_VALIDITY, KeyRing, secrets_manager_fetch
from fleetmem.contract.correlation import correlation
from fleetmem.contract.invoker import make_payload
from fleetmem.contract.result import DispatchResult, error_result, internal_result
from fleetmem.errors import retry_later
from fleetmem.models import Caller
from fleetmem.protocol import Surface

log = logging.getLogger("fleetmem.invoker")

SIGNATURE_FIELD = "signature"
#: The signature format: v2 names its key (`kid`), so a verifier holding two keys computes one MAC.
SIGNATURE_VERSION = 2


def _canonical(payload: Mapping[str, Any], signed_at: int) -> bytes:
    body = {k: v for k, v in payload.items() if k != SIGNATURE_FIELD}
    return json.dumps([signed_at, body], sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


#: Marks an authorizer-context proof: its canonical form starts with this string, an invoke
#: payload's with a number, so neither signature can stand for the other.
CLAIMS_DOMAIN = "fleetmem-authorizer-context"
CLAIMS_VERSION = "v2"


def _claims_canonical(claims: Mapping[str, str], expires_at: int) -> bytes:
    body = {str(k): str(v) for k, v in claims.items()}
    return json.dumps(
        [CLAIMS_DOMAIN, expires_at, body], sort_keys=True, separators=(",", ":"), ensure_ascii=True
    ).encode()


class PayloadSigner:
    """HMAC-SHA256 over an invoke payload with the stage's signing keys (`signing_keys.KeyRing`):
    signs with the current key and names it (`kid`); verifies with the key a signature names when
    it is the current or the previous one. `secret` is one fixed key (tests); otherwise the keys
    are read from Secrets Manager by `secret_arn` and kept for `key_ttl_s`."""

    def __init__(
        self,
        *,
        secret: bytes | None = None,
        secret_arn: str = "",
        region: str = "",
        now: Callable[[], float] = time.time,
        key_ttl_s: float = DEFAULT_KEY_TTL_S,
        ring: KeyRing | None = None,
    ) -> None:
        self.secret_arn = secret_arn
        self.region = region
        self.now = now
        self._ring = ring or (KeyRing.fixed(secret) if secret is not None else None)
        self.key_ttl_s = key_ttl_s

    @property
    def configured(self) -> bool:
        return self._ring is not None or bool(self.secret_arn)

    @property
    def ring(self) -> KeyRing:
        if self._ring is None:
            if not self.secret_arn:
                raise RuntimeError("no invoke signing secret is configured")
            from fleetmem.adapters.aws import sdk_client

            client = sdk_client("signing_keys", region=self.region)
            self._ring = KeyRing(secrets_manager_fetch(client, self.secret_arn), ttl_s=self.key_ttl_s)
        return self._ring

    def secret(self) -> bytes:
        """The current key's material."""
        return self.ring.current().secret

    def sign(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        at, key = int(self.now()), self.ring.current()
        mac = hmac.new(key.secret, _canonical(payload, at), hashlib.sha256).hexdigest()
        return {**payload, SIGNATURE_FIELD: {"v": SIGNATURE_VERSION, "kid": key.kid, "at": at, "mac": mac}}

    def verify(self, payload: Mapping[str, Any]) -> bool:
        sig = payload.get(SIGNATURE_FIELD)
        if not isinstance(sig, Mapping) or sig.get("v") != SIGNATURE_VERSION:
            return False
        at, mac = sig.get("at"), sig.get("mac")
        if not isinstance(at, int) or not isinstance(mac, str):
            return False
        if abs(self.now() - at) > SIGNATURE_VALIDITY:
            return False
        key = self.ring.find(sig.get("kid"))
        if key is None:
            return False
        expected = hmac.new(key.secret, _canonical(payload, at), hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, mac)

    def sign_claims(self, claims: Mapping[str, str], *, valid_for_s: int) -> str:
        """`v2.<key id>.<expires_at>.<hex mac>` over the claims and the expiry (unix seconds)."""
        expires_at, key = int(self.now()) + valid_for_s, self.ring.current()
        mac = hmac.new(key.secret, _claims_canonical(claims, expires_at), hashlib.sha256).hexdigest()
        return f"{CLAIMS_VERSION}.{key.kid}.{expires_at}.{mac}"

    def verify_claims(self, claims: Mapping[str, str], proof: object) -> bool:
        """True when `proof` is an accepted key's `sign_claims` of exactly these claims, unexpired."""
        if not isinstance(proof, str):
            return False
        parts = proof.split(".")
        if len(parts) != 4:
            return False
        version, kid, expires, mac = parts
        if version != CLAIMS_VERSION or not (expires.isascii() and expires.isdigit()) or not mac:
            return False
        if int(expires) < self.now():
            return False
        key = self.ring.find(kid)
        if key is None:
            return False
        expected = hmac.new(key.secret, _claims_canonical(claims, int(expires)), hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, mac)


#: Seconds to wait for a synchronous verb invocation when no deadline of its own is given: the
#: ceiling, below the edge function's and the API integration's timeouts (the deploy sets it per
#: stage). Each verb's own deadline (`deadlines`, from adapters/aws/deadlines.py via the deploy)
#: is shorter: a slow verb holds an edge slot only as long as that verb can take.
INVOKE_READ_TIMEOUT = INVOKE_READ_TIMEOUT_S


class LambdaInvoker:
    """Invokes the verb's own function synchronously (RequestResponse).

    `client` is a boto3 Lambda client (built lazily on first use by the AWS adapters' client
    factory when not injected, so nothing connects at import or construction). A function error
    or an unreadable answer becomes the `internal` envelope; the function's error text is never
    relayed. The client makes ONE attempt (`sdk_clients.SDK_CLIENTS["verb_invoke"]`): a throttled
    invoke and one that outlives the verb's deadline answer `unavailable` with a wait fix at once,
    and no verb runs twice for one call. `deadlines` (tool -> seconds, at most `read_timeout`)
    bounds how long the edge waits for each tool's function."""

    def __init__(
        self,
        function_name_for: Callable[[str], str],
        *,
        client: Any = None,
        surface: Surface = "full",
        region: str | None = None,
        signer: PayloadSigner | None = None,
        read_timeout: int = INVOKE_READ_TIMEOUT,
        deadlines: Mapping[str, int] | None = None,
    ) -> None:
        self.function_name_for = function_name_for
        self._client = client
        self.surface = surface
        self.region = region
        self.signer = signer
        self.read_timeout = read_timeout
        self.deadlines = dict(deadlines or {})

    def deadline_for(self, tool: str) -> int:
        """Seconds the edge waits for `tool`'s function: its own deadline, never above the ceiling."""
        return min(self.deadlines.get(tool, self.read_timeout), self.read_timeout)

    def client_for(self, tool: str) -> Any:
        """The Lambda client whose read timeout is `tool`'s deadline (one cached client per value)."""
        if self._client is not None:
            return self._client
        from fleetmem.adapters.aws import sdk_client

        return sdk_client("verb_invoke", region=self.region or "", read_timeout=self.deadline_for(tool))

    @property
    def client(self) -> Any:
        if self._client is None:
            from fleetmem.adapters.aws import sdk_client

            self._client = sdk_client("verb_invoke", region=self.region or "", read_timeout=self.read_timeout)
        return self._client

    def invoke(
        self, tool: str, arguments: dict[str, Any] | None, caller: Caller, correlation_id: str
    ) -> DispatchResult:
        with correlation(correlation_id):
            return self._invoke(tool, arguments, caller, correlation_id)

    def _invoke(
        self, tool: str, arguments: dict[str, Any] | None, caller: Caller, correlation_id: str
    ) -> DispatchResult:
        payload = make_payload(tool, arguments, caller, correlation_id, self.surface)
        try:
            if self.signer is not None:
                payload = self.signer.sign(payload)
            response = self.client_for(tool).invoke(
                FunctionName=self.function_name_for(tool),
                InvocationType="RequestResponse",
                Payload=json.dumps(payload).encode(),
            )
            raw = response["Payload"].read()
            if response.get("FunctionError"):
                log.error(
                    "verb function failed",
                    extra={
                        "event": "lambda_function_error",
                        "tool": tool[:64],
                        "function_error": str(response.get("FunctionError")),
                    },
                )
                return _internal(correlation_id, tool)
            return DispatchResult.from_json(json.loads(raw))
        except Exception as exc:
            code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code", "")
            if code in _THROTTLED:
                return _throttled(correlation_id, tool, arguments)
            if _timed_out(exc):
                log.warning(
                    "verb function did not answer in time",
                    extra={"event": "lambda_invoke_timeout", "tool": tool[:64], "deadline_s": self.deadline_for(tool)},
                )
                return _late(correlation_id, tool, arguments, self.deadline_for(tool))
            log.error(
                "verb function unreachable",
                extra={"event": "lambda_invoke_failed", "tool": tool[:64], "exc_type": type(exc).__name__},
            )
            return _internal(correlation_id, tool)


_THROTTLED = frozenset({"TooManyRequestsException", "ThrottlingException", "EC2ThrottledException"})
THROTTLE_RETRY_SECONDS = 1
#: The wait a timed-out invoke asks for: the verb may still be finishing the call.
TIMEOUT_RETRY_SECONDS = 5


def _timed_out(exc: BaseException) -> bool:
    """The invoke got no answer within the deadline (the read), or no connection at all in time."""
    from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

    return isinstance(exc, ReadTimeoutError | ConnectTimeoutError)


def _throttled(correlation_id: str, tool: str, arguments: dict[str, Any] | None) -> DispatchResult:
    err = retry_later(
        f"The {tool} function is at its concurrency limit.",
        wait_s=THROTTLE_RETRY_SECONDS,
        why="The platform throttled the invocation before it ran; nothing was done.",
        fix_why="The same call after a short wait.",
        reason="throttled",
        mcp={"tool": tool, "arguments": dict(arguments or {})},
    )
    return error_result(err, tool=tool, arguments=arguments, correlation_id=correlation_id, transport="mcp")


def _late(correlation_id: str, tool: str, arguments: dict[str, Any] | None, deadline_s: int) -> DispatchResult:
    err = retry_later(
        f"The {tool} function did not answer within {deadline_s} s.",
        wait_s=TIMEOUT_RETRY_SECONDS,
        why="The edge stopped waiting at the verb's deadline and did not invoke it again; the call "
        "may still have run (a write with the same idempotency_key is not applied twice).",
        fix_why="The same call after a wait.",
        reason="timeout",
        mcp={"tool": tool, "arguments": dict(arguments or {})},
    )
    return error_result(err, tool=tool, arguments=arguments, correlation_id=correlation_id, transport="mcp")


def _internal(correlation_id: str, tool: str) -> DispatchResult:
    return internal_result(correlation_id, tool)
