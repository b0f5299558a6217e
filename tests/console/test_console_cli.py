"""`fleetmem console --profile NAME` against a real `fleetmem serve` standing in for a stage: the
profile's token is checked, the console serves on 127.0.0.1 with loopback-only Host checks, and the
printed one-time link signs a browser in exactly once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.console.conftest import Console, shot
from tests.mcp.served import server_env

ROOT = Path(__file__).resolve().parents[2]


def profile_env(tmp: Path, url: str, token: str) -> dict[str, str]:
    config = tmp / "config"
    config.mkdir(parents=True, exist_ok=True)
    (tmp / "token").write_text(token + "\n", encoding="utf-8")
    os.chmod(tmp / "token", 0o600)
    (config / "profiles.json").write_text(
        json.dumps({"profiles": {"stage": {"url": url, "token_file": str(tmp / "token")}}}), encoding="utf-8"
    )
    return server_env(FLEETMEM_CONFIG_DIR=str(config), PYTHONPATH=str(ROOT / "shared"))


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "fleetmem.cli", "console", "--profile", "stage", *args]


@pytest.fixture
def running(tmp_path: Path, serve_console: Console) -> Iterator[tuple[str, str]]:
    """The console process and the sign-in URL it printed."""
    env = profile_env(tmp_path, f"{serve_console.base}/mcp", serve_console.write)
    proc = subprocess.Popen(
        command("--port", "0", "--no-open"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        printed = ""
        while "Sign in" not in printed:
            line = proc.stdout.readline()
            assert line, f"the console ended: {proc.stderr.read() if proc.stderr else ''}"
            printed += line
        found = re.search(r"(http://127\.0\.0\.1:\d+/console/login\?ticket=\S+)", printed)
        assert found and serve_console.write not in printed
        yield found.group(1), printed
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_printed_link_signs_in_once(page: Any, running: tuple[str, str], serve_console: Console) -> None:
    url, printed = running
    assert "console-write" in printed and "tenant acme" in printed
    page.goto(url)
    assert page.url.endswith("/console/")  # signed in, on the overview
    assert "console-write" in page.locator("header .who").inner_text()
    assert serve_console.write not in page.url
    shot(page, "console-cli")
    again = page.context.browser.new_context().new_page()
    try:
        response = again.goto(url)
        assert response is not None and response.status == 401
        assert "already used" in again.get_by_role("alert").inner_text()
    finally:
        again.context.close()
    base = url.split("/console/")[0]
    foreign = httpx.get(f"{base}/console/login", headers={"Host": "evil.example"})
    assert foreign.status_code == 421  # DNS rebinding: only loopback names are answered


def test_a_refused_token_stops_before_serving(tmp_path: Path, serve_console: Console) -> None:
    env = profile_env(tmp_path, f"{serve_console.base}/mcp", "fm_not-a-real-token")
    done = subprocess.run(command("--no-open"), env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "refused the profile's token" in done.stderr and "Sign in" not in done.stdout
