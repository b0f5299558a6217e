"""`AsyncClient.for_caller`: a server calling memory for each person signed in to it (the memory
console), each with their own token over one shared HTTP client, here into a real app in-process
through `httpx2.ASGITransport`; and what `FleetmemError` says when no usable answer came.

The app is the one `fleetmem serve` runs (`build_local_app` over a temporary data directory); the
answer that is not JSON comes from a real HTTP server on 127.0.0.1 standing in for a proxy page
(tests/clients/apps.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from fleetmem.client import AsyncClient, Client, FleetmemError
from fleetmem.client.errors import NOT_JSON
from tests.clients.apps import proxy_page, served_app
from tests.conformance.test_conformance_local import free_port

IN_PROCESS = "http://127.0.0.1:1"


@pytest.fixture
def app_and_tokens(tmp_path: Path) -> Iterator[tuple[Any, dict[str, str]]]:
    with served_app(tmp_path / "data") as app:
        yield app


def test_each_caller_calls_with_their_own_token_over_one_shared_in_process_client(
    app_and_tokens: tuple[Any, dict[str, str]],
) -> None:
    app, tokens = app_and_tokens

    async def scenario() -> dict[str, Any]:
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app, client=("127.0.0.1", 0)))
        out: dict[str, Any] = {}
        try:
            callers = {name: AsyncClient.for_caller(IN_PROCESS, token, http=http) for name, token in tokens.items()}
            for name, client in callers.items():
                who = await client.whoami()
                out[name] = (who.tenant, who.client_id, who.scopes)
            await callers["writer"].put_page(slug="people/kept-by-acme", content="Acme's page.")
            for name in ("reader", "other"):
                try:
                    out[f"{name}-reads"] = (await callers[name].get_page(slug="people/kept-by-acme")).slug
                except FleetmemError as err:
                    out[f"{name}-reads"] = (err.code, err.status)
            try:
                await callers["reader"].remember(fact="A reader's write", provenance="test:for-caller")
            except FleetmemError as err:
                out["reader-writes"] = (err.code, err.status, bool(err.correlation_id))
            for client in callers.values():
                await client.aclose()
            out["shared-open"] = not http.is_closed  # the server's client outlives each caller's
        finally:
            await http.aclose()
        return out

    out = asyncio.run(scenario())
    assert out["writer"] == ("acme", "writer", ["read", "write"])
    assert out["reader"] == ("acme", "reader", ["read"])
    assert out["other"] == ("globex", "other", ["read", "write"])
    assert out["reader-reads"] == "people/kept-by-acme"
    assert out["other-reads"] == ("not_found", 404)  # another tenant's page is a missing one
    assert out["reader-writes"] == ("scope_denied", 403, True)
    assert out["shared-open"] is True


def test_an_answer_that_is_not_json_keeps_its_status_and_says_no_envelope_came(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLEETMEM_TOKEN", "fm_probe")
    with proxy_page() as url, Client(url, retry_wait_s=0) as client, pytest.raises(FleetmemError) as caught:
        client.whoami()
    err = caught.value
    assert (err.code, err.status, err.unanswered) == ("unavailable", 502, NOT_JSON)
    assert "HTTP 502 without a JSON body" in err.message and err.correlation_id


def test_a_server_that_never_answered_is_named_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETMEM_TOKEN", "fm_probe")
    with Client(f"http://127.0.0.1:{free_port()}", retry_wait_s=0) as client, pytest.raises(FleetmemError) as caught:
        client.whoami()
    err = caught.value
    assert (err.code, err.status, err.unanswered) == ("unavailable", None, "ConnectError")


def test_a_refusal_from_the_server_is_not_marked_unanswered(
    app_and_tokens: tuple[Any, dict[str, str]],
) -> None:
    app, tokens = app_and_tokens

    async def refused() -> FleetmemError:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app, client=("127.0.0.1", 0))) as http:
            with pytest.raises(FleetmemError) as caught:
                await AsyncClient.for_caller(IN_PROCESS, tokens["writer"], http=http).get_page(slug="people/nobody")
            return caught.value

    err = asyncio.run(refused())
    assert (err.code, err.status, err.unanswered) == ("not_found", 404, None)
