"""The typed Python client (`fleetmem.client`) against a real `fleetmem serve` on 127.0.0.1 (a free
port): its methods are the registry's tools; sync and async, over `/v1` and over MCP, give the
bodies a plain `/v1` request gets; refusals raise `FleetmemError` with the envelope; a read token
cannot write; a private fact stays private; the delta follower drains with the cursor.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx2
import pytest

from fleetmem.client import AsyncClient, Client, FleetmemError
from fleetmem.client import generate as generated
from fleetmem.contract.tools import tool_schema
from fleetmem.memory.verbs import REGISTRY
from tests.clients.served import base, server, token_env, v1  # noqa: F401 (fixtures)
from tests.conformance.test_conformance_local import Server

#: What a client may not load at import: the server stack (transports, composition root, stores,
#: the domain) and the heavy libraries beneath it.
SERVER_STACK = (
    "fleetmem.transport",
    "fleetmem.wiring",
    "fleetmem.adapters",
    "fleetmem.memory",
    "fleetmem.cli",
    "mcp",
    "starlette",
    "uvicorn",
    "numpy",
    "onnxruntime",
    "boto3",
)


# --------------------------------------------------------------------------- the methods are the registry


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_every_registered_tool_has_its_method_with_the_same_parameters(cls: type) -> None:
    for name, spec in REGISTRY.items():
        method = getattr(cls, name, None)
        assert method is not None, f"{cls.__name__} has no method for the tool {name}"
        params = list(inspect.signature(method).parameters.values())[1:]
        assert all(p.kind is p.KEYWORD_ONLY for p in params), name
        assert {p.name for p in params} == set(tool_schema(spec)["properties"]), name
        required = {p.name for p in params if p.default is inspect.Parameter.empty}
        assert required == set(tool_schema(spec).get("required") or []), name
        assert inspect.signature(method).return_annotation == generated.original_result(spec).__name__
        assert inspect.iscoroutinefunction(method) is (cls is AsyncClient)


def test_the_checked_in_methods_are_what_the_registry_generates_today() -> None:
    assert generated.TARGET.read_text(encoding="utf-8") == generated.generate(REGISTRY), (
        "shared/fleetmem/client/methods.py differs from the registry: run python -m fleetmem.client.generate"
    )


def test_importing_and_building_a_client_loads_no_server_stack() -> None:
    probe = (
        "import sys, fleetmem.client\n"
        "fleetmem.client.Client('http://127.0.0.1:9/mcp')\n"
        "fleetmem.client.AsyncClient('http://127.0.0.1:9')\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "FLEETMEM_TOKEN": "fm_probe"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = out.stdout.split()
    assert "fleetmem.client" in loaded and "httpx2" in loaded
    heavy = [m for m in loaded if any(m == s or m.startswith(s + ".") for s in SERVER_STACK)]
    assert heavy == []


# --------------------------------------------------------------------------- the same bodies everywhere

#: The four ways the client calls: sync and async, over `/v1` and over MCP.
WAYS = [(Client, "http"), (Client, "mcp"), (AsyncClient, "http"), (AsyncClient, "mcp")]


def through(cls: type, transport: str, server: Server, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's result (as the JSON it dumps to) or the refusal's envelope, through the client."""

    async def run_async() -> Any:
        async with AsyncClient(base(server), transport=transport, retry_wait_s=0) as client:
            return await getattr(client, tool)(**arguments)

    try:
        if cls is AsyncClient:
            result = asyncio.run(run_async())
        else:
            with Client(base(server), transport=transport, retry_wait_s=0) as client:
                result = getattr(client, tool)(**arguments)
    except FleetmemError as err:
        return err.envelope
    return result.model_dump(mode="json", by_alias=True, exclude_unset=True)


def seeded(server: Server) -> dict[str, Any]:
    """A page, a fact, a committed write and a token to call every tool on."""
    page = v1(server, "put_page", {"slug": "people/alice-example", "content": "Alice runs payments at Acme."})
    fact = v1(
        server,
        "remember",
        {"fact": "Alice prefers email", "provenance": "test:py-client", "entity": "people/alice-example"},
    )
    doomed = v1(server, "put_page", {"slug": "topics/to-delete", "content": "Deleted by the probe."})
    assert "code" not in page and "code" not in fact and "code" not in doomed, (page, fact, doomed)
    return {"fact_id": fact["id"], "request_id": fact["request_id"]}


def arguments_for(tool: str, seed: dict[str, Any], server: Server) -> dict[str, Any]:
    """Arguments every way calls a tool with; a write carries one request id, so each way after the
    first gets the first write's answer back (D22) and the bodies compare."""
    rid = str(uuid.uuid4())
    if tool == "import_pack":  # a pack of this memory, checked and not written (dry run)
        return {"pack": v1(server, "export_pack", {"entity": "people/alice-example"})["pack"], "dry_run": True}
    table: dict[str, dict[str, Any]] = {
        "export_pack": {"entity": "people/alice-example"},
        "recall": {"entity": "people/alice-example"},
        "context_pack": {"entities": "people/alice-example", "budget_tokens": 2000},
        "create_token": {"client": "py-client-probe", "scopes": ["read"]},
        "get_page": {"slug": "people/alice-example"},
        "put_page": {"slug": "topics/client-probe", "content": "A probe page.", "request_id": rid},
        "delete_page": {"slug": "topics/to-delete", "request_id": rid},
        "delta": {"since": "2000-01-01T00:00:00Z", "budget_tokens": 4000},
        "entity": {"name": "people/alice-example"},
        "forget": {"id": seed["fact_id"], "reason": "probe", "request_id": rid},
        "list_facts": {"entity": "people/alice-example", "state": "any"},
        "list_activity": {"entity": "people/alice-example", "action": "write"},
        "list_followers": {"limit": 10},
        "list_pages": {"limit": 10},
        "list_tokens": {},
        "memory_stats": {},
        "purge_fact": {"id": seed["fact_id"], "dry_run": True},
        "remember": {"fact": "Bob owns billing", "provenance": "test:py-client", "request_id": rid},
        "revoke_token": {"token_id": "tok_nothing_here"},
        "synthesize": {"question": "Who runs payments?"},
        "trace_fact": {"id": seed["fact_id"]},
        "whoami": {},
        "get_write_request": {"request_id": seed["request_id"]},
        "list_write_requests": {"limit": 5},
        "cancel_write_request": {"request_id": seed["request_id"]},
    }
    return table[tool]


#: Parts of a body that differ between two calls that are otherwise the same call: the call's own
#: correlation id and timing, the marker of a replayed write (D22), and a minted token's identity.
#: a bound on a follower's answers in these tests (each drains in a handful)
MAX_ANSWERS = 50
PER_CALL = {"correlation_id", "latency_ms", "idempotent_replay"}
MINTED = {"token", "token_id", "created_at"}
#: a pack carries the time it was exported, so two exports of the same memory differ in their bytes
EXPORTED = {"pack", "bytes"}


def same_call(body: Any, tool: str = "") -> Any:
    if isinstance(body, dict):
        drop = PER_CALL | (MINTED if tool == "create_token" else set()) | (EXPORTED if tool == "export_pack" else set())
        return {k: same_call(v) for k, v in body.items() if k not in drop}
    if isinstance(body, list):
        return [same_call(v) for v in body]
    return body


def test_sync_and_async_over_v1_and_mcp_give_the_v1_body_for_every_tool(token_env: Server) -> None:
    server = token_env
    seed = seeded(server)
    for tool in REGISTRY:
        arguments = arguments_for(tool, seed, server)
        expected = same_call(v1(server, tool, arguments), tool)
        for cls, transport in WAYS:
            got = same_call(through(cls, transport, server, tool, arguments), tool)
            assert got == expected, f"{tool} through {cls.__name__} over {transport}"


# --------------------------------------------------------------------------- refusals


def refusal(cls: type, transport: str, server: Server, tool: str, arguments: dict[str, Any]) -> FleetmemError:
    async def run_async() -> Any:
        async with AsyncClient(base(server), transport=transport, retry_wait_s=0) as client:
            return await getattr(client, tool)(**arguments)

    with pytest.raises(FleetmemError) as caught:
        if cls is AsyncClient:
            asyncio.run(run_async())
        else:
            with Client(server.url, transport=transport, retry_wait_s=0) as client:
                getattr(client, tool)(**arguments)
    return caught.value


@pytest.mark.parametrize(("cls", "transport"), WAYS)
def test_a_refusal_raises_the_one_error_with_the_envelope(token_env: Server, cls: type, transport: str) -> None:
    err = refusal(cls, transport, token_env, "get_page", {"slug": "people/nobody-here"})
    assert (err.code, err.envelope["code"], err.envelope["error"]) == ("not_found",) * 3
    assert err.message == err.envelope["message"] and err.message
    assert err.fix == err.envelope["fix"] and err.next == err.fix["next"] and err.next
    assert err.correlation_id and err.correlation_id == err.envelope["correlation_id"]
    assert err.status == (404 if transport == "http" else None)


@pytest.mark.parametrize(("cls", "transport"), WAYS)
def test_a_read_tokens_write_is_refused_with_the_envelope(
    monkeypatch: pytest.MonkeyPatch, server: Server, cls: type, transport: str
) -> None:
    monkeypatch.setenv("FLEETMEM_TOKEN", server.read_token)
    fact = f"Read-only write {cls.__name__} {transport}"
    err = refusal(cls, transport, server, "remember", {"fact": fact, "provenance": "test:py-client"})
    assert err.code == "scope_denied" and err.correlation_id and err.next
    assert err.envelope["fix"] == err.fix and err.envelope["message"] == err.message
    listed = v1(server, "list_facts", {"provenance": "test:py-client", "state": "any", "limit": 200})
    assert fact not in {f["fact"] for f in listed["facts"]}


@pytest.mark.parametrize("transport", ["http", "mcp"])
def test_a_private_fact_is_not_visible_remotely(token_env: Server, transport: str) -> None:
    marker = f"private-{transport}-{uuid.uuid4().hex[:8]}"
    with Client(base(token_env), transport=transport) as client:
        saved = client.remember(
            fact=f"The {marker} code is kept here",
            provenance="test:py-client",
            entity="people/alice-example",
            visibility="private",
        )
        assert saved.root.id
        seen = client.list_facts(entity="people/alice-example", state="any", limit=200)
        recalled = client.recall(query=marker, include_private=True)
    assert marker not in json.dumps(seen.model_dump()) + json.dumps(recalled.model_dump())
    local = Client(data_dir=token_env.data_dir).list_facts(entity="people/alice-example", state="any", limit=200)
    assert any(marker in f.fact for f in local.facts), "the private fact was stored (the trusted local caller sees it)"


# --------------------------------------------------------------------------- delta, retries, the local mode


def save_facts(server: Server, tag: str, count: int) -> set[str]:
    facts = {f"{tag} fact number {i}" for i in range(count)}
    for fact in sorted(facts):
        body = v1(server, "remember", {"fact": fact, "provenance": "test:py-client-delta", "entity": f"topics/{tag}"})
        assert "code" not in body, body
    return facts


def test_the_delta_follower_drains_with_the_cursor_and_stores_it(token_env: Server, tmp_path: Path) -> None:
    start = v1(token_env, "delta", {"since": "2000-01-01T00:00:00Z", "budget_tokens": 100000})
    while start["has_more"]:
        start = v1(token_env, "delta", {"cursor": start["next_cursor"]["cursor"], "budget_tokens": 100000})
    tag = f"drain{uuid.uuid4().hex[:6]}"
    saved = save_facts(token_env, tag, 60)  # more than one answer holds (50 per arm)
    stored = tmp_path / "delta.cursor"
    with Client(base(token_env)) as client:
        answers = list(  # bounded: a follower that stopped advancing fails here instead of looping
            itertools.islice(
                client.follow_delta(cursor=start["next_cursor"]["cursor"], cursor_file=stored, budget_tokens=100000),
                MAX_ANSWERS,
            )
        )
        delivered = [f.fact for a in answers for f in a.facts]
        assert len(answers) >= 2 and not answers[-1].has_more and all(a.has_more for a in answers[:-1])
        assert sorted(delivered) == sorted(saved)
        assert stored.read_text().strip() == answers[-1].next_cursor.cursor
        later = save_facts(token_env, tag + "b", 2)
        resumed = list(
            itertools.islice(client.follow_delta(cursor_file=stored), MAX_ANSWERS)
        )  # the stored cursor alone
    assert sorted(f.fact for a in resumed for f in a.facts) == sorted(later)


def test_the_async_delta_follower_drains_too(token_env: Server) -> None:
    tag = f"adrain{uuid.uuid4().hex[:6]}"
    saved = save_facts(token_env, tag, 55)

    async def drain() -> list[Any]:
        async with AsyncClient(base(token_env), transport="mcp") as client:
            got = []
            async for a in client.follow_delta(since="2000-01-01T00:00:00Z", budget_tokens=100000):
                got.append(a)
                if len(got) >= MAX_ANSWERS:  # bounded: a follower that stopped advancing fails, not loops
                    break
            return got

    answers = asyncio.run(drain())
    delivered = [f.fact for a in answers for f in a.facts if f.fact.startswith(tag)]
    assert sorted(delivered) == sorted(saved) and not answers[-1].has_more and len(answers) >= 2


class Throttled(httpx2.BaseTransport):
    """The real connection to the server, with its first answer replaced by a throttle's `wait`
    envelope (built by the server's own `retry_later` and `http_envelope`). A throttle cannot be
    produced on demand on the local server, so this one answer is injected; every request is kept."""

    def __init__(self, wait_s: int) -> None:
        self.inner = httpx2.HTTPTransport()
        self.sent: list[bytes] = []
        self.wait_s = wait_s

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        from fleetmem.contract.envelope import http_envelope
        from fleetmem.errors import retry_later

        self.sent.append(request.read())
        if len(self.sent) > 1:
            return self.inner.handle_request(request)
        err = retry_later(
            "Throttled.", wait_s=self.wait_s, why="a probe", fix_why="Wait.", reason="throttled", mcp=None
        )
        body = http_envelope(err, correlation_id="c_probe").body()
        return httpx2.Response(503, json=body)


def throttled_client(server: Server, retry_wait_s: float) -> tuple[Client, Throttled]:
    client = Client(base(server), retry_wait_s=retry_wait_s)
    wire = Throttled(wait_s=1)
    client.transport.http = httpx2.Client(
        base_url=base(server), headers={"Authorization": f"Bearer {server.token}"}, transport=wire
    )
    return client, wire


def test_a_wait_is_retried_as_the_same_request_within_the_bound(token_env: Server) -> None:
    client, wire = throttled_client(token_env, retry_wait_s=10)
    with client:
        saved = client.remember(fact="Carol leads the platform team", provenance="test:py-client-retry")
    assert len(wire.sent) == 2 and wire.sent[0] == wire.sent[1], "the retry is the same request"
    sent = json.loads(wire.sent[0])
    assert sent["request_id"] == saved.root.request_id, "the write's identity travelled with both requests"


def test_a_wait_past_the_bound_raises_it(token_env: Server) -> None:
    client, wire = throttled_client(token_env, retry_wait_s=0)
    with client, pytest.raises(FleetmemError) as caught:
        client.whoami()
    assert caught.value.next == "wait" and caught.value.retry_after_seconds == 1 and len(wire.sent) == 1


def test_the_local_mode_calls_a_data_directory_in_process(tmp_path: Path) -> None:
    """A new directory starts a memory; the trusted local caller sees its own private facts."""
    with Client(data_dir=tmp_path / "memory") as client:
        client.remember(fact="Dana keeps the keys", provenance="test:local", entity="people/dana", visibility="private")
        assert client.whoami().remote is False
        facts = client.recall(entity="people/dana", include_private=True).facts
        assert [f.fact for f in facts] == ["Dana keeps the keys"]
        with pytest.raises(FleetmemError) as caught:
            client.get_page(slug="people/nobody")
    assert caught.value.code == "not_found" and caught.value.correlation_id


def test_a_profile_names_the_endpoint_and_its_token_file(
    monkeypatch: pytest.MonkeyPatch, server: Server, tmp_path: Path
) -> None:
    from fleetmem.profiles import Profile, save_profiles

    token_file = tmp_path / "token"
    token_file.write_text(server.read_token)
    token_file.chmod(0o600)
    monkeypatch.setenv("FLEETMEM_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("FLEETMEM_TOKEN", raising=False)
    save_profiles({"probe": Profile("probe", server.url, str(token_file))})
    with Client(profile="probe") as client:
        assert client.whoami().scopes == ["read"]
    assert "token" not in inspect.signature(Client).parameters
    with pytest.raises(FleetmemError) as caught:
        Client(profile="nobody-saved-this")
    assert caught.value.code == "invalid_params" and caught.value.fix["next"]


def test_a_follower_whose_cursor_does_not_advance_stops_with_the_envelope(tmp_path: Path) -> None:
    """A delta answer with more to read but the cursor it was given would make a follower ask for
    the same page forever: it raises instead, and the stored cursor is the last good one."""
    from types import SimpleNamespace

    from fleetmem.client.core import _Cursor

    stored = tmp_path / "delta.cursor"
    kept = _Cursor("c1", stored, {})
    kept.advance(SimpleNamespace(next_cursor=SimpleNamespace(cursor="c2"), has_more=True))  # type: ignore[arg-type]
    assert stored.read_text().strip() == "c2" and not kept.done
    with pytest.raises(FleetmemError) as stalled:
        kept.advance(SimpleNamespace(next_cursor=SimpleNamespace(cursor="c2"), has_more=True))  # type: ignore[arg-type]
    assert stalled.value.code == "internal_error" and stalled.value.fix
    assert stored.read_text().strip() == "c2" and not list(tmp_path.glob("*.part"))


# --------------------------------------------------------------------------- the README's example


def test_the_readme_example_runs_against_a_served_memory(server: Server) -> None:
    """The Python block under the README's "From code" runs as written, against this server's
    address instead of `scripts/serve`'s default one, with the token in FLEETMEM_TOKEN."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("**From code**", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert "http://127.0.0.1:8765" in block
    code = block.replace("http://127.0.0.1:8765", base(server))
    env = {**os.environ, "FLEETMEM_TOKEN": server.token}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "Alice runs payments at Acme" in lines
    assert lines[-1].startswith("not_found ")
