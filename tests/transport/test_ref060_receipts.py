"""D22 request ids and durable write receipts, through `dispatch` on both backends (SQLite and
DynamoDB Local, real stores): request_id round trip, replay, conflict across tools, receipts on
success, get/list/cancel, foreign ids, and the dead-holder rule on the local server."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.memory import receipts
from fleetmem.models import Caller, IdempotencyRecord
from fleetmem.ports import Deps
from fleetmem.protocol import request_uuid, tool_request_hash
from fleetmem.transport.dispatch import dispatch
from fleetmem.transport.idempotency import request_hash
from tests.unit.domain.delta_backends import BACKENDS, open_deps


@pytest.fixture(params=BACKENDS)
def deps(request: pytest.FixtureRequest) -> Iterator[Deps]:
    clock = FixedClock(datetime.now(UTC))  # near the wall clock: DynamoDB Local drops past `ttl`
    with open_deps(request.param, request, clock) as d:
        d.embedder = HashEmbedder()
        d.policy = replace(d.policy, idempotency_wait_s=0.2)
        yield d


def _caller(client: str = "agent-a", tenant: str | None = None) -> Caller:
    tenant = tenant or "t-" + uuid.uuid4().hex[:12]
    return Caller(tenant=tenant, client_id=client, scopes=frozenset({"read", "write"}), remote=True)


FACT = {"fact": "Quill Harbor opens at nine", "provenance": "receipts test", "entity": "Quill Harbor"}


def test_a_uuid_request_id_is_kept_lowercased_and_the_answer_carries_its_receipt(deps: Deps) -> None:
    caller = _caller()
    rid = str(uuid.uuid4()).upper()
    r = dispatch("remember", {**FACT, "request_id": rid}, caller, deps)
    assert not r.is_error, r.body
    assert r.body["request_id"] == rid.lower() and "client_request_id" not in r.body
    assert r.body["state"] == "committed" and r.body["retry_after_ms"] is None
    assert r.body["persistence"] == {"mode": "database"}
    receipt = r.body["write_request"]
    assert receipt["request_id"] == rid.lower() and receipt["outcome"]["id"] == r.body["id"]
    assert FACT["fact"] not in str(receipt)
    again = dispatch("remember", {**FACT, "request_id": rid}, caller, deps)
    assert again.body["idempotent_replay"] is True and again.body["id"] == r.body["id"]


def test_another_id_maps_to_its_uuid5_and_comes_back_as_client_request_id(deps: Deps) -> None:
    caller = _caller()
    r = dispatch("remember", {**FACT, "request_id": "my-write-1"}, caller, deps)
    assert r.body["client_request_id"] == "my-write-1"
    assert r.body["request_id"] == str(uuid.uuid5(uuid.UUID("3f6a2c1e-9b47-4d2a-8e5f-7c0b1d9a6e24"), "my-write-1"))
    # idempotency_key is the older name of the same id: one claim store
    old = dispatch("remember", {**FACT, "idempotency_key": "my-write-1"}, caller, deps)
    assert old.body["idempotent_replay"] is True and old.body["id"] == r.body["id"]


def test_an_omitted_request_id_is_made_by_the_server(deps: Deps) -> None:
    caller = _caller()
    r = dispatch("remember", FACT, caller, deps)
    assert uuid.UUID(r.body["request_id"]).version == 4
    # stored once, complete, after the write: its receipt reads back, and a retry with the id the
    # answer named replays the write
    got = dispatch("get_write_request", {"request_id": r.body["request_id"]}, caller, deps)
    assert not got.is_error, got.body
    receipt = got.body["write_request"]
    assert receipt["state"] == "committed" and receipt["outcome"]["id"] == r.body["id"]
    again = dispatch("remember", {**FACT, "request_id": r.body["request_id"]}, caller, deps)
    assert again.body["idempotent_replay"] is True and again.body["id"] == r.body["id"]


@pytest.mark.parametrize("bad", ["", "has space", "é", "x" * 129, 7])
def test_a_bad_request_id_is_invalid_params(deps: Deps, bad: object) -> None:
    r = dispatch("remember", {**FACT, "request_id": bad}, _caller(), deps)
    assert r.body["code"] == "invalid_params"
    assert "request_id" not in r.body["fix"]["mcp"]["arguments"]


def test_one_id_reused_for_another_tool_is_an_idempotency_conflict(deps: Deps) -> None:
    caller = _caller()
    saved = dispatch("remember", {**FACT, "request_id": "w-1"}, caller, deps)
    r = dispatch("forget", {"id": saved.body["id"], "request_id": "w-1"}, caller, deps)
    assert r.body["code"] == "invalid_params" and r.body["write_error"] == "idempotency_conflict"
    assert "request_id" not in r.body["fix"]["mcp"]["arguments"]


def test_forget_replays_under_its_request_id(deps: Deps) -> None:
    caller = _caller()
    saved = dispatch("remember", FACT, caller, deps)
    first = dispatch("forget", {"id": saved.body["id"], "request_id": "f-1"}, caller, deps)
    again = dispatch("forget", {"id": saved.body["id"], "request_id": "f-1"}, caller, deps)
    assert first.body["expired"] is True and again.body["expired"] is True
    assert again.body["idempotent_replay"] is True


def test_get_list_and_cancel_see_only_the_callers_own_receipts(deps: Deps) -> None:
    caller = _caller()
    a = dispatch("remember", {**FACT, "request_id": "g-1"}, caller, deps)
    b = dispatch("remember", {**FACT, "fact": "Quill Harbor closes at six", "request_id": "g-2"}, caller, deps)
    got = dispatch("get_write_request", {"request_id": "g-1"}, caller, deps)
    assert got.body["write_request"] == a.body["write_request"]
    listed = dispatch("list_write_requests", {}, caller, deps)
    assert {w["request_id"] for w in listed.body["write_requests"]} == {a.body["request_id"], b.body["request_id"]}
    done = dispatch("cancel_write_request", {"request_id": "g-1"}, caller, deps)
    assert done.body["cancelled"] is False and done.body["write_request"]["state"] == "committed"
    for other in (_caller("agent-b", caller.tenant), _caller()):
        for tool in ("get_write_request", "cancel_write_request"):
            assert dispatch(tool, {"request_id": "g-1"}, other, deps).body["code"] == "not_found"
        assert dispatch("list_write_requests", {}, other, deps).body["write_requests"] == []


def _claim_in_flight(deps: Deps, caller: Caller, raw: str, holder: str | None, lease_s: float | None = None) -> None:
    from fleetmem.memory.remember_params import RememberParams

    now = deps.clock.now()
    params = RememberParams.model_validate(FACT, context={"tool": "remember", "now": now, "keep": {}})
    deps.idempotency.claim(
        IdempotencyRecord(
            tenant=caller.tenant,
            client_id=caller.client_id,
            verb="remember",
            key=request_uuid(raw)[0],
            client_request_id=raw,
            request_hash=tool_request_hash("remember", request_hash(params)),
            created_at=now,
            expires_at=now.replace(year=now.year + 1),
            lease_until=now.replace(year=now.year + 1) if lease_s is None else now + timedelta(seconds=lease_s),
            claim_id="c-first",
            holder=holder,
        ),
        now=now,
    )


def test_a_running_write_is_pending_and_can_be_cancelled(deps: Deps) -> None:
    caller = _caller()
    _claim_in_flight(deps, caller, "p-1", holder=None)
    r = dispatch("remember", {**FACT, "request_id": "p-1"}, caller, deps)
    assert r.body["code"] == "unavailable" and r.body["write_error"] == "write_pending"
    assert r.body["write_request"]["state"] == "running"
    diagnostic = r.body["write_request"]["diagnostic"]  # the reference's allowlisted spellings
    assert (diagnostic["assessment"], diagnostic["reason"], diagnostic["next_action"]) == ("pending", "pending", "poll")
    assert r.body["fix"]["mcp"]["tool"] == "get_write_request"
    c = dispatch("cancel_write_request", {"request_id": "p-1"}, caller, deps)
    assert c.body["cancelled"] is True and c.body["write_request"]["state"] == "cancelled"


def test_a_claim_whose_holder_process_is_gone_is_taken_over_at_once(deps: Deps) -> None:
    """The dead-holder rule (local server): a claim held by a process that no longer runs is
    `recovering`, and a retry takes it over on its first try (its lease is a year away)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = receipts.process_holder().rsplit(":", 2)[0] + f":{child.pid}:1"
    deps.policy = replace(deps.policy, claim_holders=True)
    caller = _caller()
    _claim_in_flight(deps, caller, "d-1", holder=dead)
    seen = dispatch("get_write_request", {"request_id": "d-1"}, caller, deps)
    assert seen.body["write_request"]["state"] == "recovering"
    assert seen.body["write_request"]["diagnostic"]["reason"] == "owner_unavailable"
    r = dispatch("remember", {**FACT, "request_id": "d-1"}, caller, deps)
    if type(deps.idempotency).__name__.startswith("Dynamo"):
        # on DynamoDB the lease decides (a killed Lambda cannot be observed): still pending
        assert r.body["write_error"] == "write_pending"
        return
    assert not r.is_error, r.body
    assert r.body["state"] == "committed"


def test_a_claim_whose_lease_lapsed_reads_recovery_required_and_a_retry_takes_it_over(deps: Deps) -> None:
    """The lease path (DynamoDB's only one: a killed Lambda cannot be observed), with a moved clock:
    a claim past its lease is `stalled` / `recovery_required`, and the next retry runs the write."""
    caller = _caller()
    _claim_in_flight(deps, caller, "l-1", holder=None, lease_s=60)
    running = dispatch("get_write_request", {"request_id": "l-1"}, caller, deps).body["write_request"]
    assert (running["state"], running["diagnostic"]["reason"]) == ("running", "pending")
    deps.clock.advance(seconds=61)  # type: ignore[attr-defined]
    lapsed = dispatch("get_write_request", {"request_id": "l-1"}, caller, deps).body["write_request"]
    assert (lapsed["diagnostic"]["assessment"], lapsed["diagnostic"]["reason"]) == ("stalled", "recovery_required")
    r = dispatch("remember", {**FACT, "request_id": "l-1"}, caller, deps)
    assert not r.is_error, r.body
    assert r.body["state"] == "committed" and r.body["client_request_id"] == "l-1"


def test_a_keyed_write_given_a_plain_key_stores_it_under_its_request_id() -> None:
    """A caller of `IdempotentCall` that passes a plain key (a batch item's child key) gets the same
    mapping as `request_id`: a UUIDv5, the key echoed as client_request_id."""
    from fleetmem.transport.idempotency import IdempotentCall, RequestId

    call = IdempotentCall(None, None, "batch-1/item-0", None, "c", None)  # type: ignore[arg-type]
    assert call.rid == RequestId.of("batch-1/item-0")
    assert call.rid.client_request_id == "batch-1/item-0" and uuid.UUID(call.rid.request_id).version == 5


@pytest.mark.parametrize("tool", ["forget", "delete_page"])
def test_a_first_answer_carries_no_empty_receipt_fields(deps: Deps, tool: str) -> None:
    """Fields a receipt does not set (client_request_id for a UUID id, idempotent_replay on a first
    call) are left out of the answer, not sent as null."""
    caller = _caller()
    if tool == "forget":
        args = {"id": dispatch("remember", FACT, caller, deps).body["id"]}
    else:
        dispatch("put_page", {"slug": "places/quill-harbor", "content": "# Quill Harbor"}, caller, deps)
        args = {"slug": "places/quill-harbor"}
    r = dispatch(tool, {**args, "request_id": str(uuid.uuid4())}, caller, deps)
    assert not r.is_error, r.body
    assert "client_request_id" not in r.body and "idempotent_replay" not in r.body, r.body
