"""Cold-start report: how long each function's handler module takes to import in a fresh
interpreter, and how long the imports its first invocation adds (dispatch, the AWS adapters,
boto3). A report, not a test of speed: numbers depend on the machine (Lambda's arm64 cores are
slower than a laptop; budget ~1.5-2x).

    .venv/bin/python -m infra.cold_start [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from fleetmem.config import ENV_BACKEND

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 400

#: What the first invocation of each kind of function imports beyond its handler module.
FIRST_CALL = {
    "tool": [
        "fleetmem.transport.invoker",
        "fleetmem.adapters.aws.invoker",
        "fleetmem.wiring",
        "fleetmem.adapters.aws",
        "fleetmem.adapters.aws.facts",
        "fleetmem.adapters.aws.pages",
        "fleetmem.adapters.aws.opensearch",
        "fleetmem.adapters.aws.bedrock",
        "boto3",
        "opensearchpy",
    ],
    "mcp": ["fleetmem.transport.mcp_app", "fleetmem.adapters.aws.invoker", "boto3"],
    "authorizer": [
        "fleetmem.tokens",
        "fleetmem.wiring",
        "fleetmem.adapters.aws.auth",
        "fleetmem.adapters.aws.clients",
        "boto3",
        "jwt",
        "aws_lambda_powertools.utilities.parameters",
    ],
    "indexer": [
        "fleetmem.adapters.aws.stream",
        "fleetmem.adapters.aws.opensearch",
        "fleetmem.adapters.aws.bedrock",
        "aws_lambda_powertools.utilities.batch",
        "boto3",
        "opensearchpy",
    ],
    "signing_rotation": ["fleetmem.adapters.aws.signing_keys", "fleetmem.adapters.aws.dynamo", "boto3"],
    "heartbeat": [
        "fleetmem.transport.dispatch",
        "fleetmem.wiring",
        "fleetmem.adapters.aws.cursors",
        "fleetmem.adapters.aws.delivery",
        "boto3",
    ],
}

# Wall time and CPU time: on a busy machine the CPU time is the better estimate of an
# uncontended cold start (a Lambda sandbox has its vCPU share to itself).
_PROBE = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import importlib
importlib.import_module(sys.argv[1])
t1, c1 = time.perf_counter(), time.process_time()
for name in json.loads(sys.argv[2]):
    importlib.import_module(name)
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"handler_ms": (t1 - t0) * 1000, "first_call_ms": (t2 - t1) * 1000,
                  "handler_cpu_ms": (c1 - c0) * 1000, "first_call_cpu_ms": (c2 - c1) * 1000,
                  "mcp_loaded": "mcp.server" in sys.modules}))
"""


def functions() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "functions").glob("*/handler.py"))


def kind(group: str) -> str:
    return group if group in FIRST_CALL else "tool"


def measure(group: str, runs: int) -> dict[str, float | bool | str]:
    env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "0",
        ENV_BACKEND: "aws",
        "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
    }
    samples = []
    for _ in range(runs):
        out = subprocess.run(  # noqa: S603 - our own interpreter on our own probe
            [sys.executable, "-c", _PROBE, f"functions.{group}.handler", json.dumps(FIRST_CALL[kind(group)])],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        samples.append(json.loads(out.stdout))
    keys = ("handler_ms", "first_call_ms", "handler_cpu_ms", "first_call_cpu_ms")
    row: dict[str, float | bool | str] = {"function": group, "loads_mcp_sdk": samples[0]["mcp_loaded"]}
    row.update({k: round(statistics.median(s[k] for s in samples), 1) for k in keys})
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    # one warm-up so every later run reads compiled bytecode, as a deployed asset would
    measure(functions()[0], 1)
    rows = [measure(g, args.runs) for g in functions()]
    if args.json:
        print(json.dumps({"target_ms": TARGET_MS, "python": sys.version.split()[0], "rows": rows}, indent=2))
        return 0
    print(f"target <= {TARGET_MS} ms; wall / cpu milliseconds, median of {args.runs} fresh interpreters")
    print(f"{'function':<14}{'handler import':>18}{'+ first call':>18}{'total (cpu)':>14}  mcp SDK")
    for r in rows:
        total_cpu = r["handler_cpu_ms"] + r["first_call_cpu_ms"]  # type: ignore[operator]
        print(
            f"{r['function']:<14}{r['handler_ms']:>9.0f} /{r['handler_cpu_ms']:>5.0f} ms"
            f"{r['first_call_ms']:>9.0f} /{r['first_call_cpu_ms']:>5.0f} ms{total_cpu:>11.0f} ms"
            f"  {'yes' if r['loads_mcp_sdk'] else 'no'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
