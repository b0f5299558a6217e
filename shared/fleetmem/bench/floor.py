"""The per-call floor: what the way in costs a call that does nothing.

    scripts/bench floor [--calls 2000] [--rounds 4] [--warmup 200] [--json]

Starts a real `fleetmem serve` on 127.0.0.1 (a free port) over a fresh data directory (no
embedder), mints a read/write token, and on ONE keep-alive connection (`http.client`) makes
`--calls` calls of each case, in `--rounds` alternated rounds (each round runs every case for its
share of the calls, the order rotated per round, so load from elsewhere falls on every case alike):

- `GET /health` — the HTTP server and the app's routing, nothing else;
- MCP `tools/call whoami` — the cheapest tool there is (no arguments, no store read): the MCP way
  in (guard, token check, JSON-RPC framing, the SDK, dispatch, the answer's serialisation);
- `POST /v1/whoami` — the same verb through `/v1`;
- MCP `tools/call get_page` of a slug that does not exist — one indexed store read that misses.

Prints p50/p99 per case and each as a ratio to `/health`'s of the same run. Every answer is checked
(status and, for MCP, `isError` as expected): a case with errors says so in its row.
"""

from __future__ import annotations

import argparse
import http.client
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HEALTH = "GET /health"
MCP_NOOP = "tools/call whoami"
V1_NOOP = "POST /v1/whoami"
PAGE_MISS = "tools/call get_page (miss)"
CASES = (HEALTH, MCP_NOOP, V1_NOOP, PAGE_MISS)


@dataclass
class Samples:
    ms: list[float] = field(default_factory=list)
    errors: int = 0

    def percentile(self, q: float) -> float:
        ordered = sorted(self.ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


class FloorClient:
    """One keep-alive HTTP/1.1 connection to the server and the four calls of the floor."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection(host, port, timeout=60)
        self.auth = {"Authorization": f"Bearer {token}"}
        self.mcp_headers = {
            **self.auth,
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2025-06-18",
        }
        self.n = 0

    def _request(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        self.conn.request(method, path, body=body, headers=headers)
        response = self.conn.getresponse()
        return response.status, response.read()

    def health(self) -> bool:
        status, _ = self._request("GET", "/health", None, {})
        return status == 200

    def _tools_call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        self.n += 1
        body = {
            "jsonrpc": "2.0",
            "id": self.n,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        status, raw = self._request("POST", "/mcp", json.dumps(body).encode(), self.mcp_headers)
        if status != 200:
            return None
        result = json.loads(raw).get("result")
        return result if isinstance(result, dict) else None

    def mcp_noop(self) -> bool:
        result = self._tools_call("whoami", {})
        return result is not None and result.get("isError") is False

    def v1_noop(self) -> bool:
        status, _ = self._request("POST", "/v1/whoami", b"{}", {**self.auth, "Content-Type": "application/json"})
        return status == 200

    def page_miss(self) -> bool:
        result = self._tools_call("get_page", {"slug": "bench/no-such-page"})
        if result is None or result.get("isError") is not True:
            return False
        envelope = json.loads(result["content"][0]["text"])
        return bool(envelope.get("error") == "not_found")

    def calls(self) -> dict[str, Callable[[], bool]]:
        return {HEALTH: self.health, MCP_NOOP: self.mcp_noop, V1_NOOP: self.v1_noop, PAGE_MISS: self.page_miss}

    def close(self) -> None:
        self.conn.close()


def measure(client: FloorClient, *, calls: int, rounds: int, warmup: int) -> dict[str, Samples]:
    """`calls` timed calls per case after `warmup` untimed ones, in `rounds` alternated rounds."""
    cases = client.calls()
    for call in cases.values():
        for _ in range(warmup):
            call()
    out = {name: Samples() for name in cases}
    names = list(cases)
    per_round = [calls // rounds + (1 if r < calls % rounds else 0) for r in range(rounds)]
    for r, n in enumerate(per_round):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            call, samples = cases[name], out[name]
            for _ in range(n):
                started = time.perf_counter()
                ok = call()
                samples.ms.append((time.perf_counter() - started) * 1000)
                samples.errors += int(not ok)
    return out


def report(samples: dict[str, Samples]) -> dict[str, Any]:
    """p50/p99 per case in ms and as a ratio to `/health`'s of the same run."""
    base = samples[HEALTH]
    base_p50, base_p99 = statistics.median(base.ms) if base.ms else 0.0, base.percentile(0.99)
    rows = []
    for name, s in samples.items():
        p50, p99 = statistics.median(s.ms) if s.ms else float("nan"), s.percentile(0.99)
        rows.append(
            {
                "call": name,
                "calls": len(s.ms),
                "errors": s.errors,
                "p50_ms": round(p50, 3),
                "p99_ms": round(p99, 3),
                "p50_ratio": round(p50 / base_p50, 2) if base_p50 else None,
                "p99_ratio": round(p99 / base_p99, 2) if base_p99 else None,
            }
        )
    return {"python": platform.python_version(), "rows": rows}


def render(doc: dict[str, Any]) -> str:
    lines = [
        f"per-call floor: one keep-alive connection to `fleetmem serve`, Python {doc['python']}",
        "| call | calls | p50 ms | p99 ms | p50 / health | p99 / health |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in doc["rows"]:
        errors = f" ({row['errors']} errors)" if row["errors"] else ""
        lines.append(
            f"| {row['call']}{errors} | {row['calls']} | {row['p50_ms']:.3f} | {row['p99_ms']:.3f} "
            f"| {row['p50_ratio']:.2f} | {row['p99_ratio']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def floor_beside(url: str, token: str, calls: int) -> dict[str, Samples]:
    """The floor's cases against a server another bench already runs (`url` is its `/mcp`), so the
    verbs' latencies can be read as multiples of the floor of the same run."""
    port = int(url.removeprefix("http://127.0.0.1:").removesuffix("/mcp"))
    client = FloorClient("127.0.0.1", port, token)
    try:
        return measure(client, calls=calls, rounds=4 if calls >= 4 else 1, warmup=min(20, calls))
    finally:
        client.close()


def run_floor(*, calls: int = 2000, rounds: int = 4, warmup: int = 200) -> dict[str, Any]:
    from fleetmem.bench.serving import http_server

    with tempfile.TemporaryDirectory() as tmp, http_server(Path(tmp) / "floor", "none") as (url, token):
        port = int(url.removeprefix("http://127.0.0.1:").removesuffix("/mcp"))
        client = FloorClient("127.0.0.1", port, token)
        try:
            return report(measure(client, calls=calls, rounds=rounds, warmup=warmup))
        finally:
            client.close()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fleetmem bench floor", description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=2000, help="timed calls per case (default 2000)")
    p.add_argument("--rounds", type=int, default=4, help="alternated rounds the calls are split into (default 4)")
    p.add_argument("--warmup", type=int, default=200, help="untimed calls per case first (default 200)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    return p


def main(argv: Sequence[str]) -> str:
    args = parser().parse_args(list(argv))
    if args.calls < 1 or args.rounds < 1 or args.warmup < 0:
        raise SystemExit("bench floor: --calls and --rounds must be at least 1, --warmup at least 0")
    doc = run_floor(calls=args.calls, rounds=min(args.rounds, args.calls), warmup=args.warmup)
    return json.dumps(doc, indent=2) + "\n" if args.json else render(doc)
