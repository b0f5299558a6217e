"""A real `fleetmem serve` subprocess on a free 127.0.0.1 port over a data directory in tmp_path,
for the tests that signal or kill the server (SIGTERM, SIGKILL). Reuses the conformance suite's
port, readiness and token helpers."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.cli.conftest import fleetmem_command
from tests.conformance.test_conformance_local import free_port, mint, wait_until_listening


def server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETMEM_")}
    if "FLEETMEM_MODEL_DIR" in os.environ:
        env["FLEETMEM_MODEL_DIR"] = os.environ["FLEETMEM_MODEL_DIR"]
    env.update(extra)
    return env


@dataclass
class Served:
    """One `fleetmem serve` process; `start()` again after it ended runs a new one on the same
    data directory (and a new port)."""

    tmp: Path
    env: dict[str, str]
    args: tuple[str, ...] = ()
    token: str = ""
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""
    runs: int = 0
    _logs: list[Any] = field(default_factory=list)

    @property
    def data_dir(self) -> Path:
        return self.tmp / "data"

    def start(self) -> Served:
        if not self.token:
            self.token = mint(self.env, self.data_dir, "read,write", "writer")
        port = free_port()
        self.runs += 1
        log_path = self.tmp / f"serve-{self.runs}.log"
        log = log_path.open("wb")  # a file, not a pipe: a full pipe would stall the server
        self._logs.append(log)
        self.proc = subprocess.Popen(
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
                str(self.data_dir),
                *self.args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        try:
            wait_until_listening(self.proc, port)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\n{log_path.read_text(errors='replace')}") from exc
        self.url = f"http://127.0.0.1:{port}"
        return self

    def log_text(self) -> str:
        return "\n".join((self.tmp / f"serve-{n}.log").read_text(errors="replace") for n in range(1, self.runs + 1))

    def call(self, tool: str, args: dict[str, Any], *, timeout: float = 60.0) -> httpx.Response:
        return httpx.post(
            f"{self.url}/v1/{tool}", json=args, headers={"Authorization": f"Bearer {self.token}"}, timeout=timeout
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for log in self._logs:
            log.close()
        self._logs.clear()
