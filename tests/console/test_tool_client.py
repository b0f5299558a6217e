"""The console's tool client over the typed client: a refusal is `ToolFailed` with the server's
code, message and envelope and a next step written for a person; a server that gave no usable
answer is said in the console's own words. In-process into the app `fleetmem serve` runs, and
remotely against 127.0.0.1 (a closed port, and a real HTTP server answering a proxy's HTML page)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from fleetmem.web.client import NEXT_STEPS, ToolClient, ToolFailed
from tests.clients.apps import proxy_page, served_app
from tests.conformance.test_conformance_local import free_port


@pytest.fixture
def app_and_tokens(tmp_path: Path) -> Iterator[tuple[Any, dict[str, str]]]:
    with served_app(tmp_path / "data") as app:
        yield app


def run_async(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """`asyncio.run` on a thread of its own: the console package's browser (Playwright's sync API)
    keeps an event loop running on the test thread while the package's tests run."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def failure(client: ToolClient, token: str, tool: str, arguments: dict[str, Any]) -> ToolFailed:
    async def run() -> ToolFailed:
        try:
            with pytest.raises(ToolFailed) as caught:
                await client.call(token, tool, arguments)
            return caught.value
        finally:
            await client.aclose()

    return run_async(run())


def test_a_refusal_in_process_is_the_servers_code_and_message_with_a_next_step_for_a_person(
    app_and_tokens: tuple[Any, dict[str, str]],
) -> None:
    app, tokens = app_and_tokens
    refused = failure(ToolClient.in_process(app), tokens["reader"], "remember", {"fact": "x", "provenance": "y"})
    assert (refused.code, refused.status) == ("scope_denied", 403)
    assert refused.envelope and refused.message == refused.envelope["message"]
    assert refused.suggestion == NEXT_STEPS["scope_denied"] != refused.envelope.get("suggestion")

    async def answered() -> dict[str, Any]:
        client = ToolClient.in_process(app)
        try:
            return await client.call(tokens["writer"], "whoami")
        finally:
            await client.aclose()

    assert run_async(answered())["client_id"] == "writer"


def test_a_server_that_does_not_answer_is_said_in_the_consoles_words() -> None:
    base = f"http://127.0.0.1:{free_port()}"
    down = failure(ToolClient.remote(base), "fm_probe", "whoami", {})
    assert down == ToolFailed(
        "unavailable",
        f"The memory server at {base} did not answer (ConnectError).",
        "Check that the server is running and reachable, then reload the page.",
    )


def test_an_answer_that_is_not_json_is_said_with_its_status() -> None:
    with proxy_page() as url:
        page = failure(ToolClient.remote(url), "fm_probe", "whoami", {})
    assert page == ToolFailed(
        "unavailable",
        "The memory server answered HTTP 502 without a JSON body.",
        "Reload the page; if it persists, check the server's log.",
        status=502,
    )
