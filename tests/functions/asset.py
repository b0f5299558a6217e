"""The built Lambda asset, run as Lambda runs it: each handler in its own interpreter with only the
asset (and what the Lambda runtime itself provides) on sys.path — never the dev venv.

- `build_asset(out)` runs `scripts/build-lambda` (same lock file as a deploy) for this host's
  architecture and the deployed `python_runtime` from the infra config.
- The Lambda runtime puts boto3/botocore on sys.path after the function's code (`/var/runtime`
  after `/var/task`); here `runtime/` plays that part: boto3 at this repository's pinned version,
  installed for the same Python and platform. The asset itself never ships boto3.
- `AssetRunner.run(group, event)` (or `run_many(group, events)`: one cold start, then the
  events in order in the same warm sandbox) starts `python -I -S` (no site-packages, no environment
  paths), sets `sys.path = [asset, runtime] + stdlib`, imports `functions.<group>.handler` and
  calls `handler(event, context)`, returning what Lambda would: the result, or
  `{errorType, errorMessage}` for an uncaught exception.
- `LambdaService` stands in for the Lambda Invoke API (it cannot run here) on 127.0.0.1: the
  edge's boto3 client reaches it through `AWS_ENDPOINT_URL_LAMBDA`, and each invoke runs the
  named function from the asset in its own process.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PYENV = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"

_RUNNER = r"""
import json, sys, traceback
asset, runtime, group, event_path, out_path = sys.argv[1:6]
sys.path[:0] = [asset, runtime]
leaks = [p for p in sys.path if "site-packages" in p or "dist-packages" in p]
class Context:
    function_name = "fleetmem-asset-" + group
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:" + function_name
    memory_limit_in_mb = 1024
    aws_request_id = "00000000-0000-4000-8000-000000000000"
    log_group_name = "/aws/lambda/" + function_name
    log_stream_name = "2026/06/11/[$LATEST]0123456789abcdef"
    def get_remaining_time_in_millis(self):
        return 15000
import logging
class _Extra(logging.Formatter):
    def format(self, record):
        extra = {k: v for k, v in record.__dict__.items() if k in ("event", "exc_type", "frames", "code", "tool")}
        return f"{record.levelname} {record.name} {record.getMessage()} {json.dumps(extra, default=str)}"
_h = logging.StreamHandler(sys.stdout)
_h.setFormatter(_Extra())
logging.basicConfig(level=logging.WARNING, handlers=[_h])  # the Lambda runtime's root handler
with open(event_path) as f:
    events = json.load(f)  # one sandbox: the events in order, as Lambda sends them to a warm one
def failed(exc):
    return {"errorType": type(exc).__name__, "errorMessage": str(exc), "trace": traceback.format_exc()}
outs = []
try:
    if leaks:
        raise RuntimeError(f"site packages on sys.path: {leaks}")
    import importlib
    handler = importlib.import_module(f"functions.{group}.handler").handler
except Exception as exc:
    outs = [failed(exc) for _ in events]
else:
    for event in events:
        try:
            outs.append({"result": handler(event, Context())})
        except Exception as exc:
            outs.append(failed(exc))
for out in outs:
    out["boto3_from"] = getattr(sys.modules.get("boto3"), "__file__", None)
with open(out_path, "w") as f:
    json.dump(outs, f, default=str)
"""


def deployed_python() -> str:
    """The `python_runtime` the infra config deploys (e.g. "3.13")."""
    from infra.config import EXAMPLE, load_config

    return str(load_config(default=EXAMPLE).python_runtime)


def interpreter_for(version: str) -> Path | None:
    """This machine's CPython `version` (pyenv), or None."""
    for candidate in sorted(PYENV.glob(f"{version}.*"), reverse=True):
        exe = candidate / "bin" / "python"
        if exe.exists():
            return exe
    return None


def host_arch() -> str:
    return {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}[platform.machine().lower()]


def build_asset(out: Path, python_version: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "FLEETMEM_LAMBDA_PYTHON": python_version,
        "FLEETMEM_LAMBDA_ARCH": host_arch(),
    }
    return subprocess.run(
        [str(ROOT / "scripts" / "build-lambda"), str(out)], env=env, capture_output=True, text=True, check=False
    )


def install_runtime_sdk(out: Path, python_version: str, extra: tuple[str, ...] = ()) -> None:
    """boto3 as the Lambda runtime provides it (its own directory, after the asset on sys.path),
    plus `extra` requirements the runtime also brings (the local stack adds `awslambdaric`)."""
    import boto3

    machine = "x86_64" if host_arch() == "x86_64" else "aarch64"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            "--target",
            str(out),
            "--platform",
            f"manylinux2014_{machine}",
            "--implementation",
            "cp",
            "--python-version",
            python_version,
            "--only-binary=:all:",
            f"boto3=={boto3.__version__}",
            *extra,
        ],
        check=True,
        capture_output=True,
        text=True,
    )


class AssetRunner:
    def __init__(self, python: Path, asset: Path, runtime: Path) -> None:
        self.python, self.asset, self.runtime = python, asset, runtime
        self.env: dict[str, str] = {}

    def run(self, group: str, event: Mapping[str, Any], env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """`event` handled by a new sandbox (a cold start)."""
        return self.run_many(group, [event], env)[0]

    def run_many(
        self, group: str, events: Sequence[Mapping[str, Any]], env: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """`events` handled in order by one new sandbox: a cold start, then warm invocations."""
        with tempfile.TemporaryDirectory() as tmp:
            event_path, out_path = Path(tmp) / "event.json", Path(tmp) / "out.json"
            event_path.write_text(json.dumps(list(events)))
            proc = subprocess.run(
                [
                    str(self.python),
                    "-I",
                    "-S",
                    "-c",
                    _RUNNER,
                    str(self.asset),
                    str(self.runtime),
                    group,
                    str(event_path),
                    str(out_path),
                ],
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **self.env, **(env or {})},
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if not out_path.exists():
                raise AssertionError(f"{group} handler process died (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
            outs: list[dict[str, Any]] = json.loads(out_path.read_text())
            for out in outs:
                out["stdout"] = proc.stdout
            return outs


class LambdaService:
    """The Lambda Invoke API on 127.0.0.1 (the service cannot run here): runs the named function
    from the asset in its own process and answers as the service does (`X-Amz-Function-Error`
    on an uncaught exception)."""

    def __init__(self, runner: AssetRunner, prefix: str) -> None:
        self.runner, self.prefix, self.calls = runner, prefix, []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                # /2015-03-31/functions/<name>/invocations
                name = self.path.split("/functions/", 1)[1].split("/", 1)[0]
                group = name.removeprefix(f"{service.prefix}-").replace("-", "_")
                service.calls.append(group)
                payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                out = service.runner.run(group, payload)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if "errorType" in out:
                    self.send_header("X-Amz-Function-Error", "Unhandled")
                    body = {"errorType": out["errorType"], "errorMessage": out["errorMessage"]}
                else:
                    body = out["result"]
                data = json.dumps(body).encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> LambdaService:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
