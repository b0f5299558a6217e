"""IdempotencyStore contract (fleetmem.ports.IdempotencyStore)."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from tests.contract.builders import at as at_base

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.sqlite import DB_FILENAME, SCHEMA_VERSION
from fleetmem.adapters.local.sqlite.db import ms
from fleetmem.models import IdempotencyRecord
from fleetmem.protocol import IDEMPOTENCY_LEASE_SECONDS, request_uuid, tool_request_hash

#: The records' times start at the wall clock: DynamoDB Local deletes an item whose TTL attribute
#: (`ttl`, from the record's `expires_at`) is past on the wall clock, at any moment, so a record
#: written in the past could vanish between two steps of a test.
NOW = datetime.now(UTC).replace(microsecond=0)


def at(minutes: float = 0) -> datetime:
    return at_base(minutes, base=NOW)


def rec(
    tenant: str,
    key: str = "k1",
    *,
    client: str = "agent-a",
    verb: str = "remember",
    request_hash: str = "h1",
    created=None,
    ttl_hours: int = 24,
    lease_until=None,
    claim_id: str | None = None,
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
        lease_until=lease_until,
        claim_id=claim_id,
    )


def leased(tenant: str, claim_id: str, *, claimed: float = 0, lease_minutes: float = 1, **kw) -> IdempotencyRecord:
    """A claim made at minute `claimed` whose lease lapses `lease_minutes` later."""
    return rec(tenant, created=at(claimed), lease_until=at(claimed + lease_minutes), claim_id=claim_id, **kw)


def test_first_claim_wins_and_the_second_sees_it_in_flight(idempotency, tenant):
    assert idempotency.claim(rec(tenant), now=at(0)) is None
    seen = idempotency.claim(rec(tenant, request_hash="h2"), now=at(1))
    assert seen is not None
    assert (seen.request_hash, seen.result, seen.expires_at) == ("h1", None, at(0) + timedelta(hours=24))


def test_a_completed_claim_returns_the_stored_result(idempotency, tenant):
    idempotency.claim(rec(tenant), now=at(0))
    idempotency.complete(tenant, "agent-a", "remember", "k1", {"id": "f_1", "status": "inserted", "n": [1, 2]})
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


def test_keys_are_scoped_by_tenant_and_client_not_by_verb(idempotency, tenant, other_tenant):
    assert idempotency.claim(rec(tenant), now=at(0)) is None
    assert idempotency.claim(rec(other_tenant), now=at(0)) is None
    assert idempotency.claim(rec(tenant, client="agent-b"), now=at(0)) is None
    # D22: one request id names one write whatever the tool (the tool is part of the request hash)
    assert idempotency.claim(rec(tenant, verb="put_page"), now=at(0)).verb == "remember"
    idempotency.complete(other_tenant, "agent-a", "remember", "k1", {"theirs": True})
    assert idempotency.claim(rec(tenant), now=at(1)).result is None


# -- leases: a claim whose call died gives its key up to a retry --------------------------------


def test_an_in_flight_claim_past_its_lease_is_taken_over_by_a_retry(idempotency, tenant):
    assert idempotency.claim(leased(tenant, "c-dead"), now=at(0)) is None
    assert idempotency.claim(leased(tenant, "c-retry", claimed=1), now=at(1)) is None
    seen = idempotency.claim(leased(tenant, "c-late", claimed=1.5), now=at(1.5))
    assert (seen.claim_id, seen.result, seen.lease_until) == ("c-retry", None, at(2))


def test_an_in_flight_claim_within_its_lease_is_not_taken_over(idempotency, tenant):
    assert idempotency.claim(leased(tenant, "c-live"), now=at(0)) is None
    seen = idempotency.claim(leased(tenant, "c-retry", claimed=0.9), now=at(0.9))
    assert (seen.claim_id, seen.result, seen.lease_until) == ("c-live", None, at(1))


def test_a_lapsed_claim_is_not_taken_over_by_a_call_with_other_arguments(idempotency, tenant):
    idempotency.claim(leased(tenant, "c-dead"), now=at(0))
    seen = idempotency.claim(leased(tenant, "c-other", claimed=5, request_hash="h2"), now=at(5))
    assert (seen.claim_id, seen.request_hash) == ("c-dead", "h1")


def test_a_completed_result_is_replayed_after_its_lease(idempotency, tenant):
    idempotency.claim(leased(tenant, "c-first"), now=at(0))
    idempotency.complete(tenant, "agent-a", "remember", "k1", {"id": "f_1"})
    seen = idempotency.claim(leased(tenant, "c-retry", claimed=5), now=at(5))
    assert seen.result == {"id": "f_1"}


def test_a_claim_without_a_lease_holds_its_key_until_it_expires(idempotency, tenant):
    idempotency.claim(rec(tenant), now=at(0))
    assert idempotency.claim(leased(tenant, "c-retry", claimed=600), now=at(600)).result is None


def test_releasing_a_claim_that_was_taken_over_keeps_the_new_claim(idempotency, tenant):
    idempotency.claim(leased(tenant, "c-slow"), now=at(0))
    assert idempotency.claim(leased(tenant, "c-retry", claimed=2), now=at(2)) is None
    idempotency.release(tenant, "agent-a", "remember", "k1", "c-slow")  # the slow first call fails late
    assert idempotency.claim(leased(tenant, "c-third", claimed=2.5), now=at(2.5)).claim_id == "c-retry"
    idempotency.release(tenant, "agent-a", "remember", "k1", "c-retry")
    assert idempotency.claim(leased(tenant, "c-third", claimed=2.5), now=at(2.5)) is None


def test_concurrent_retries_of_a_lapsed_claim_take_it_over_only_once(idempotency, tenant, request):
    """Eight racing takeovers of one lapsed claim: one wins. Judged on SQLite and DynamoDB Local;
    moto's server checks a transaction's conditions without isolating concurrent requests, so it
    cannot judge a race (the single-writer conditions above run on it)."""
    if request.node.callspec.params.get("idempotency_backend") == "moto":
        pytest.skip("moto does not isolate concurrent conditional transactions; DynamoDB Local does")
    idempotency.claim(leased(tenant, "c-dead"), now=at(0))
    retries = 8
    start = threading.Barrier(retries)

    def retry(i: int):
        start.wait()
        return idempotency.claim(leased(tenant, f"c-{i}", claimed=3), now=at(3))

    with ThreadPoolExecutor(max_workers=retries) as pool:
        seen = list(pool.map(retry, range(retries)))
    winners = [f"c-{i}" for i, s in enumerate(seen) if s is None]
    assert len(winners) == 1, seen
    assert {s.claim_id for s in seen if s is not None} == set(winners)


# -- SQLite only: two processes on one data directory, and data directories from before leases ---


def test_sqlite_stores_of_two_processes_take_a_lapsed_claim_over_only_once(tmp_path):
    """Each store has its own writer connection, as `fleetmem serve` and a CLI command next to it
    do: the takeover is atomic across them too (BEGIN IMMEDIATE), not only inside one process."""
    one, two = open_local(tmp_path / "data"), open_local(tmp_path / "data")
    try:
        one.idempotency.claim(leased("t1", "c-dead"), now=at(0))
        retries = 8
        start = threading.Barrier(retries)

        def retry(i: int):
            start.wait()
            store = (one, two)[i % 2].idempotency
            return store.claim(leased("t1", f"c-{i}", claimed=3), now=at(3))

        with ThreadPoolExecutor(max_workers=retries) as pool:
            seen = list(pool.map(retry, range(retries)))
    finally:
        one.close()
        two.close()
    winners = [f"c-{i}" for i, s in enumerate(seen) if s is None]
    assert len(winners) == 1, seen
    assert {s.claim_id for s in seen if s is not None} == set(winners)


def test_a_schema_3_data_dir_is_migrated_and_its_stuck_claim_lapses_after_the_lease(tmp_path):
    """A data directory written before claims had leases, holding a claim whose server was killed:
    opening it migrates the table, and that claim then lapses one lease after it was made."""
    data = tmp_path / "data"
    open_local(data).close()
    conn = sqlite3.connect(data / DB_FILENAME)
    conn.executescript(
        """
        DROP TABLE idempotency;
        CREATE TABLE idempotency (
          tenant TEXT NOT NULL, client_id TEXT NOT NULL, verb TEXT NOT NULL, key TEXT NOT NULL,
          request_hash TEXT NOT NULL, result TEXT, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
          PRIMARY KEY (tenant, client_id, verb, key)
        ) WITHOUT ROWID;
        PRAGMA user_version = 3;
        """
    )
    for key, result in (("stuck", None), ("done", '{"id": "f_1"}')):
        conn.execute(
            "INSERT INTO idempotency VALUES ('t1', 'agent-a', 'remember', ?, 'h1', ?, ?, ?)",
            (key, result, ms(at(0)), ms(at(24 * 60))),
        )
    conn.commit()
    conn.close()

    stores = open_local(data)  # opening migrates
    try:
        conn = sqlite3.connect(data / DB_FILENAME)
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        conn.close()
        lapse = IDEMPOTENCY_LEASE_SECONDS / 60
        # schema 6 (D22): each old key moved to its request id, its hash to the tool's request hash
        stuck, done_id, h = request_uuid("stuck")[0], request_uuid("done")[0], tool_request_hash("remember", "h1")
        early = stores.idempotency.claim(
            leased("t1", "c-early", key=stuck, request_hash=h, claimed=lapse / 2), now=at(lapse / 2)
        )
        assert (early.result, early.lease_until, early.client_request_id) == (None, at(lapse), "stuck")
        assert (
            stores.idempotency.claim(leased("t1", "c-retry", key=stuck, request_hash=h, claimed=lapse), now=at(lapse))
            is None
        )
        done = stores.idempotency.claim(
            leased("t1", "c-retry", key=done_id, request_hash=h, claimed=lapse), now=at(lapse)
        )
        assert (done.result, done.lease_until) == ({"id": "f_1"}, None)
    finally:
        stores.close()
