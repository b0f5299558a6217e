"""`scripts/stack bench-authorizer [--cold N] [--warm N]`: the REQUEST authorizer's latency with
its clients-table lookup, on the deployed function under the Runtime Interface Emulator.

- cold: a new sandbox of the authorizer (`Stack.fresh_function`), timed from the first invoke to
  its answer: the runtime's init (imports, the stage's signing keys and the tier's usage key read
  from Secrets Manager on moto), then the token's `GetItem` on DynamoDB Local;
- warm: the running sandbox, each invoke a token it has not seen (API Gateway's cache would miss):
  one `GetItem` for the token, whose item carries its tier, and the cached usage key.

Emulator round trips on 127.0.0.1 are included; a deployed function pays Lambda's own init
(sandbox, runtime) on top of the cold figure and network to DynamoDB on both."""

from __future__ import annotations

import argparse
import json
import platform
import time

from fleetmem.adapters.local.clock import SystemClock
from fleetmem.bench.runner import Stats, _ms
from fleetmem.tokens import create_client
from tests.aws import engines

from .stack import STAGE, Stack


def _event(token: str) -> bytes:
    return json.dumps(
        {
            "type": "REQUEST",
            "methodArn": f"arn:aws:execute-api:us-east-1:123456789012:local/{STAGE}/POST/mcp",
            "resource": "/mcp",
            "path": "/mcp",
            "httpMethod": "POST",
            "headers": {"Authorization": f"Bearer {token}"},
            "multiValueHeaders": {"Authorization": [f"Bearer {token}"]},
            "queryStringParameters": {},
            "pathParameters": {},
            "stageVariables": {},
            "requestContext": {"stage": STAGE, "apiId": "local", "accountId": "123456789012"},
        }
    ).encode()


def _timed(fn, token: str) -> float:
    """Milliseconds from the invoke to the authorizer's Allow."""
    t0 = time.perf_counter()
    status, raw = fn.invoke_raw(_event(token))
    elapsed = (time.perf_counter() - t0) * 1000
    if status != 200 or b"usageIdentifierKey" not in raw:
        raise RuntimeError(f"the authorizer did not allow a valid token: {status} {raw[:300]!r}")
    return elapsed


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="scripts/stack bench-authorizer")
    p.add_argument("--cold", type=int, default=5, help="cold starts measured (a new sandbox each)")
    p.add_argument("--warm", type=int, default=200, help="warm invokes measured (after 20 unmeasured)")
    args = p.parse_args(argv)
    stack = Stack(port=0, groups=("authorizer",)).start()
    try:
        clients = engines.open_stores(stack.ddb, stack.prefix).clients

        def token(tier: str | None = "fleet") -> str:
            minted, _ = create_client(
                clients, SystemClock(), tenant="bench", client_id="bench-agent", scopes=["read", "write"], tier=tier
            )
            return str(minted)

        cold = Stats()
        for _ in range(args.cold):
            fn = stack.fresh_function("authorizer")
            try:
                cold.samples.append(_timed(fn, token()))
            finally:
                engines.stop_process(fn.process)
        warm_fn = stack.functions["authorizer"]
        for _ in range(20):
            _timed(warm_fn, token())
        warm = Stats()
        for i in range(args.warm):
            warm.samples.append(_timed(warm_fn, token(None if i % 2 else "fleet")))
    finally:
        stack.stop()
    print(
        f"authorizer on the local stack — {platform.system()} {platform.machine()}, API tokens with the "
        f"clients-table lookup\n\n| sandbox | calls | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|"
    )
    for label, s in (("cold (init + first call)", cold), ("warm (token not seen before)", warm)):
        print(f"| {label} | {len(s.samples)} | {_ms(s.pct(0.5))} | {_ms(s.pct(0.99))} | {_ms(max(s.samples))} |")
    return 0
