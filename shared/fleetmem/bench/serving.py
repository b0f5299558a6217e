"""The server a bench talks to: the deps over a data directory (`open_deps`) and a real
`fleetmem serve` subprocess on 127.0.0.1 over it (`http_server`)."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fleetmem.config import Settings

TENANT = "bench"


def open_deps(data_dir: Path, embedder: str) -> Any:
    from fleetmem.wiring import build_deps

    return build_deps(Settings.from_env(data_dir=data_dir, embedder=embedder))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server(data_dir: Path, embedder: str, threads: int | None = None) -> Iterator[tuple[str, str]]:
    """A `fleetmem serve` subprocess over the same data directory (with `--threads` when given);
    yields (url, token)."""
    deps = open_deps(data_dir, embedder)
    from fleetmem.tokens import create_client

    token, _ = create_client(
        deps.clients, deps.clock, tenant=TENANT, client_id="bench-agent", scopes=frozenset({"read", "write"})
    )
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "fleetmem.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        "--embedder",
        embedder,
        *(["--threads", str(threads)] if threads else []),
    ]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603 - our own argv
        try:
            deadline = time.monotonic() + 120
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"fleetmem serve did not start: {log.read()[-2000:].decode(errors='replace')}")
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                        break
                except OSError:
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/mcp", token
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
