"""D2 leases through the one dispatch, on both adapter sets (SQLite; DynamoDB Local + OpenSearch):
a call killed after claiming its idempotency key — before its write, or after it and before its
result — holds the key only for its lease. A retry within the lease waits and is told the first
call still runs; a retry after it takes the key over, runs, and the verb's own dedup stores the
memory once; the next retry replays that result.

A kill is a BaseException raised inside the store (`_Killed`): it ends the call at that point
without the release a failing call does, as a SIGKILL or a Lambda timeout would."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.models import Caller, IdempotencyRecord
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch
from tests.unit.domain.delta_backends import BACKENDS, open_deps

LEASE_S = 60


class _Killed(BaseException):
    """The process ends here (no except clause of the call runs)."""


class _KilledAfter:
    """The idempotency store of a call that dies right after `step` ("claim": before its write;
    "complete": after its write, before its result is stored)."""

    def __init__(self, store: Any, step: str) -> None:
        self.store, self.step = store, step

    def claim(self, record: IdempotencyRecord, *, now: datetime, **kw: Any) -> IdempotencyRecord | None:
        existing = self.store.claim(record, now=now, **kw)
        if self.step == "claim" and existing is None:
            raise _Killed
        return existing

    def complete(self, *args: Any, **kw: Any) -> None:
        raise _Killed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@pytest.fixture(params=BACKENDS)
def deps(request: pytest.FixtureRequest) -> Iterator[Deps]:
    # near the wall clock: DynamoDB Local deletes records whose `ttl` has passed
    clock = FixedClock(datetime.now(UTC))
    with open_deps(request.param, request, clock) as d:
        d.embedder = HashEmbedder()
        d.policy = replace(d.policy, idempotency_lease_s=LEASE_S, idempotency_wait_s=0.2)
        yield d


@pytest.fixture
def caller() -> Caller:
    tenant = "t-" + uuid.uuid4().hex[:12]
    return Caller(tenant=tenant, client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)


def _stored(deps: Deps, caller: Caller, text: str) -> list[str]:
    body = dispatch("recall", {"entity": "Zed Orchard", "include_expired": True, "limit": 50}, caller, deps).body
    return [f["fact_id"] for f in body["facts"] if f["fact"] == text]


@pytest.mark.parametrize("killed_after", ["claim", "complete"])
def test_a_retry_after_a_killed_call_takes_its_key_over_once_the_lease_lapses(
    deps: Deps, caller: Caller, killed_after: str
) -> None:
    args = {"fact": f"Zed Orchard ships crate {killed_after}", "provenance": "kill test", "entity": "Zed Orchard"}
    call = {**args, "idempotency_key": f"k-{killed_after}"}
    store = deps.idempotency
    deps.idempotency = _KilledAfter(store, killed_after)  # type: ignore[assignment]
    with pytest.raises(_Killed):
        dispatch("remember", call, caller, deps)
    deps.idempotency = store
    assert len(_stored(deps, caller, args["fact"])) == (1 if killed_after == "complete" else 0)

    early = dispatch("remember", call, caller, deps)  # within the lease: the first call may still run
    assert (early.body["code"], early.body["detail"]["reason"]) == ("unavailable", "idempotency_in_flight")

    deps.clock.advance(seconds=LEASE_S + 1)  # type: ignore[attr-defined]
    retry = dispatch("remember", call, caller, deps)
    assert not retry.is_error, retry.body
    assert "idempotent_replay" not in retry.body
    assert _stored(deps, caller, args["fact"]) == [retry.body["id"]]  # stored exactly once

    replay = dispatch("remember", call, caller, deps)
    assert replay.body["idempotent_replay"] is True and replay.body["id"] == retry.body["id"]
    assert _stored(deps, caller, args["fact"]) == [retry.body["id"]]


class _KilledIndexing:
    """The search index of a call that dies after its write was stored, before it was indexed."""

    def __init__(self, index: Any) -> None:
        self.index = index

    def upsert(self, docs: Any) -> None:
        raise _Killed

    def replace_page(self, *args: Any) -> None:
        raise _Killed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.index, name)


@pytest.fixture
def sqlite_deps(request: pytest.FixtureRequest) -> Iterator[Deps]:
    """SQLite, whose index is written by the call itself (write-through). DynamoDB's index is fed
    by its stream (D11), so a killed call cannot leave a stored write unindexed there."""
    with open_deps("sqlite", request, FixedClock(datetime.now(UTC))) as d:
        d.embedder = HashEmbedder()
        d.policy = replace(d.policy, idempotency_lease_s=LEASE_S)
        yield d


@pytest.mark.parametrize("tool", ["remember", "put_page"])
def test_a_retry_indexes_the_write_its_killed_call_stored_but_never_indexed(
    sqlite_deps: Deps, caller: Caller, tool: str
) -> None:
    deps = sqlite_deps
    marker = "kb" + uuid.uuid4().hex[:10]
    if tool == "remember":
        args = {"fact": f"Zed Orchard keeps crate {marker}", "provenance": "kill test", "entity": "Zed Orchard"}
    else:
        args = {"slug": "zed/crates", "content": f"# Zed crates\n\nCrate {marker} ships Monday."}
    call = {**args, "idempotency_key": f"k-index-{tool}"}
    index = deps.search
    deps.search = _KilledIndexing(index)  # type: ignore[assignment]
    with pytest.raises(_Killed):
        dispatch(tool, call, caller, deps)
    deps.search = index
    deps.clock.advance(seconds=LEASE_S + 1)  # type: ignore[attr-defined]

    retry = dispatch(tool, call, caller, deps)
    assert not retry.is_error, retry.body
    assert retry.body.get("status") in {"duplicate", "unchanged"}  # the killed call did store it
    found = dispatch("recall", {"query": marker}, caller, deps).body
    if tool == "remember":
        assert [f["fact_id"] for f in found["facts"] if marker in f["fact"]] == [retry.body["id"]], found
    else:
        assert "zed/crates" in {hit["slug"] for hit in found["results"]}, found
