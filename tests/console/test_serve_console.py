"""`fleetmem serve` and its console: on by default and announced, off with `--no-console` or
`FLEETMEM_CONSOLE=off`, and absent on the verbs surface (its screens call the full surface's tools)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from tests.conformance.test_conformance_local import fleetmem_command
from tests.mcp.served import Served, server_env


@pytest.mark.parametrize(
    ("args", "env", "served"),
    [
        ((), {}, True),
        (("--no-console",), {}, False),
        ((), {"FLEETMEM_CONSOLE": "off"}, False),
        (("--surface", "verbs"), {}, False),
    ],
    ids=["default", "flag-off", "env-off", "verbs-surface"],
)
def test_the_console_is_served_only_where_it_can_work(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], served: bool
) -> None:
    server = Served(tmp_path, server_env(FLEETMEM_MODEL_DIR=str(tmp_path / "no-model"), **env), args=args)
    server.start()
    try:
        r = httpx.get(f"{server.url}/console/login", timeout=30)
        announced = "Memory console" in server.log_text()
        if served:
            assert r.status_code == 200 and "fleetmem token" in r.text and announced
        else:
            assert r.status_code == 404 and not announced
        assert httpx.get(f"{server.url}/health", timeout=30).status_code == 200
    finally:
        server.stop()


def test_a_malformed_switch_is_refused_naming_the_variable(tmp_path: Path) -> None:
    env = server_env(FLEETMEM_CONSOLE="maybe")
    out = subprocess.run(
        [*fleetmem_command(), "serve", "--port", "0", "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode != 0 and "FLEETMEM_CONSOLE must be on or off" in out.stderr
