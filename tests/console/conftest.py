"""Browser fixtures for the console: Debian's Chromium driven by Playwright (sync API), and a real
`fleetmem serve` over a temporary data directory with tokens minted by `fleetmem token create`.

Playwright never downloads a browser here: it launches `/usr/bin/chromium` (`scripts/test` installs
Debian's `chromium` and `chromium-driver` when it is missing). Without it these tests skip, and fail
under CI=true. Screenshots go to `test-artifacts/console/<name>.png` at the repository root.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.test_conformance_local import mint
from tests.mcp.served import Served, server_env

#: Debian's browser (FLEETMEM_CHROMIUM overrides it, as in scripts/lib/bootstrap.sh).
CHROMIUM = os.environ.get("FLEETMEM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every console test shares the session's server and browser: xdist keeps them on one worker."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.xdist_group("console"))


def _missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (CI=true: the console browser tests must run)")
    pytest.skip(what)


# Package scope: one browser for every console test (they run one after another on one worker, the
# xdist group above); launching Chromium and Playwright's driver per module cost seconds of CPU each.
# Not the session: Playwright's sync API keeps an event loop running in this thread while it is
# open, and the tests a worker runs after the console's call asyncio.run in the same thread (so do
# the console tests that call it: they run it on a thread of their own).
@pytest.fixture(scope="package")
def playwright() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (scripts/test installs the dev extra)")
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="package")
def browser(playwright: Any) -> Iterator[Any]:
    if not os.access(CHROMIUM, os.X_OK):
        _missing(f"{CHROMIUM} is missing (scripts/test installs Debian's chromium with apt-get)")
    b = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh context (no cookies, no storage) per test."""
    context = browser.new_context()
    try:
        yield context.new_page()
    finally:
        context.close()


def follow(page: Any, target: Any) -> None:
    """Click a link or a form's button and return once the page it leads to has loaded.

    Every control in the console is a link or a form post, so a click is a navigation; reading the
    page before the new one has loaded would read the old one.
    """
    with page.expect_navigation(wait_until="load"):
        target.click()


def shot(page: Any, name: str) -> Path:
    """Save a full-page PNG screenshot as test-artifacts/console/<name>.png."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@dataclass(frozen=True)
class Console:
    """A running `fleetmem serve` and the tokens minted for it."""

    base: str
    read: str
    write: str
    admin: str
    other_admin: str
    server: Served

    @property
    def cookie(self) -> str:
        """The session cookie's name: it carries the console's port."""
        return f"fleetmem_console_{self.base.rsplit(':', 1)[1]}"


@pytest.fixture(scope="session")
def serve_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """`fleetmem serve --surface full` on 127.0.0.1 (a free port, a temporary data directory);
    tokens for tenant "acme" (read; read,write; read,write,admin) and tenant "other" (admin)."""
    tmp = tmp_path_factory.mktemp("console-serve")
    # every test signs in from 127.0.0.1: the sign-in rate limit has its own test and server
    env = server_env(FLEETMEM_MODEL_DIR=str(tmp / "no-model"), FLEETMEM_CONSOLE_SIGN_INS_PER_MINUTE="100000")
    data = tmp / "data"
    server = Served(tmp, env, args=("--surface", "full"))
    server.token = mint(env, data, "read,write,admin", "console-admin", tenant="acme")
    tokens = {
        "read": mint(env, data, "read", "console-read", tenant="acme"),
        "write": mint(env, data, "read,write", "console-write", tenant="acme"),
        "other_admin": mint(env, data, "read,write,admin", "console-other", tenant="other"),
    }
    server.start()
    try:
        yield Console(base=server.url, admin=server.token, server=server, **tokens)
    finally:
        server.stop()
