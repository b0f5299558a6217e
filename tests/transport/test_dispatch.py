"""The one dispatch: surface and scope gate, D3 unknown params, validation fixes, D2 idempotency,
port-error mapping, and the internal envelope that never leaks."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from fleetmem.contract.result import DispatchResult
from fleetmem.errors import Conflict, Fix, NotFound, Notice, TooLarge, Unavailable, VerbError
from fleetmem.memory.registry import REGISTRY
from fleetmem.models import Caller, IdempotencyRecord
from fleetmem.ports import Deps
from fleetmem.protocol import request_uuid, tool_request_hash
from fleetmem.transport.dispatch import dispatch, precheck, visible_tools
from fleetmem.transport.idempotency import request_hash
from fleetmem.transport.logs import CorrelationFilter, JsonFormatter
from tests.transport.conftest import Probe, ProbeParams, snapshot

REMEMBER = {"fact": "Alice prefers tea", "provenance": "chat 2026-06-11", "entity": "Alice"}


def caller(*scopes: str, tenant: str = "t1") -> Caller:
    return Caller(tenant=tenant, client_id="agent-a", scopes=frozenset(scopes), remote=True)  # type: ignore[arg-type]


# -- surface and scope ----------------------------------------------------------------------------


def test_a_full_surface_tool_called_on_the_verbs_surface_is_unknown_tool(
    deps: Deps, make_probe: Callable[..., Probe]
) -> None:
    make_probe("zz_full_only", surface="full")
    r = dispatch("zz_full_only", {"name": "x"}, caller("read", "write", "admin"), deps, surface="verbs")
    assert r.is_error and r.body["code"] == "unknown_tool"
    assert r.body["fix"]["next"] == "tell_user_to_run"


def test_a_name_that_is_no_tool_is_unknown_tool_with_the_closest_name_as_fix(deps: Deps) -> None:
    r = dispatch("recal", {"query": "tea"}, caller("read"), deps)
    assert r.body["code"] == "unknown_tool"
    assert r.body["fix"]["mcp"] == {"tool": "recall", "arguments": {"query": "tea"}}
    assert r.body["fix"]["next"] == "run"


def test_a_tool_the_scopes_do_not_allow_is_scope_denied_for_the_host_admin(deps: Deps, remote_caller: Caller) -> None:
    r = dispatch("purge_fact", {"id": "f_x"}, remote_caller, deps)
    assert r.body["code"] == "scope_denied"
    assert r.body["class"] == "host_only"
    assert r.body["fix"]["next"] == "tell_user_to_run"


def test_a_read_only_token_cannot_remember_and_nothing_is_written(deps: Deps, stores: object) -> None:
    before = snapshot(stores)  # type: ignore[arg-type]
    r = dispatch("remember", REMEMBER, caller("read"), deps)
    assert r.body["code"] == "scope_denied"
    assert snapshot(stores) == before  # type: ignore[arg-type]


SCOPE_SETS = [("read",), ("write",), ("read", "write"), ("admin",)]


@pytest.mark.parametrize("surface", ["verbs", "full"])
@pytest.mark.parametrize("scopes", SCOPE_SETS)
def test_tools_call_accepts_exactly_the_tools_tools_list_shows(
    deps: Deps, surface: str, scopes: tuple[str, ...]
) -> None:
    who = caller(*scopes)
    listed = {s.name for s in visible_tools(surface, who)}  # type: ignore[arg-type]
    for name in REGISTRY:
        gate = precheck(name, {}, who, surface=surface, correlation_id="c")  # type: ignore[arg-type]
        full = dispatch(name, {}, who, deps, surface=surface)  # type: ignore[arg-type]
        if name in listed:
            assert gate is None
            assert full.body.get("code") not in ("unknown_tool", "scope_denied"), name
        else:
            assert gate is not None and gate.body["code"] in ("unknown_tool", "scope_denied"), name
            assert full.body["code"] == gate.body["code"], name


def test_the_verbs_surface_lists_only_memory_verbs(deps: Deps) -> None:
    names = {s.name for s in visible_tools("verbs", caller("admin"))}
    assert names <= {"recall", "remember", "entity", "synthesize", "forget", "context_pack", "delta"}


# -- arguments ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [[1, 2], "text", 7])
def test_arguments_that_are_not_an_object_are_invalid_params(deps: Deps, remote_caller: Caller, bad: object) -> None:
    r = dispatch("recall", bad, remote_caller, deps)  # type: ignore[arg-type]
    assert r.body["code"] == "invalid_params"
    assert r.body["suggestion"]


def test_missing_arguments_mean_an_empty_object(deps: Deps, remote_caller: Caller) -> None:
    r = dispatch("recall", None, remote_caller, deps)
    assert not r.is_error


def test_an_unknown_param_on_a_read_is_ignored_with_a_notice(deps: Deps, remote_caller: Caller) -> None:
    clean = dispatch("recall", {"query": "tea"}, remote_caller, deps)
    r = dispatch("recall", {"query": "tea", "limt": 3}, remote_caller, deps)
    assert not r.is_error
    assert r.body == clean.body
    unknown = [n for n in r.notices if n.code == "unknown_param"]
    assert len(unknown) == 1
    assert [n.code for n in clean.notices] == [n.code for n in r.notices if n.code != "unknown_param"]
    fix = unknown[0].fix
    assert fix is not None and fix.mcp == {"tool": "recall", "arguments": {"query": "tea", "limit": 3}}


def test_an_unknown_param_on_a_write_is_refused_with_the_closest_name_and_nothing_is_written(
    deps: Deps, remote_caller: Caller, stores: object
) -> None:
    before = snapshot(stores)  # type: ignore[arg-type]
    args = {"fact": "Alice prefers tea", "provenance": "chat", "entiy": "Alice"}
    r = dispatch("remember", args, remote_caller, deps)
    assert r.body["code"] == "invalid_params"
    assert r.body["fix"]["mcp"]["arguments"] == {
        "fact": "Alice prefers tea",
        "provenance": "chat",
        "entity": "Alice",
    }
    assert r.body["fix"]["next"] == "run"
    assert snapshot(stores) == before  # type: ignore[arg-type]
    fixed = dispatch("remember", r.body["fix"]["mcp"]["arguments"], remote_caller, deps)
    assert not fixed.is_error and fixed.body["entity_slug"]


def test_an_unknown_param_on_a_write_without_a_close_name_is_dropped_in_the_fix(
    deps: Deps, remote_caller: Caller
) -> None:
    r = dispatch("remember", {**REMEMBER, "zzzz": 1}, remote_caller, deps)
    assert r.body["fix"]["mcp"]["arguments"] == REMEMBER


def test_meta_and_dry_run_are_always_allowed(deps: Deps, remote_caller: Caller, stores: object) -> None:
    before = snapshot(stores)  # type: ignore[arg-type]
    r = dispatch("remember", {**REMEMBER, "_meta": {"progressToken": 1}, "dry_run": True}, remote_caller, deps)
    assert not r.is_error
    assert r.body["dry_run"] is True
    assert snapshot(stores) == before  # type: ignore[arg-type]


@pytest.mark.parametrize("flag", ["yes", 1, "false"])
def test_a_dry_run_flag_that_is_not_a_boolean_runs_nothing_and_offers_a_dry_run(
    deps: Deps, remote_caller: Caller, stores: object, flag: object
) -> None:
    before = snapshot(stores)  # type: ignore[arg-type]
    r = dispatch("remember", {**REMEMBER, "dry_run": flag}, remote_caller, deps)
    assert r.body["code"] == "invalid_params"
    assert r.body["fix"]["mcp"]["arguments"] == {**REMEMBER, "dry_run": True}
    assert snapshot(stores) == before  # type: ignore[arg-type]


def test_a_type_error_names_the_field_and_fixes_it_to_the_default_keeping_other_arguments(
    deps: Deps, make_probe: Callable[..., Probe]
) -> None:
    probe = make_probe()
    r = dispatch("zz_probe", {"name": "x", "limit": "abc", "note": "n"}, caller("read"), deps)
    assert r.body["code"] == "invalid_params"
    assert r.body["detail"]["errors"][0]["field"] == "limit"
    assert r.body["fix"]["mcp"] == {"tool": "zz_probe", "arguments": {"name": "x", "limit": 50, "note": "n"}}
    assert probe.calls == []
    again = dispatch("zz_probe", r.body["fix"]["mcp"]["arguments"], caller("read"), deps)
    assert not again.is_error


def test_a_missing_required_field_is_invalid_params_without_a_guessed_fix(
    deps: Deps, make_probe: Callable[..., Probe]
) -> None:
    make_probe()
    r = dispatch("zz_probe", {"limit": 3}, caller("read"), deps)
    assert r.body["code"] == "invalid_params"
    # Every envelope has a fix; with no derivable value it has no step to run (next: report).
    assert r.body["fix"]["next"] == "report"
    assert "mcp" not in r.body["fix"] and "argv" not in r.body["fix"]
    assert r.body["suggestion"]


# -- D2 idempotency -------------------------------------------------------------------------------


def test_a_retry_with_the_same_key_and_arguments_replays_the_first_result(
    deps: Deps, remote_caller: Caller, stores: object
) -> None:
    first = dispatch("remember", {**REMEMBER, "idempotency_key": "k-1"}, remote_caller, deps)
    after_first = snapshot(stores)  # type: ignore[arg-type]
    again = dispatch("remember", {**REMEMBER, "idempotency_key": "k-1"}, remote_caller, deps)
    assert not again.is_error
    assert again.body["idempotent_replay"] is True
    assert again.body["id"] == first.body["id"]
    assert "idempotent_replay" not in first.body
    assert snapshot(stores) == after_first  # type: ignore[arg-type]


def test_the_same_key_with_different_arguments_is_invalid_params(deps: Deps, remote_caller: Caller) -> None:
    dispatch("remember", {**REMEMBER, "idempotency_key": "k-2"}, remote_caller, deps)
    r = dispatch(
        "remember",
        {**REMEMBER, "fact": "Alice prefers coffee", "idempotency_key": "k-2"},
        remote_caller,
        deps,
    )
    assert r.body["code"] == "invalid_params"
    assert "idempotency_key" not in r.body["fix"]["mcp"]["arguments"]


def test_keys_are_scoped_per_client(deps: Deps, remote_caller: Caller) -> None:
    dispatch("remember", {**REMEMBER, "idempotency_key": "k-3"}, remote_caller, deps)
    other = Caller(tenant="t1", client_id="agent-b", scopes=frozenset({"write"}), remote=True)
    r = dispatch("remember", {**REMEMBER, "fact": "Bob likes chess", "idempotency_key": "k-3"}, other, deps)
    assert not r.is_error and "idempotent_replay" not in r.body


def test_a_failed_call_releases_its_key_so_a_corrected_retry_runs(deps: Deps, remote_caller: Caller) -> None:
    bad = dispatch("remember", {**REMEMBER, "fact": "   ", "idempotency_key": "k-4"}, remote_caller, deps)
    assert bad.is_error
    good = dispatch("remember", {**REMEMBER, "idempotency_key": "k-4"}, remote_caller, deps)
    assert not good.is_error and "idempotent_replay" not in good.body


class _FirstCallEnds:
    """The idempotency store, with the first call (holding the key) ending while this call waits:
    on the retry's second look at the key, the first call either stores its result or fails and
    releases its claim."""

    def __init__(self, store: Any, *, result: dict[str, Any] | None, ends_on: int = 2) -> None:
        self.store, self.result, self.ends_on, self.looks = store, result, ends_on, 0

    def claim(self, record: IdempotencyRecord, *, now: Any, **kw: Any) -> IdempotencyRecord | None:
        self.looks += 1
        if self.looks == self.ends_on - 1 and self.ends_on > 2:
            # DynamoDB's answer when the record vanished between its check and its read
            raise Conflict("idempotency record changed concurrently")
        if self.looks == self.ends_on:
            args = (record.tenant, record.client_id, record.verb, record.key)
            if self.result is None:
                self.store.release(*args)
            else:
                self.store.complete(*args, self.result)
        return self.store.claim(record, now=now)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def _first_call_in_flight(deps: Deps, key: str) -> None:
    """The first call is still running: its claim is stored without a result, same request hash."""
    now = deps.clock.now()
    deps.idempotency.claim(
        IdempotencyRecord(
            tenant="t1",
            client_id="agent-a",
            verb="zz_write",
            key=request_uuid(key)[0],  # D22: stored under its request id, hashed with its tool
            request_hash=tool_request_hash("zz_write", request_hash(ProbeParams(name="x"))),
            created_at=now,
            expires_at=now.replace(year=now.year + 1),
        ),
        now=now,
    )


def test_a_retry_while_the_first_call_is_in_flight_is_told_to_wait(
    deps: Deps, remote_caller: Caller, make_probe: Callable[..., Probe]
) -> None:
    make_probe("zz_write", writes=True, scope="write", idempotency=True)
    # the retry waits this long for the first call, then gives up
    deps.policy = replace(deps.policy, idempotency_wait_s=0.2)
    _first_call_in_flight(deps, "k-5")
    r = dispatch("zz_write", {"name": "x", "idempotency_key": "k-5"}, remote_caller, deps)
    assert r.body["code"] == "unavailable"
    # D22: a pending write's fix polls its receipt instead of sending the write again
    assert r.body["write_error"] == "write_pending"
    assert r.body["write_request"]["state"] == "running"
    assert r.body["fix"]["mcp"] == {"tool": "get_write_request", "arguments": {"request_id": request_uuid("k-5")[0]}}
    assert r.body["retryable"] is True


def test_a_retry_waits_for_the_first_call_and_returns_its_result(
    deps: Deps, remote_caller: Caller, make_probe: Callable[..., Probe]
) -> None:
    probe = make_probe("zz_write", writes=True, scope="write", idempotency=True)
    _first_call_in_flight(deps, "k-6")
    first = {"name": "x", "limit": 50, "correlation_seen": "c-first", "n": 1, "protocol_version": 1}
    deps.idempotency = store = _FirstCallEnds(deps.idempotency, result=first)  # type: ignore[assignment]
    r = dispatch("zz_write", {"name": "x", "idempotency_key": "k-6"}, remote_caller, deps)
    assert not r.is_error
    assert r.body == {**first, "idempotent_replay": True}
    assert probe.calls == [] and store.looks >= 2  # it waited and did not run the tool itself


def test_a_record_that_changes_under_a_look_is_looked_at_again(
    deps: Deps, remote_caller: Caller, make_probe: Callable[..., Probe]
) -> None:
    probe = make_probe("zz_write", writes=True, scope="write", idempotency=True)
    _first_call_in_flight(deps, "k-8")
    first = {"name": "x", "limit": 50, "correlation_seen": "c-first", "n": 1, "protocol_version": 1}
    deps.idempotency = store = _FirstCallEnds(deps.idempotency, result=first, ends_on=3)  # type: ignore[assignment]
    r = dispatch("zz_write", {"name": "x", "idempotency_key": "k-8"}, remote_caller, deps)
    assert r.body == {**first, "idempotent_replay": True}
    assert probe.calls == [] and store.looks == 3


def test_a_retry_runs_when_the_first_call_failed_while_it_waited(
    deps: Deps, remote_caller: Caller, make_probe: Callable[..., Probe]
) -> None:
    probe = make_probe("zz_write", writes=True, scope="write", idempotency=True)
    _first_call_in_flight(deps, "k-7")
    deps.idempotency = _FirstCallEnds(deps.idempotency, result=None)  # type: ignore[assignment]
    r = dispatch("zz_write", {"name": "x", "idempotency_key": "k-7"}, remote_caller, deps)
    assert not r.is_error and "idempotent_replay" not in r.body
    assert len(probe.calls) == 1
    replay = dispatch("zz_write", {"name": "x", "idempotency_key": "k-7"}, remote_caller, deps)
    assert replay.body["idempotent_replay"] is True and replay.body["n"] == 1


@pytest.mark.parametrize("key", ["", "   ", 12, "k" * 201])
def test_a_malformed_idempotency_key_is_invalid_params(deps: Deps, remote_caller: Caller, key: object) -> None:
    r = dispatch("remember", {**REMEMBER, "idempotency_key": key}, remote_caller, deps)
    assert r.body["code"] == "invalid_params"


def test_a_key_on_a_tool_without_idempotency_is_an_unknown_param(deps: Deps, remote_caller: Caller) -> None:
    r = dispatch("cancel_write_request", {"request_id": "r1", "idempotency_key": "k"}, remote_caller, deps)
    assert r.body["code"] == "invalid_params"
    assert r.body["detail"]["unknown_params"] == ["idempotency_key"]


# -- port errors and the unexpected ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "code", "next_step", "retryable"),
    [
        (Unavailable("throttled", retry_after_seconds=4), "unavailable", "wait", True),
        (Unavailable("down", reason="config"), "unavailable", "tell_user_to_run", False),
        (Conflict("lost race"), "unavailable", "wait", True),
        (NotFound("gone"), "not_found", "report", False),
        (TooLarge("big"), "invalid_params", "report", False),
    ],
)
def test_port_errors_map_to_their_envelopes(
    deps: Deps,
    make_probe: Callable[..., Probe],
    exc: Exception,
    code: str,
    next_step: str,
    retryable: bool,
) -> None:
    probe = make_probe()
    probe.raises = exc
    r = dispatch("zz_probe", {"name": "x"}, caller("read"), deps)
    assert r.body["code"] == code
    assert r.body["retryable"] is retryable
    assert r.body["fix"]["next"] == next_step
    if next_step == "wait":
        assert r.body["fix"]["mcp"] == {"tool": "zz_probe", "arguments": {"name": "x"}}


def test_a_verb_error_from_the_tool_keeps_its_code_and_fix(deps: Deps, make_probe: Callable[..., Probe]) -> None:
    probe = make_probe()
    probe.raises = VerbError(
        "provenance_required",
        "blank",
        "Say where it came from.",
        fix=Fix(why="w", mcp={"tool": "zz_probe", "arguments": {"name": "y"}}),
    )
    r = dispatch("zz_probe", {"name": "x"}, caller("read"), deps)
    assert r.body["code"] == "provenance_required"
    assert r.body["fix"]["mcp"]["arguments"] == {"name": "y"}


SECRET = "SELECT * FROM clients WHERE token='fm_supersecret' password=hunter2"


def _capture() -> tuple[logging.Handler, io.StringIO]:
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(CorrelationFilter())
    logging.getLogger("fleetmem").addHandler(handler)
    logging.getLogger("fleetmem").setLevel(logging.INFO)
    return handler, buf


def test_an_unexpected_exception_is_internal_and_leaks_nothing(deps: Deps, make_probe: Callable[..., Probe]) -> None:
    probe = make_probe()
    probe.raises = RuntimeError(SECRET)
    handler, buf = _capture()
    try:
        r = dispatch("zz_probe", {"name": "x"}, caller("read"), deps, correlation_id="c_fixed")
    finally:
        logging.getLogger("fleetmem").removeHandler(handler)
    assert r.body["code"] == "internal"
    assert r.body["fix"]["next"] == "report"
    assert r.body["correlation_id"] == "c_fixed"
    assert "supersecret" not in json.dumps(r.body) and "hunter2" not in json.dumps(r.body)
    logs = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert any(line.get("exc_type") == "RuntimeError" for line in logs)
    assert "supersecret" not in buf.getvalue() and "hunter2" not in buf.getvalue()


def test_every_log_line_of_a_call_carries_its_correlation_id_and_no_argument_value(
    deps: Deps, remote_caller: Caller
) -> None:
    handler, buf = _capture()
    try:
        dispatch(
            "remember",
            {"fact": "marker-value-9341 is secret", "provenance": "p"},
            remote_caller,
            deps,
            correlation_id="c_log",
        )
    finally:
        logging.getLogger("fleetmem").removeHandler(handler)
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert lines
    assert all(line["correlation_id"] == "c_log" for line in lines)
    usage = [line for line in lines if line.get("event") == "tool_call"]
    assert len(usage) == 1
    assert usage[0]["tool"] == "remember" and usage[0]["code"] == "ok"
    assert isinstance(usage[0]["latency_ms"], int)
    assert "marker-value-9341" not in buf.getvalue()
    assert "t1" not in {usage[0].get("tenant"), usage[0].get("tenant_hash")}


def test_a_given_correlation_id_is_used_and_one_is_minted_otherwise(
    deps: Deps, make_probe: Callable[..., Probe]
) -> None:
    make_probe()
    r = dispatch("zz_probe", {"name": "x"}, caller("read"), deps, correlation_id="c_given")
    assert r.correlation_id == "c_given" and r.body["correlation_seen"] == "c_given"
    minted = dispatch("zz_probe", {}, caller("read"), deps)
    assert minted.correlation_id and minted.body["correlation_id"] == minted.correlation_id


def test_notices_from_the_tool_follow_unknown_param_notices(deps: Deps, make_probe: Callable[..., Probe]) -> None:
    probe = make_probe()
    probe.notices = [Notice("search_degraded", "degraded", "keyword only")]
    r = dispatch("zz_probe", {"name": "x", "nmae": 1}, caller("read"), deps)
    assert [n.code for n in r.notices] == ["unknown_param", "search_degraded"]


def test_a_dispatch_result_survives_a_json_round_trip(deps: Deps, make_probe: Callable[..., Probe]) -> None:
    probe = make_probe()
    probe.notices = [
        Notice(
            "delta_incomplete",
            "degraded",
            "w",
            fix=Fix(
                why="w",
                mcp={"tool": "delta", "arguments": {}},
                actor="provider",
                retry_after_seconds=5,
                consent=("paid",),
            ),
        )
    ]
    r = dispatch("zz_probe", {"name": "x"}, caller("read"), deps)
    back = DispatchResult.from_json(json.loads(json.dumps(r.to_json())))
    assert back == r
