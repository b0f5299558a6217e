"""Cold-start report: how long each function's handler module takes to import in a fresh
interpreter, and how long the imports its first invocation adds (dispatch, the AWS adapters,
boto3). A report, not a test of speed: numbers depend on the machine (Lambda's arm64 cores are
slower than a laptop; budget ~1.5-2x).

    .venv/bin/python -m infra.cold_start [--runs 3] [--json] [--function mcp ...]

`--asset DIR` measures the built asset instead (`scripts/build-lambda DIR`), as a sandbox loads it:
the runtime's Python version (`python_runtime` of the deploy config, found as
`scripts/lib/compile_asset.py` finds it), `-I -S`, the asset and then a runtime directory holding
boto3 on the path (`--runtime DIR`; by default the local stack's, `~/.cache/fleetmem/stack/*/runtime`),
and no bytecode written (a deployed asset is read-only): whatever the asset does not ship compiled
is compiled on every run, as in a fresh sandbox.

    .venv/bin/python -m infra.cold_start --asset build/lambda --function mcp

`--snap-start` splits each cold start as SnapStart does (infra/config.py `cold_start`): the init a
snapshot captures (the handler module and `runtime.prewarm`) and what every restored sandbox still
runs (`runtime.after_restore`, then the first call's imports, already loaded by then).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetmem.config import ENV_BACKEND
from fleetmem.transport.aws_lambda.runtime import INIT_IMPORTS

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 400

#: What the first invocation of each kind of function imports beyond its handler module (the same
#: table SnapStart's init imports ahead, `runtime.prewarm`).
FIRST_CALL = {kind: list(names) for kind, names in INIT_IMPORTS.items()}

# Wall time and CPU time: on a busy machine the CPU time is the better estimate of an
# uncontended cold start (a Lambda sandbox has its vCPU share to itself).
_PROBE = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import importlib
importlib.import_module(sys.argv[1])
snap = sys.argv[3] == "snap-start"
if snap:  # SnapStart: init prewarms, and the snapshot captures everything up to here
    from fleetmem.transport.aws_lambda import runtime
    runtime.prewarm(sys.argv[4])
t1, c1 = time.perf_counter(), time.process_time()
if snap:  # each restored sandbox runs the after-restore hook before its first call
    runtime.after_restore()
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


@dataclass(frozen=True)
class AssetRun:
    """How to load the built asset: interpreter, asset directory, runtime (boto3) directory."""

    python: Path
    asset: Path
    runtime: Path


_ASSET_PATH = "import sys; sys.path[:0] = [{asset!r}, {runtime!r}]\n"


def measure(
    group: str, runs: int, asset: AssetRun | None = None, *, snap_start: bool = False
) -> dict[str, float | bool | str]:
    """With `snap_start`, "handler import" is the init a snapshot captures (handler module and
    `runtime.prewarm`) and "first call" what runs after each restore (`runtime.after_restore`
    and the first call's imports, by then loaded)."""
    env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "1" if asset else "0",
        ENV_BACKEND: "aws",
        "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
    }
    if asset is None:
        command = [sys.executable, "-c", _PROBE]
        cwd = ROOT
    else:
        env.pop("PYTHONPATH", None)
        path = _ASSET_PATH.format(asset=str(asset.asset), runtime=str(asset.runtime))
        command = [str(asset.python), "-I", "-S", "-B", "-c", path + _PROBE]  # -I ignores PYTHON* variables
        cwd = asset.asset
    samples = []
    for _ in range(runs):
        out = subprocess.run(  # noqa: S603 - our own interpreter on our own probe
            [
                *command,
                f"functions.{group}.handler",
                json.dumps(FIRST_CALL[kind(group)]),
                "snap-start" if snap_start else "on-demand",
                group,
            ],
            cwd=cwd,
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


def _compile_asset_module() -> Any:
    spec = importlib.util.spec_from_file_location("compile_asset", ROOT / "scripts" / "lib" / "compile_asset.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def asset_run(asset: Path, runtime: Path | None) -> AssetRun:
    """The interpreter and directories for `--asset` (module doc); SystemExit with the reason when
    one is missing."""
    from infra.config import EXAMPLE, load_config

    version = os.environ.get("FLEETMEM_LAMBDA_PYTHON") or load_config(default=EXAMPLE).python_runtime
    python = _compile_asset_module().interpreter(version)
    if python is None:
        raise SystemExit(f"no python {version} (the deploy config's python_runtime) on this machine")
    if not (asset / "functions").is_dir():
        raise SystemExit(f"{asset} holds no built asset: run scripts/build-lambda {asset}")
    if runtime is None:
        stack = Path.home() / ".cache" / "fleetmem" / "stack"
        built = sorted(stack.glob("*/runtime/boto3"), key=lambda p: p.stat().st_mtime, reverse=True)
        if not built:
            raise SystemExit("no runtime directory with boto3: pass --runtime DIR (or run scripts/stack once)")
        runtime = built[0].parent
    # The Lambda runtime ships its boto3 compiled; so does this directory once this has run.
    subprocess.run([str(python), "-m", "compileall", "-q", str(runtime)], check=False, capture_output=True)  # noqa: S603
    return AssetRun(python=python, asset=asset.resolve(), runtime=runtime.resolve())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--asset", type=Path, help="measure this built asset (module doc)")
    parser.add_argument("--runtime", type=Path, help="with --asset: the directory holding boto3")
    parser.add_argument("--function", action="append", help="only these functions (repeatable)")
    parser.add_argument(
        "--snap-start", action="store_true", help="split init (captured by a snapshot) from what runs after restore"
    )
    args = parser.parse_args(argv)
    asset = asset_run(args.asset, args.runtime) if args.asset else None
    groups = args.function or functions()
    if asset is None:
        # one warm-up so every later run reads compiled bytecode, as a deployed asset would
        measure(functions()[0], 1)
    rows = [measure(g, args.runs, asset, snap_start=args.snap_start) for g in groups]
    python = str(asset.python) if asset else sys.version.split()[0]
    if args.json:
        print(
            json.dumps(
                {"target_ms": TARGET_MS, "python": python, "asset": str(args.asset or ""), "rows": rows}, indent=2
            )
        )
        return 0
    where = f"asset {args.asset} with {python}" if asset else f"dev environment, python {python}"
    print(f"target <= {TARGET_MS} ms; {where}; wall / cpu milliseconds, median of {args.runs} fresh interpreters")
    heads = ("init (snapshot)", "+ after restore") if args.snap_start else ("handler import", "+ first call")
    print(f"{'function':<14}{heads[0]:>18}{heads[1]:>18}{'total (cpu)':>14}  mcp SDK")
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
