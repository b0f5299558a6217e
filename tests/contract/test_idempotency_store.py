"""IdempotencyStore contract (fleetmem.ports.IdempotencyStore)."""

from __future__ import annotations

from datetime import timedelta

from tests.contract.builders import at

from fleetmem.models import IdempotencyRecord


def rec(
    tenant: str,
    key: str = "k1",
    *,
    client: str = "agent-a",
    verb: str = "remember",
    request_hash: str = "h1",
    created=None,
    ttl_hours: int = 24,
) -> IdempotencyRecord:
    created = created or at(0)
    return IdempotencyRecord(
        tenant=tenant,
        client_id=client,
        verb=verb,
        key=key,
        request_hash=request_hash,
        created_at=created,
        expires_at=created + timedelta(hours=ttl_hours),
    )


def test_first_claim_wins_and_the_second_sees_it_in_flight(idempotency, tenant):
    assert idempotency.claim(rec(tenant), now=at(0)) is None
    seen = idempotency.claim(rec(tenant, request_hash="h2"), now=at(1))
    assert seen is not None
    assert (seen.request_hash, seen.result, seen.expires_at) == ("h1", None, at(0) + timedelta(hours=24))


def test_a_completed_claim_returns_the_stored_result(idempotency, tenant):
    idempotency.claim(rec(tenant), now=at(0))
    idempotency.complete(
        tenant, "agent-a", "remember", "k1", {"id": "f_1", "status": "inserted", "n": [1, 2]}
    )
    seen = idempotency.claim(rec(tenant), now=at(2))
    assert seen.result == {"id": "f_1", "status": "inserted", "n": [1, 2]}


def test_release_lets_the_caller_retry(idempotency, tenant):
    idempotency.claim(rec(tenant), now=at(0))
    idempotency.release(tenant, "agent-a", "remember", "k1")
    assert idempotency.claim(rec(tenant, request_hash="h9"), now=at(1)) is None
    assert idempotency.claim(rec(tenant), now=at(2)).request_hash == "h9"


def test_release_keeps_a_completed_result(idempotency, tenant):
    idempotency.claim(rec(tenant), now=at(0))
    idempotency.complete(tenant, "agent-a", "remember", "k1", {"ok": True})
    idempotency.release(tenant, "agent-a", "remember", "k1")
    assert idempotency.claim(rec(tenant), now=at(1)).result == {"ok": True}


def test_an_expired_record_can_be_claimed_again(idempotency, tenant):
    idempotency.claim(rec(tenant), now=at(0))
    idempotency.complete(tenant, "agent-a", "remember", "k1", {"old": True})
    later = at(0) + timedelta(hours=24)
    assert idempotency.claim(rec(tenant, created=later, request_hash="h2"), now=later) is None
    assert idempotency.claim(rec(tenant), now=later).request_hash == "h2"


def test_keys_are_scoped_by_tenant_client_and_verb(idempotency, tenant, other_tenant):
    assert idempotency.claim(rec(tenant), now=at(0)) is None
    assert idempotency.claim(rec(other_tenant), now=at(0)) is None
    assert idempotency.claim(rec(tenant, client="agent-b"), now=at(0)) is None
    assert idempotency.claim(rec(tenant, verb="put_page"), now=at(0)) is None
    idempotency.complete(other_tenant, "agent-a", "remember", "k1", {"theirs": True})
    assert idempotency.claim(rec(tenant), now=at(1)).result is None
