"""`scripts/stack overload`: how long recall takes to answer, and a remember behind it, while the
stack's way to the search node is frozen (`Stack.search_path`, a paused node as its clients see
it). A measurement, printed, never asserted: tests/stack/test_stack_overload.py checks behaviour.

Per round: `--recalls` recall calls one after another (each one's answer code and seconds), then
the same number of recalls at once with one remember beside them (the remember's seconds: on the
local stack every function has one sandbox, the edge included, so it waits behind whatever the
edge is already holding, as a full edge's callers wait on AWS)."""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
import sys
import time
import uuid
from typing import Any

import httpx

from .stack import Stack

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _call(stack: Stack, token: str, tool: str, arguments: dict[str, Any]) -> tuple[str, float]:
    t0 = time.monotonic()
    out = httpx.post(
        stack.mcp_url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}},
        headers={**HEADERS, "Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-06-18"},
        timeout=120,
    )
    took = time.monotonic() - t0
    if out.status_code != 200:
        return f"http_{out.status_code}", took
    result = out.json()["result"]
    body = json.loads(result["content"][0]["text"])
    if not result.get("isError"):
        return "ok", took
    return f"{body['code']}/{(body.get('detail') or {}).get('reason', '-')}", took


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="scripts/stack overload")
    p.add_argument("--recalls", type=int, default=5)
    args = p.parse_args(argv)
    from fleetmem.adapters.local.clock import SystemClock
    from fleetmem.tokens import create_client
    from tests.aws import engines

    stack = Stack(port=0).start()
    try:
        stores = engines.open_stores(stack.ddb, stack.prefix)
        token, _ = create_client(
            stores.clients, SystemClock(), tenant="overload", client_id="bench", scopes=["read", "write"]
        )
        token = str(token)
        fact = {"fact": "The overload tank is in room 4.", "provenance": "bench", "entity": "projects/overload"}
        print("search answering: recall", _call(stack, token, "recall", {"query": "overload tank"}))
        stack.gateway.after_call = lambda: None  # indexing runs off the stream only, as on AWS
        stack.search_path.freeze()
        try:
            sequential = [_call(stack, token, "recall", {"query": "overload tank"}) for _ in range(args.recalls)]
            for i, (code, took) in enumerate(sequential, 1):
                print(f"search frozen: recall {i}: {code} in {took:.2f} s")
            with concurrent.futures.ThreadPoolExecutor(max_workers=args.recalls + 1) as pool:
                recalls = [
                    pool.submit(_call, stack, token, "recall", {"query": "overload tank"}) for _ in range(args.recalls)
                ]
                time.sleep(0.2)  # the recalls are on their way first
                remember = pool.submit(
                    _call, stack, token, "remember", {**fact, "fact": f"{fact['fact']} {uuid.uuid4().hex[:6]}"}
                )
                burst = [f.result() for f in recalls]
                code, took = remember.result()
            print(
                f"search frozen: {args.recalls} concurrent recalls: {[c for c, _ in burst]}, "
                f"median {statistics.median(t for _, t in burst):.2f} s, max {max(t for _, t in burst):.2f} s"
            )
            print(f"search frozen: remember beside them: {code} in {took:.2f} s")
        finally:
            stack.search_path.thaw()
    finally:
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
