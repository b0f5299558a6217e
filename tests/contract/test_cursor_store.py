"""CursorStore contract (fleetmem.ports.CursorStore), run against every backend that provides `cursors`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from tests.contract import builders

from fleetmem.errors import Conflict
from fleetmem.models import Cursor
from fleetmem.protocol import SESSION_IDLE_DAYS, SESSIONS_PER_CLIENT

#: Cursor times are near the real time: DynamoDB Local deletes items whose TTL attribute
#: (touched_at + 7 days) is past on the WALL clock, at moments of its own choosing, so cursors
#: touched at a fixed date in the past would vanish at random during a test.
BASE = datetime.now(UTC).replace(microsecond=0)


def at(minutes: float = 0) -> datetime:
    return builders.at(minutes, base=BASE)


@pytest.fixture
def now() -> datetime:
    return at(0)


def cur(tenant: str, session: str = "s1", *, client: str = "agent-a", touched=None, **kw) -> Cursor:
    touched = touched or at(0)
    return Cursor(
        tenant=tenant,
        client_id=client,
        session_id=session,
        since=kw.pop("since", touched),
        touched_at=touched,
        **kw,
    )


def test_a_missing_cursor_is_none(cursors, tenant, now):
    assert cursors.get(tenant, "agent-a", "s1", now=now) is None


def test_first_put_creates_version_one_and_round_trips(cursors, tenant, now):
    c = cur(tenant, since=at(-3).replace(microsecond=7000), slug="people/é", incomplete_streak=2)
    stored = cursors.put(c, expected_version=None)
    assert stored.version == 1
    assert cursors.get(tenant, "agent-a", "s1", now=now) == stored
    assert stored.model_copy(update={"version": 0}) == c


def test_put_requires_the_stored_version(cursors, tenant, now):
    v1 = cursors.put(cur(tenant), expected_version=None)
    with pytest.raises(Conflict):
        cursors.put(cur(tenant, slug="x"), expected_version=None)  # already exists
    v2 = cursors.put(v1.model_copy(update={"slug": "a"}), expected_version=1)
    assert v2.version == 2
    with pytest.raises(Conflict):
        cursors.put(v1.model_copy(update={"slug": "stale"}), expected_version=1)
    assert cursors.get(tenant, "agent-a", "s1", now=now).slug == "a"


def test_put_with_an_expected_version_on_a_missing_cursor_conflicts(cursors, tenant, now):
    with pytest.raises(Conflict):
        cursors.put(cur(tenant), expected_version=3)
    assert cursors.get(tenant, "agent-a", "s1", now=now) is None


def test_cursors_are_keyed_by_tenant_client_and_session(cursors, tenant, other_tenant, now):
    cursors.put(cur(tenant, slug="mine"), expected_version=None)
    assert cursors.get(other_tenant, "agent-a", "s1", now=now) is None
    assert cursors.get(tenant, "agent-b", "s1", now=now) is None
    assert cursors.get(tenant, "agent-a", "s2", now=now) is None
    theirs = cursors.put(cur(other_tenant, slug="theirs"), expected_version=None)
    assert theirs.version == 1
    assert cursors.get(tenant, "agent-a", "s1", now=now).slug == "mine"


def test_an_idle_cursor_expires_after_the_idle_window(cursors, tenant):
    cursors.put(cur(tenant, touched=at(0)), expected_version=None)
    limit = timedelta(days=SESSION_IDLE_DAYS)
    assert cursors.get(tenant, "agent-a", "s1", now=at(0) + limit) is not None
    assert cursors.get(tenant, "agent-a", "s1", now=at(0) + limit + timedelta(milliseconds=1)) is None


def test_an_idle_cursor_can_be_created_afresh(cursors, tenant):
    cursors.put(cur(tenant, touched=at(0), slug="old"), expected_version=None)
    later = at(0) + timedelta(days=SESSION_IDLE_DAYS, minutes=1)
    fresh = cursors.put(cur(tenant, touched=later, slug="new"), expected_version=None)
    assert cursors.get(tenant, "agent-a", "s1", now=later) == fresh
    assert fresh.slug == "new"


def test_the_least_recently_woken_sessions_are_evicted_beyond_the_limit(cursors_backend, tenant):
    cursors = cursors_backend.cursors
    limit = getattr(cursors_backend, "sessions_per_client", SESSIONS_PER_CLIENT)
    for i in range(limit + 2):
        cursors.put(cur(tenant, f"s{i:05d}", touched=at(i / 1000)), expected_version=None)
    cursors.put(cur(tenant, "s00000", client="agent-b", touched=at(0)), expected_version=None)
    now = at(limit)
    assert cursors.get(tenant, "agent-a", "s00000", now=now) is None
    assert cursors.get(tenant, "agent-a", "s00001", now=now) is None
    assert cursors.get(tenant, "agent-a", "s00002", now=now) is not None
    assert cursors.get(tenant, "agent-a", f"s{limit + 1:05d}", now=now) is not None
    assert cursors.get(tenant, "agent-b", "s00000", now=now) is not None  # other clients keep theirs


def test_for_tenant_lists_the_tenants_live_cursors_most_recently_woken_first(cursors, tenant, other_tenant, now):
    cursors.put(cur(tenant, "s1", client="agent-a", touched=at(-30)), expected_version=None)
    cursors.put(cur(tenant, "s2", client="agent-b", touched=at(-10), slug="people/x"), expected_version=None)
    newest = cursors.put(
        cur(tenant, "s3", client="agent-a", touched=at(-1), page_seq=4, fact_seq=2), expected_version=None
    )
    cursors.put(cur(other_tenant, "s9", client="agent-a", touched=at(-2)), expected_version=None)
    listed = cursors.for_tenant(tenant, now=now, limit=10)
    assert [(c.client_id, c.session_id) for c in listed] == [("agent-a", "s3"), ("agent-b", "s2"), ("agent-a", "s1")]
    assert listed[0] == newest  # whole cursors, positions included
    assert [c.session_id for c in cursors.for_tenant(tenant, now=now, limit=2)] == ["s3", "s2"]
    assert [c.session_id for c in cursors.for_tenant(other_tenant, now=now, limit=10)] == ["s9"]
    assert cursors.for_tenant("t-nobody-" + tenant[2:], now=now, limit=10) == []


def test_for_tenant_leaves_out_idle_cursors(cursors, tenant):
    cursors.put(cur(tenant, "s1", touched=at(0)), expected_version=None)
    later = at(0) + timedelta(days=SESSION_IDLE_DAYS, minutes=1)
    cursors.put(cur(tenant, "s2", touched=later), expected_version=None)
    assert [c.session_id for c in cursors.for_tenant(tenant, now=later, limit=10)] == ["s2"]
