"""The edge's way to a verb: one Lambda function per verb, invoked synchronously with a signed
payload, and the verb function's check of that signature.

Signing (HMAC-SHA256): the edge signs the canonical JSON of the payload and the signing time
with a per-stage secret (Secrets Manager, ARN in `FLEETMEM_INVOKE_SIGNING_SECRET_ARN`, read once
per sandbox); the verb function recomputes it and compares in constant time, and refuses a
payload that is unsigned, forged, or signed more than `SIGNATURE_VALIDITY` ago (or ahead). So a
principal that may only call `lambda:InvokeFunction` cannot act as another tenant.

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

from fleetmem.errors import Fix, VerbError
from fleetmem.memory.envelope import build_envelope, internal_envelope
from fleetmem.models import Caller
from fleetmem.protocol import Surface
from fleetmem.transport.dispatch import DispatchResult
from fleetmem.transport.invoker import make_payload
from fleetmem.transport.logs import correlation

log = logging.getLogger("fleetmem.invoker")

SIGNATURE_FIELD = "signature"
#: How long a signed payload stays valid (seconds, either side of the verifier's clock).
SIGNATURE_VALIDITY = 60


def _canonical(payload: Mapping[str, Any], signed_at: int) -> bytes:
    body = {k: v for k, v in payload.items() if k != SIGNATURE_FIELD}
    return json.dumps([signed_at, body], sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


#: Marks an authorizer-context proof: its canonical form starts with this string, an invoke
#: payload's with a number, so neither signature can stand for the other.
CLAIMS_DOMAIN = "fleetmem-authorizer-context"
CLAIMS_VERSION = "v1"


def _claims_canonical(claims: Mapping[str, str], expires_at: int) -> bytes:
    body = {str(k): str(v) for k, v in claims.items()}
    return json.dumps(
        [CLAIMS_DOMAIN, expires_at, body], sort_keys=True, separators=(",", ":"), ensure_ascii=True
    ).encode()


class PayloadSigner:
    """HMAC-SHA256 over an invoke payload with the stage's secret. `secret` is the key itself
    (tests) or loaded on first use from Secrets Manager by `secret_arn` and kept for the sandbox."""

    def __init__(
        self,
        *,
        secret: bytes | None = None,
        secret_arn: str = "",
        region: str = "",
        now: Callable[[], float] = time.time,
    ) -> None:
        self._secret = secret
        self.secret_arn = secret_arn
        self.region = region
        self.now = now

    @property
    def configured(self) -> bool:
        return self._secret is not None or bool(self.secret_arn)

    def secret(self) -> bytes:
        if self._secret is None:
            if not self.secret_arn:
                raise RuntimeError("no invoke signing secret is configured")
            from fleetmem.adapters.aws import sdk_client

            value = sdk_client("secretsmanager", region=self.region).get_secret_value(SecretId=self.secret_arn)
            self._secret = str(value["SecretString"]).encode()
        return self._secret

    def sign(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        at = int(self.now())
        mac = hmac.new(self.secret(), _canonical(payload, at), hashlib.sha256).hexdigest()
        return {**payload, SIGNATURE_FIELD: {"v": 1, "at": at, "mac": mac}}

    def verify(self, payload: Mapping[str, Any]) -> bool:
        sig = payload.get(SIGNATURE_FIELD)
        if not isinstance(sig, Mapping) or sig.get("v") != 1:
            return False
        at, mac = sig.get("at"), sig.get("mac")
        if not isinstance(at, int) or not isinstance(mac, str):
            return False
        if abs(self.now() - at) > SIGNATURE_VALIDITY:
            return False
        expected = hmac.new(self.secret(), _canonical(payload, at), hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, mac)

    def sign_claims(self, claims: Mapping[str, str], *, valid_for_s: int) -> str:
        """`v1.<expires_at>.<hex mac>` over the claims and the expiry (unix seconds)."""
        expires_at = int(self.now()) + valid_for_s
        mac = hmac.new(self.secret(), _claims_canonical(claims, expires_at), hashlib.sha256).hexdigest()
        return f"{CLAIMS_VERSION}.{expires_at}.{mac}"

    def verify_claims(self, claims: Mapping[str, str], proof: object) -> bool:
        """True when `proof` is this key's `sign_claims` of exactly these claims and not expired."""
        if not isinstance(proof, str):
            return False
        version, _, rest = proof.partition(".")
        expires, _, mac = rest.partition(".")
        if version != CLAIMS_VERSION or not (expires.isascii() and expires.isdigit()) or not mac:
            return False
        if int(expires) < self.now():
            return False
        expected = hmac.new(self.secret(), _claims_canonical(claims, int(expires)), hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, mac)


#: Seconds to wait for a synchronous verb invocation when no deadline of its own is given: the
#: ceiling, below the edge function's and the API integration's timeouts (the deploy sets it per
#: stage). Each verb's own deadline (`deadlines`, from adapters/aws/deadlines.py via the deploy)
#: is shorter: a slow verb holds an edge slot only as long as that verb can take.
INVOKE_READ_TIMEOUT = 26


class LambdaInvoker:
    """Invokes the verb's own function synchronously (RequestResponse).

    `client` is a boto3 Lambda client (built lazily on first use by the AWS adapters' client
    factory when not injected, so nothing connects at import or construction). A function error
    or an unreadable answer becomes the `internal` envelope; the function's error text is never
    relayed; a throttled invoke is `unavailable` with a wait fix. `deadlines` (tool -> seconds,
    at most `read_timeout`) bounds how long the edge waits for each tool's function."""

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

        return sdk_client("lambda", region=self.region or "", read_timeout=self.deadline_for(tool))

    @property
    def client(self) -> Any:
        if self._client is None:
            from fleetmem.adapters.aws import sdk_client

            self._client = sdk_client("lambda", region=self.region or "", read_timeout=self.read_timeout)
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
            log.error(
                "verb function unreachable",
                extra={"event": "lambda_invoke_failed", "tool": tool[:64], "exc_type": type(exc).__name__},
            )
            return _internal(correlation_id, tool)


_THROTTLED = frozenset({"TooManyRequestsException", "ThrottlingException", "EC2ThrottledException"})
THROTTLE_RETRY_SECONDS = 1


def _throttled(correlation_id: str, tool: str, arguments: dict[str, Any] | None) -> DispatchResult:
    err = VerbError(
        "unavailable",
        f"The {tool} function is at its concurrency limit.",
        f"Wait {THROTTLE_RETRY_SECONDS} s, then retry the same call.",
        why="The platform throttled the invocation before it ran; nothing was done.",
        detail={"reason": "throttled"},
        fix=Fix(
            why="The same call after a short wait.",
            mcp={"tool": tool, "arguments": dict(arguments or {})},
            actor="provider",
            retry_after_seconds=THROTTLE_RETRY_SECONDS,
        ),
        retryable=True,
    )
    body = build_envelope(err, tool=tool, arguments=arguments, correlation_id=correlation_id, transport="mcp")
    return DispatchResult(body, True, [], correlation_id)


def _internal(correlation_id: str, tool: str) -> DispatchResult:
    return DispatchResult(internal_envelope(correlation_id, tool), True, [], correlation_id)
