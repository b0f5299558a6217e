"""ClientStore contract (fleetmem.ports.ClientStore) and token verification over it."""

from __future__ import annotations

import pytest
from tests.contract.builders import at

from fleetmem.errors import Conflict
from fleetmem.models import ClientRecord
from fleetmem.tokens import create_client, hash_token, verify_token


class _Clock:
    def now(self):
        return at(0)


def rec(tenant: str, n: int, **kw) -> ClientRecord:
    digest = hash_token(f"token-{tenant}-{n}")
    values = dict(
        token_hash=digest,
        token_id="tok_" + digest[:10],
        tenant=tenant,
        client_id=f"agent-{n}",
        scopes=frozenset({"read", "write"}),
        created_at=at(n),
    )
    values.update(kw)
    return ClientRecord(**values)


def test_create_then_find_by_hash(clients, tenant):
    r = rec(tenant, 1, scopes=frozenset({"admin"}))
    clients.create(r)
    assert clients.by_hash(r.token_hash) == r
    assert clients.by_hash(hash_token("unknown")) is None


def test_creating_the_same_token_twice_conflicts(clients, tenant):
    clients.create(rec(tenant, 1))
    with pytest.raises(Conflict):
        clients.create(rec(tenant, 1, client_id="someone-else"))
    assert clients.by_hash(rec(tenant, 1).token_hash).client_id == "agent-1"


def test_list_filters_by_tenant(clients, tenant, other_tenant):
    for n in (1, 2):
        clients.create(rec(tenant, n))
    clients.create(rec(other_tenant, 3))
    assert {c.client_id for c in clients.list(tenant)} == {"agent-1", "agent-2"}
    assert {c.client_id for c in clients.list(other_tenant)} == {"agent-3"}
    everyone = {(c.tenant, c.client_id) for c in clients.list()}
    assert {(tenant, "agent-1"), (tenant, "agent-2"), (other_tenant, "agent-3")} <= everyone


def test_revoke_marks_a_live_token_once(clients, tenant):
    r = rec(tenant, 1)
    clients.create(r)
    assert clients.revoke(r.token_id, at=at(5)) is True
    assert clients.revoke(r.token_id, at=at(6)) is False
    assert clients.by_hash(r.token_hash).revoked_at == at(5)
    assert clients.revoke("tok_0000000000", at=at(7)) is False


def test_a_minted_token_verifies_as_a_remote_caller(clients, tenant):
    token, record = create_client(clients, _Clock(), tenant=tenant, client_id="agent-a", scopes=["read"])
    assert token.startswith("fm_") and len(token) == 46
    assert record.token_hash == hash_token(token) and record.token_id == "tok_" + record.token_hash[:10]
    caller = verify_token(clients, token, at(1))
    assert caller is not None
    assert (caller.tenant, caller.client_id, caller.scopes, caller.remote) == (
        tenant,
        "agent-a",
        frozenset({"read"}),
        True,
    )


def test_the_store_never_holds_the_token_itself(clients, tenant):
    token, _ = create_client(clients, _Clock(), tenant=tenant, client_id="agent-a", scopes=["write"])
    dumped = [c.model_dump_json() for c in clients.list(tenant)]
    assert dumped and all(token not in d and token[3:] not in d for d in dumped)


def test_revoked_unknown_and_malformed_tokens_do_not_verify(clients, tenant):
    token, record = create_client(clients, _Clock(), tenant=tenant, client_id="agent-a", scopes=["read"])
    other, _ = create_client(clients, _Clock(), tenant=tenant, client_id="agent-b", scopes=["read"])
    clients.revoke(record.token_id, at=at(1))
    assert verify_token(clients, token, at(2)) is None
    assert verify_token(clients, other, at(2)) is not None
    assert verify_token(clients, "fm_" + "A" * 43, at(2)) is None
    for junk in ["", "fm_", "Bearer " + other, other + "x", other[3:]]:
        assert verify_token(clients, junk, at(2)) is None


def test_touch_records_the_last_use_of_that_credential_only(clients, tenant):
    a, b = rec(tenant, 1), rec(tenant, 2)
    clients.create(a)
    clients.create(b)
    clients.touch(a.token_hash, at=at(7))
    assert clients.by_hash(a.token_hash).last_used_at == at(7)
    assert clients.by_hash(b.token_hash).last_used_at is None
    assert {c.client_id: c.last_used_at for c in clients.list(tenant)} == {"agent-1": at(7), "agent-2": None}
    clients.touch(hash_token("never-created"), at=at(8))  # a credential that is not there: nothing made
    assert clients.by_hash(hash_token("never-created")) is None


def test_a_verified_token_is_recorded_as_used_at_most_once_a_minute(clients, tenant):
    from fleetmem.adapters.local.clock import FixedClock
    from fleetmem.tokens import ApiTokenAuth

    clock = FixedClock(at(0))
    token, record = create_client(clients, clock, tenant=tenant, client_id="agent-9", scopes={"read"})
    auth = ApiTokenAuth(clients, clock)
    assert clients.by_hash(record.token_hash).last_used_at is None
    assert auth.verify(token) is not None
    assert clients.by_hash(record.token_hash).last_used_at == at(0)
    clock.set(at(0.5))  # 30 s later: remembered, not written again
    assert auth.verify(token) is not None
    assert clients.by_hash(record.token_hash).last_used_at == at(0)
    clock.set(at(1.25))  # over a minute after the last write: written
    assert auth.verify(token) is not None
    assert clients.by_hash(record.token_hash).last_used_at == at(1.25)
    assert auth.verify("fm_" + "x" * 43) is None  # a refused token records nothing
