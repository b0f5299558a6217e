"""A real `fleetmem serve` on 127.0.0.1 (free port) over a temporary data directory, tokens minted with
`fleetmem token create`, and a CLI runner whose per-user config and state directories are temporary.

The server uses the deterministic hash embedder, as the CLI runner does, so a query embeds the same on
both lanes and a local and a remote call over the same data answer the same body.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.conftest import Fleetmem, fleetmem_command
from tests.conformance.test_conformance_local import free_port, mint, wait_until_listening


@dataclass
class Served:
    url: str
    data_dir: Path
    token_file: Path
    env: dict[str, str]


def base_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETMEM_") and k != "CLAUDE_PROJECT_DIR"}
    env["FLEETMEM_EMBEDDER"] = "hash"
    env["FLEETMEM_MODEL_DIR"] = str(tmp / "no-model")
    env["FLEETMEM_CONFIG_DIR"] = str(tmp / "config")
    env["FLEETMEM_STATE_DIR"] = str(tmp / "state")
    return env


def write_token(path: Path, token: str) -> Path:
    path.write_text(token + "\n", encoding="utf-8")
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("ambient-serve")
    data_dir = tmp / "data"
    env = base_env(tmp)
    token = mint(env, data_dir, "read,write", "ambient-agent")
    port = free_port()
    log = (tmp / "serve.log").open("wb")
    proc = subprocess.Popen(
        [
            *fleetmem_command(),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--embedder",
            "hash",
            "--data-dir",
            str(data_dir),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        try:
            wait_until_listening(proc, port)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\n{(tmp / 'serve.log').read_text(errors='replace')}") from exc
        yield Served(f"http://127.0.0.1:{port}/mcp", data_dir, write_token(tmp / "token", token), env)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture
def fmx(tmp_path: Path, served: Served) -> Fleetmem:
    """The CLI (in process) with temporary config/state dirs; `data_dir=False` for remote calls."""
    env = base_env(tmp_path)
    return Fleetmem(served.data_dir, env)


class SlowServer:
    """Accepts connections on 127.0.0.1 and answers nothing until stopped: a server that hangs."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.stop = threading.Event()
        self.conns: list[socket.socket] = []
        self.accepted = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(conn)  # read nothing, answer nothing
            self.accepted.set()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        for c in self.conns:
            c.close()
        self.sock.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


@pytest.fixture
def slow_server() -> Iterator[SlowServer]:
    server = SlowServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def fm_local(tmp_path: Path) -> Fleetmem:
    """The CLI (in process) on a new, empty local memory, with temporary config/state dirs."""
    runner = Fleetmem(tmp_path / "data", base_env(tmp_path))
    assert runner("init").code == 0
    return runner
