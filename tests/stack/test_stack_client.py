"""The typed Python client (`fleetmem.client`) against the deployed shape (tests/stack/stack.py, what
`scripts/stack` runs): `Client` and `AsyncClient`, over `/v1` (the front's route straight to each
tool's function) and over MCP (the edge function), with tokens minted in the stack's client store.

A fact remembered through the client is recalled through it; a refusal is `FleetmemError` with the
server's envelope; a read token's write is refused and stores nothing; a page of another tenant is
missing, not forbidden; and the four ways give the bodies a plain `/v1` request gets."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

from fleetmem.client import AsyncClient, Client, FleetmemError
from tests.clients.test_python_client import same_call

from .conftest import mint

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]

#: sync and async, over `/v1` and over MCP
WAYS = [(Client, "http"), (Client, "mcp"), (AsyncClient, "http"), (AsyncClient, "mcp")]
IDS = [f"{cls.__name__}-{transport}" for cls, transport in WAYS]


def tenant() -> str:
    return f"client-{uuid.uuid4().hex[:8]}"


def v1(stack: Any, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A plain `POST /v1/<tool>`, as any HTTP caller makes it: the body or the envelope."""
    response = httpx.post(
        f"{stack.base_url}/v1/{tool}", json=arguments, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    return dict(response.json())


def calls(cls: type, transport: str, url: str, steps: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each (tool, arguments) through one client of this kind, in order: its result model, or the
    `FleetmemError` it raised (the token comes from FLEETMEM_TOKEN, as the client always takes it)."""

    async def run_async() -> list[Any]:
        out: list[Any] = []
        async with AsyncClient(url, transport=transport, retry_wait_s=0) as client:
            for tool, arguments in steps:
                try:
                    out.append(await getattr(client, tool)(**arguments))
                except FleetmemError as err:
                    out.append(err)
        return out

    if cls is AsyncClient:
        return asyncio.run(run_async())
    out: list[Any] = []
    with Client(url, transport=transport, retry_wait_s=0) as client:
        for tool, arguments in steps:
            try:
                out.append(getattr(client, tool)(**arguments))
            except FleetmemError as err:
                out.append(err)
    return out


def body(result: Any) -> Any:
    """A result as the JSON it dumps to, or a refusal's envelope."""
    if isinstance(result, FleetmemError):
        return result.envelope
    return result.model_dump(mode="json", by_alias=True, exclude_unset=True)


@pytest.mark.parametrize(("cls", "transport"), WAYS, ids=IDS)
def test_a_fact_remembered_through_the_client_is_recalled_through_it(
    stack: Any, monkeypatch: pytest.MonkeyPatch, cls: type, transport: str
) -> None:
    monkeypatch.setenv("FLEETMEM_TOKEN", mint(stack, ["read", "write"], tenant=tenant()))
    fact = f"The {cls.__name__} {transport} ferry leaves at {uuid.uuid4().hex[:6]}"
    saved, recalled = calls(
        cls,
        transport,
        stack.base_url,
        [
            ("remember", {"fact": fact, "provenance": "test:stack-client", "entity": "projects/ferry"}),
            ("recall", {"entity": "projects/ferry"}),
        ],
    )
    assert not isinstance(saved, FleetmemError), saved.envelope
    assert saved.root.status == "inserted" and saved.root.id
    assert not isinstance(recalled, FleetmemError), recalled.envelope
    assert [(f.fact_id, f.fact) for f in recalled.facts] == [(saved.root.id, fact)]


@pytest.mark.parametrize(("cls", "transport"), WAYS, ids=IDS)
def test_a_refusal_is_the_one_error_with_the_envelope_and_a_foreign_page_is_missing(
    stack: Any, monkeypatch: pytest.MonkeyPatch, cls: type, transport: str
) -> None:
    owner = mint(stack, ["read", "write"], tenant=tenant())
    slug = f"people/owner-{uuid.uuid4().hex[:6]}"
    assert "code" not in v1(stack, owner, "put_page", {"slug": slug, "content": "Kept by its tenant."})
    monkeypatch.setenv("FLEETMEM_TOKEN", mint(stack, ["read", "write"], tenant=tenant()))
    foreign, nobody = calls(
        cls, transport, stack.base_url, [("get_page", {"slug": slug}), ("get_page", {"slug": "people/nobody-here"})]
    )
    for err in (foreign, nobody):
        assert isinstance(err, FleetmemError)
        assert (err.code, err.envelope["code"], err.envelope["error"]) == ("not_found",) * 3
        assert err.message == err.envelope["message"] and err.message
        assert err.fix == err.envelope["fix"] and err.next == err.fix["next"] and err.next
        assert err.correlation_id and err.correlation_id == err.envelope["correlation_id"]
        assert err.status == (404 if transport == "http" else None)
    # a foreign page is answered exactly as a page nobody wrote: nothing tells it exists
    assert foreign.envelope.keys() == nobody.envelope.keys() and foreign.next == nobody.next


@pytest.mark.parametrize(("cls", "transport"), WAYS, ids=IDS)
def test_a_read_tokens_write_is_refused_and_stores_nothing(
    stack: Any, monkeypatch: pytest.MonkeyPatch, cls: type, transport: str
) -> None:
    name = tenant()
    writer = mint(stack, ["read", "write"], tenant=name)
    monkeypatch.setenv("FLEETMEM_TOKEN", mint(stack, ["read"], tenant=name))
    fact = f"A read-only write {cls.__name__} {transport} {uuid.uuid4().hex[:6]}"
    (err,) = calls(cls, transport, stack.base_url, [("remember", {"fact": fact, "provenance": "test:stack-client"})])
    assert isinstance(err, FleetmemError)
    assert err.code == "scope_denied" and err.correlation_id and err.next
    assert err.envelope["fix"] == err.fix and err.envelope["message"] == err.message
    listed = v1(stack, writer, "list_facts", {"provenance": "test:stack-client", "state": "any", "limit": 200})
    assert "facts" in listed, listed
    assert fact not in {f["fact"] for f in listed["facts"]}


def test_sync_and_async_over_v1_and_mcp_give_the_v1_bodies(stack: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    token = mint(stack, ["read", "write"], tenant=tenant())
    monkeypatch.setenv("FLEETMEM_TOKEN", token)
    seeded = v1(
        stack,
        token,
        "remember",
        {"fact": "Erin runs the night shift", "provenance": "test:stack-client", "entity": "people/erin-example"},
    )
    assert "code" not in seeded, seeded
    assert "code" not in v1(stack, token, "put_page", {"slug": "people/erin-example", "content": "Erin, nights."})
    rid = str(uuid.uuid4())
    steps: list[tuple[str, dict[str, Any]]] = [
        ("recall", {"entity": "people/erin-example"}),
        ("get_page", {"slug": "people/erin-example"}),
        ("list_facts", {"entity": "people/erin-example", "state": "any"}),
        ("entity", {"name": "people/erin-example"}),
        ("whoami", {}),
        ("get_page", {"slug": "people/nobody-here"}),
        # one request id: each way after the plain request gets the first write's answer (D22)
        ("remember", {"fact": "Erin hands over at six", "provenance": "test:stack-client", "request_id": rid}),
    ]
    expected = [same_call(v1(stack, token, tool, arguments)) for tool, arguments in steps]
    for cls, transport in WAYS:
        got = [same_call(body(r)) for r in calls(cls, transport, stack.base_url, steps)]
        for (tool, _), want, have in zip(steps, expected, got, strict=True):
            assert have == want, f"{tool} through {cls.__name__} over {transport}"
