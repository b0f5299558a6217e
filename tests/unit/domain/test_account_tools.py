"""The account tools — whoami, list_followers, list_tokens, create_token, revoke_token — through
dispatch on both backends: SQLite (in memory) and the DynamoDB stores on DynamoDB Local (no search
index: these tools read none). Each test uses fresh tenants, so the shared tables never mix."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.memory.verbs import list_followers
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.timefmt import to_ms
from fleetmem.tokens import ApiTokenAuth, create_client
from fleetmem.transport.dispatch import dispatch

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("dynamodb-local", id="dynamodb-local", marks=pytest.mark.dynamodb_local),
]
_PREFIXES: dict[str, str] = {}
ALL = frozenset({"read", "write", "admin"})


@pytest.fixture
def clock() -> FixedClock:
    """Fixed, but at the real time: DynamoDB Local expires cursors by their TTL on the wall clock."""
    return FixedClock(to_ms(datetime.now(UTC)))


@pytest.fixture(params=BACKENDS)
def bdeps(request: pytest.FixtureRequest, clock: FixedClock) -> Iterator[Deps]:
    if request.param == "sqlite":
        stores = open_local(":memory:")
        try:
            yield Deps.over(stores, clock=clock, ids=SortableIds(), llm=None, embedder=None)
        finally:
            stores.close()
        return
    from tests.aws import engines

    endpoint = engines.dynamodb_local_endpoint(request.config)
    aws = engines.open_stores(endpoint, _PREFIXES.setdefault(endpoint, engines.fresh_prefix()))
    yield Deps.over(aws, clock=clock, ids=SortableIds(), llm=None, embedder=None)


@pytest.fixture
def tenant() -> str:
    return "t-" + uuid.uuid4().hex[:12]


@pytest.fixture
def other() -> str:
    return "u-" + uuid.uuid4().hex[:12]


def caller(tenant: str, *scopes: str, client: str = "console", remote: bool = True) -> Caller:
    return Caller(tenant=tenant, client_id=client, scopes=frozenset(scopes), remote=remote)


def ok(deps: Deps, who: Caller, tool: str, **args: Any) -> dict:
    r = dispatch(tool, args, who, deps)
    assert not r.is_error, r.body
    return r.body


def err(deps: Deps, who: Caller, tool: str, **args: Any) -> dict:
    r = dispatch(tool, args, who, deps)
    assert r.is_error, r.body
    return r.body


def test_whoami_names_the_credential_and_the_surface(bdeps, tenant):
    body = ok(bdeps, caller(tenant, "write", "read", client="agent-a"), "whoami")
    assert body == {
        "tenant": tenant,
        "client_id": "agent-a",
        "scopes": ["read", "write"],
        "remote": True,
        "surface": "full",
        "protocol_version": 1,
    }
    hidden = dispatch("whoami", {}, caller(tenant, "read"), bdeps, surface="verbs")
    assert hidden.is_error and hidden.body["code"] == "unknown_tool"


def test_a_read_or_write_token_cannot_list_create_or_revoke_tokens(bdeps, tenant):
    for scopes in (("read",), ("read", "write")):
        who = caller(tenant, *scopes)
        for tool, args in (
            ("list_tokens", {}),
            ("create_token", {"client": "x", "scopes": ["read"]}),
            ("revoke_token", {"token_id": "tok_0000000000"}),
        ):
            assert err(bdeps, who, tool, **args)["code"] == "scope_denied", (scopes, tool)
    assert bdeps.clients.list(tenant) == []


def test_list_tokens_shows_this_tenants_tokens_only_and_never_a_secret(bdeps, clock, tenant, other):
    token_a, rec_a = create_client(bdeps.clients, clock, tenant=tenant, client_id="agent-a", scopes=["read"])
    _, rec_b = create_client(bdeps.clients, clock, tenant=tenant, client_id="agent-b", scopes=["read", "write"])
    _, foreign = create_client(bdeps.clients, clock, tenant=other, client_id="agent-a", scopes=["read"])
    body = ok(bdeps, caller(tenant, *ALL), "list_tokens")
    rows = {r["token_id"]: r for r in body["tokens"]}
    assert set(rows) == {rec_a.token_id, rec_b.token_id}
    assert rows[rec_b.token_id]["scopes"] == ["read", "write"]
    assert rows[rec_a.token_id]["client_id"] == "agent-a" and rows[rec_a.token_id]["revoked_at"] is None
    text = str(body)
    assert token_a not in text and rec_a.token_hash not in text and foreign.token_id not in text


def test_a_minted_token_authenticates_and_a_revoked_one_stops(bdeps, clock, tenant):
    admin = caller(tenant, *ALL)
    made = ok(bdeps, admin, "create_token", client="new-agent", scopes=["write", "read"])
    assert made["client_id"] == "new-agent" and made["scopes"] == ["read", "write"]
    auth = ApiTokenAuth(bdeps.clients, clock)
    who = auth.verify(made["token"])
    assert who == Caller(tenant=tenant, client_id="new-agent", scopes=frozenset({"read", "write"}), remote=True)
    listed = ok(bdeps, admin, "list_tokens")["tokens"]
    assert [r["token_id"] for r in listed] == [made["token_id"]]

    clock.advance(seconds=1)
    assert ok(bdeps, admin, "revoke_token", token_id=made["token_id"]) == {
        "token_id": made["token_id"],
        "revoked": True,
        "protocol_version": 1,
    }
    assert auth.verify(made["token"]) is None
    assert ok(bdeps, admin, "revoke_token", token_id=made["token_id"])["revoked"] is False
    assert ok(bdeps, admin, "list_tokens")["tokens"][0]["revoked_at"] is not None


def test_create_token_refuses_scopes_the_caller_does_not_hold(bdeps, tenant):
    who = caller(tenant, "read", "admin")
    body = err(bdeps, who, "create_token", client="sneaky", scopes=["read", "write"])
    assert body["code"] == "scope_denied"
    assert body["fix"]["mcp"] == {"tool": "create_token", "arguments": {"client": "sneaky", "scopes": ["read"]}}
    assert bdeps.clients.list(tenant) == []
    assert ok(bdeps, who, "create_token", client="fine", scopes=["read"])["scopes"] == ["read"]


def test_create_token_checks_the_client_name_like_the_cli(bdeps, tenant):
    admin = caller(tenant, *ALL)
    for bad in ("Bad Name", "a#b", " ", "-lead"):
        assert err(bdeps, admin, "create_token", client=bad, scopes=["read"])["code"] == "invalid_params", bad
    assert err(bdeps, admin, "create_token", client="ok", scopes=[])["code"] == "invalid_params"
    assert err(bdeps, admin, "create_token", client="ok", scopes=["root"])["code"] == "invalid_params"
    assert bdeps.clients.list(tenant) == []
    assert ok(bdeps, admin, "create_token", client="  padded  ", scopes=["read"])["client_id"] == "padded"


def test_create_token_for_a_tenant_being_deleted_is_unauthorized_and_mints_nothing(bdeps, clock, tenant, other):
    """`fleetmem tenant delete` leaves a tombstone before it revokes: a credential an API cache
    still lets in cannot mint a fresh one for the tenant; another tenant is not affected."""
    from fleetmem.tokens import mark_tenant_deleted

    mark_tenant_deleted(bdeps.clients, clock, tenant)
    body = err(bdeps, caller(tenant, *ALL), "create_token", client="escape", scopes=["read"])
    assert body["code"] == "unauthorized"
    assert bdeps.clients.list(tenant) == []
    assert ok(bdeps, caller(other, *ALL), "create_token", client="fine", scopes=["read"])["scopes"] == ["read"]


def test_another_tenants_token_id_is_not_found_like_a_missing_one(bdeps, clock, tenant, other):
    token, foreign = create_client(bdeps.clients, clock, tenant=other, client_id="agent-x", scopes=["read"])
    admin = caller(tenant, *ALL)
    theirs = err(bdeps, admin, "revoke_token", token_id=foreign.token_id)
    missing = err(bdeps, admin, "revoke_token", token_id="tok_ffffffffff")
    assert theirs["code"] == missing["code"] == "not_found"
    assert theirs["message"] == missing["message"]
    assert ApiTokenAuth(bdeps.clients, clock).verify(token) is not None  # untouched


def followers(deps: Deps, who: Caller, **args: Any) -> dict[str, dict]:
    return {f["session_id"]: f for f in ok(deps, who, "list_followers", **args)["followers"]}


def test_list_followers_counts_what_each_session_has_not_received(bdeps, clock, tenant, other):
    agent = caller(tenant, "read", "write", client="agent-a")
    ok(bdeps, agent, "delta", session_id="s-behind")
    ok(bdeps, agent, "delta", session_id="s-caught-up")
    ok(bdeps, caller(other, "read", "write", client="agent-a"), "delta", session_id="s-foreign")
    clock.advance(seconds=2)
    ok(bdeps, agent, "remember", fact="Alice prefers tea", provenance="chat")
    ok(bdeps, agent, "remember", fact="Bob leads Rocket", provenance="chat")
    ok(bdeps, agent, "remember", fact="A private note", provenance="chat", visibility="private")
    ok(bdeps, agent, "put_page", slug="projects/rocket", content="# Rocket\n\nA project.")
    clock.advance(seconds=2)
    ok(bdeps, agent, "delta", session_id="s-caught-up", include_private=True)
    clock.advance(seconds=1)

    seen = followers(bdeps, caller(tenant, "read"))
    assert set(seen) == {"s-behind", "s-caught-up"}  # never another tenant's
    behind, caught_up = seen["s-behind"], seen["s-caught-up"]
    assert (behind["pending_pages"], behind["pending_facts"], behind["pending_capped"]) == (1, 2, False)  # world only
    assert (caught_up["pending_pages"], caught_up["pending_facts"]) == (0, 0)
    assert behind["client_id"] == "agent-a" and caught_up["last_wake"] > behind["last_wake"]
    assert list(seen) == ["s-caught-up", "s-behind"]  # most recently woken first
    assert behind["expires_at"] > behind["last_wake"]

    local = followers(bdeps, caller(tenant, "read", "write", "admin", remote=False))
    assert local["s-behind"]["pending_facts"] == 3  # a local caller counts private facts too
    assert list(followers(bdeps, caller(tenant, "read"), limit=1)) == ["s-caught-up"]


def test_list_followers_caps_its_counts(bdeps, clock, tenant, monkeypatch):
    agent = caller(tenant, "read", "write")
    ok(bdeps, agent, "delta", session_id="s1")
    clock.advance(seconds=1)
    for n in range(3):
        ok(bdeps, agent, "remember", fact=f"Fact number {n} about rockets", provenance="chat")
    clock.advance(seconds=1)
    monkeypatch.setattr(list_followers, "PENDING_CAP", 2)
    row = followers(bdeps, agent)["s1"]
    assert (row["pending_facts"], row["pending_capped"]) == (2, True)


def test_list_followers_limit_is_bounded(bdeps, tenant):
    for bad in (0, 201, "5"):
        assert err(bdeps, caller(tenant, "read"), "list_followers", limit=bad)["code"] == "invalid_params"
