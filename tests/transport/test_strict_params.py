"""One strict rule for every parameter of every tool (docs/protocol.md, D18).

Driven from the registry's input schemas, so a tool or parameter added later is covered too: an
integer is a JSON integer within the `minimum`/`maximum` its schema advertises, a boolean is a JSON
boolean; anything else is `invalid_params` whose fix is the nearest valid value when that is
unambiguous. Also: delta positions past 64 bits (SQLite and DynamoDB Local + OpenSearch), an answer
whose size does not grow with the unknown keys of a request (MCP and `/v1` over real HTTP), the
TTL's ASCII digits and maximum, fixes that never invent a time, and list_pages' limit and cursor.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.memory.common import DEFAULT_BUDGET_FIX, MAX_BUDGET_TOKENS, MAX_POSITION
from fleetmem.memory.registry import REGISTRY, unbounded_integers
from fleetmem.memory.ttl import MAX_TTL_DAYS
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.timefmt import to_ms
from fleetmem.transport.dispatch import dispatch
from tests.mcp.conftest import data_dir, file_stores, http_deps, serve, server_url, tokens  # noqa: F401
from tests.transport.test_param_hints import BASE
from tests.unit.domain.delta_backends import BACKENDS, open_deps

ADMIN = Caller(tenant="t1", client_id="agent-a", scopes=frozenset({"admin"}), remote=True)
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
#: The one parameter the spec clamps instead of refusing (PROTOCOL_NOTES §5: recall limit 1..100).
CLAMPED = {("recall", "limit")}
#: An answer's size bound, whatever the request.
ANSWER_BYTES_MAX = 20_000


def _typed(kind: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (tool, name, prop)
        for tool, spec in sorted(REGISTRY.items())
        for name, prop in sorted(spec.input_schema()["properties"].items())
        if prop.get("type") == kind
    ]


INTEGERS = _typed("integer")
BOOLEANS = _typed("boolean")


def call(deps: Deps, tool: str, **args: Any) -> Any:
    return dispatch(tool, {**BASE[tool], **args}, ADMIN, deps)


def refused(deps: Deps, tool: str, **args: Any) -> dict[str, Any]:
    r = call(deps, tool, **args)
    assert r.is_error, f"{tool} {args} was accepted"
    assert r.body["code"] == "invalid_params", r.body
    return r.body


def fixed_args(body: dict[str, Any]) -> dict[str, Any] | None:
    fix = body["fix"]
    return fix["mcp"]["arguments"] if fix["next"] == "run" else None


# -- integers -------------------------------------------------------------------------------------


def test_the_walk_finds_the_typed_parameters_and_every_integer_is_bounded_in_its_schema() -> None:
    assert {(t, n) for t, n, _ in INTEGERS} >= {
        ("recall", "limit"),
        ("recall", "budget_tokens"),
        ("delta", "since_page_seq"),
        ("delta", "since_fact_seq"),
        ("list_pages", "limit"),
        ("context_pack", "budget_tokens"),
    }
    assert {(t, n) for t, n, _ in BOOLEANS} >= {
        ("recall", "include_expired"),
        ("recall", "include_private"),
        ("purge_fact", "dry_run"),
    }
    for tool, spec in REGISTRY.items():
        assert unbounded_integers(spec.input_schema()) == [], tool


def test_an_unbounded_integer_parameter_cannot_be_registered() -> None:
    from pydantic import Field

    from fleetmem.memory.params import Params
    from fleetmem.memory.registry import ToolSpec, register

    class Loose(Params):
        count: int | None = Field(None)

    spec = ToolSpec(
        name="zz_loose",
        description="x",
        params=Loose,
        run=lambda *a: None,
        result=Loose,  # type: ignore[arg-type]
        scope="read",
        surface="full",
        writes=False,
    )
    with pytest.raises(ValueError, match="count"):
        register(spec)
    assert "zz_loose" not in REGISTRY


@pytest.mark.parametrize(("tool", "name", "prop"), INTEGERS, ids=[f"{t}.{n}" for t, n, _ in INTEGERS])
def test_an_integer_past_its_bounds_is_invalid_params_never_internal(
    deps: Deps, tool: str, name: str, prop: dict[str, Any]
) -> None:
    lo, hi = prop["minimum"], prop["maximum"]
    for value, nearest in ((2**64, hi), (hi + 1, hi), (-(2**64), lo), (lo - 1, lo)):
        if (tool, name) in CLAMPED:
            r = call(deps, tool, **{name: value})
            assert not r.is_error and "clamped" in [n.code for n in r.notices], r.body
            continue
        body = refused(deps, tool, **{name: value})
        assert f"from {lo} to {hi}" in body["message"]
        fixed = fixed_args(body)
        if name == "budget_tokens" and value < lo:
            nearest = DEFAULT_BUDGET_FIX  # 0 or less says nothing about the size meant (D4)
        if fixed is not None and name in fixed:
            assert fixed[name] == nearest
        elif fixed is not None:
            assert name not in fixed  # a position is dropped: no other number was ever handed out
    assert not call(deps, tool, **{name: hi}).is_error
    assert not call(deps, tool, **{name: lo}).is_error


@pytest.mark.parametrize(("tool", "name", "prop"), INTEGERS, ids=[f"{t}.{n}" for t, n, _ in INTEGERS])
def test_an_integer_must_be_a_json_integer(deps: Deps, tool: str, name: str, prop: dict[str, Any]) -> None:
    lo = prop["minimum"]
    for value, nearest in ((lo + 1.5, lo + 1), (str(lo + 2), lo + 2), ("٣", None), (True, None), ([lo], None)):
        body = refused(deps, tool, **{name: value})
        fixed = fixed_args(body)
        if nearest is not None and fixed is not None and name in fixed:
            assert fixed[name] == nearest
        if fixed is not None:
            assert not dispatch(tool, fixed, ADMIN, deps).is_error, f"the fix of {tool}.{name}={value!r}"
    # JSON does not tell 3 from 3.0: a number without a fraction is that integer
    assert not call(deps, tool, **{name: float(lo + 1)}).is_error


def test_the_reported_defects_one_by_one(deps: Deps) -> None:
    for i in range(3):
        assert not call(deps, "remember", fact=f"Walrus fact number {i} of {i + 7}").is_error
    # limit 1.5 returned 2 facts; now refused like budget_tokens 2.5, each with a rounded-down fix
    assert fixed_args(refused(deps, "recall", limit=1.5)) == {"limit": 1}
    assert fixed_args(refused(deps, "recall", budget_tokens=2.5)) == {"budget_tokens": 2}
    assert fixed_args(refused(deps, "recall", budget_tokens=2**64)) == {"budget_tokens": MAX_BUDGET_TOKENS}
    r = dispatch("delta", {"since": "2000-01-01", "since_page_seq": 2**64}, ADMIN, deps)  # was internal
    assert r.body["code"] == "invalid_params" and fixed_args(r.body) == {"since": "2000-01-01"}


# -- booleans -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tool", "name", "prop"), BOOLEANS, ids=[f"{t}.{n}" for t, n, _ in BOOLEANS])
def test_a_boolean_must_be_a_json_boolean(deps: Deps, tool: str, name: str, prop: dict[str, Any]) -> None:
    for value, plain in (("yes", True), ("true", True), ("False", False), (1, True), (0, False)):
        body = refused(deps, tool, **{name: value})
        assert fixed_args(body) == {**BASE[tool], name: plain}, (value, body["fix"])
    for value in ("maybe", 2, {"on": True}):
        body = refused(deps, tool, **{name: value})
        assert body["fix"]["next"] == "report" and "mcp" not in body["fix"]  # false would be a guess
    assert call(deps, tool, **{name: False}).body.get("code") != "invalid_params"


def test_include_expired_yes_is_refused_as_dry_run_true_is(deps: Deps) -> None:
    assert refused(deps, "recall", include_expired="yes")["fix"]["mcp"]["arguments"] == {"include_expired": True}
    assert refused(deps, "recall", dry_run="true")["fix"]["mcp"]["arguments"] == {"dry_run": True}


# -- delta positions on both adapter sets ----------------------------------------------------------


@pytest.fixture
def real_clock() -> FixedClock:
    return FixedClock(to_ms(datetime.now(UTC)))  # DynamoDB Local expires cursors on the wall clock


@pytest.fixture(params=BACKENDS)
def bdeps(request: pytest.FixtureRequest, real_clock: FixedClock) -> Any:
    with open_deps(request.param, request, real_clock) as d:
        yield d


def test_delta_positions_past_64_bits_are_invalid_params_and_the_largest_valid_one_runs(bdeps: Any) -> None:
    caller = Caller(tenant="t-" + uuid.uuid4().hex[:12], client_id="a", scopes=frozenset({"read", "write"}))
    assert not dispatch("remember", {"fact": "Delta bound fact", "provenance": "p"}, caller, bdeps).is_error
    for field in ("since_page_seq", "since_fact_seq"):
        for value in (2**64, 2**63, MAX_POSITION + 1, -1):
            r = dispatch("delta", {"since": "1970-01-01", field: value}, caller, bdeps)
            assert r.is_error and r.body["code"] == "invalid_params", (field, value, r.body)
            assert r.body["fix"]["mcp"]["arguments"] == {"since": "1970-01-01"}
        # the bound itself reaches the store and answers (nothing is after it)
        r = dispatch("delta", {"since": "1970-01-01", field: MAX_POSITION}, caller, bdeps)
        assert not r.is_error, r.body
    r = dispatch(
        "delta",
        {"since": "1970-01-01", "since_page_seq": MAX_POSITION, "since_fact_seq": MAX_POSITION},
        caller,
        bdeps,
    )
    assert not r.is_error and r.body["pages"] == [] and r.body["facts"] == []


# -- amplification: one notice, a bounded answer -----------------------------------------------------


MANY = 50_000


def test_fifty_thousand_unknown_keys_on_a_read_give_one_notice_naming_a_few_and_the_count(deps: Deps) -> None:
    args = {f"zz_unknown_{i}": i for i in range(MANY)}
    r = dispatch("recall", {"limt": 3, **args}, ADMIN, deps)  # the first names get a closest-name hint
    assert not r.is_error
    unknown = [n for n in r.notices if n.code == "unknown_param"]
    assert len(unknown) == 1
    assert f"{MANY + 1} unknown parameters" in unknown[0].why and "`zz_unknown_0`" in unknown[0].why
    assert "zz_unknown_49999" not in unknown[0].why
    assert "did you mean `limit` for `limt`" in unknown[0].why
    assert unknown[0].fix is not None and unknown[0].fix.mcp == {"tool": "recall", "arguments": {"limit": 3}}


def test_fifty_thousand_unknown_keys_on_a_write_are_named_a_few_and_counted(deps: Deps) -> None:
    args = {f"zz_unknown_{i}": i for i in range(MANY)}
    body = dispatch("remember", {"fact": "x y", "provenance": "p", **args}, ADMIN, deps).body
    assert body["code"] == "invalid_params"
    assert body["detail"]["unknown_count"] == MANY and len(body["detail"]["unknown_params"]) == 10
    assert body["fix"]["mcp"]["arguments"] == {"fact": "x y", "provenance": "p"}
    assert len(json.dumps(body)) < ANSWER_BYTES_MAX


def _post(url: str, token: str, payload: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        url,
        content=json.dumps(payload).encode(),
        timeout=120,
        headers={**HEADERS, "Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )


@pytest.mark.parametrize("tool", ["recall", "remember"])
def test_an_answer_stays_small_whatever_the_unknown_keys_over_mcp_and_v1(
    server_url: str,
    tokens: dict[str, str],
    tool: str,
) -> None:
    args = {**BASE[tool], **{f"zz_unknown_{i}": "v" for i in range(MANY)}}
    assert len(json.dumps(args)) > 800_000  # the reported request: ~828 KB
    mcp = _post(
        server_url + "/mcp",
        tokens["write"],
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}},
    )
    assert mcp.status_code == 200, mcp.text[:500]
    assert len(mcp.content) < ANSWER_BYTES_MAX
    result = mcp.json()["result"]
    assert result.get("isError", False) is (tool == "remember")
    if tool == "recall":
        assert [n["code"] for n in result["structuredContent"]["notices"]].count("unknown_param") == 1
    v1 = _post(f"{server_url}/v1/{tool}", tokens["write"], args)
    assert v1.status_code == (400 if tool == "remember" else 200)
    assert len(v1.content) < ANSWER_BYTES_MAX
    if tool == "recall":
        assert [n["code"] for n in v1.json()["notices"]].count("unknown_param") == 1


def test_v1_answers_a_position_past_64_bits_with_400_not_500(
    server_url: str,
    tokens: dict[str, str],
) -> None:
    r = _post(f"{server_url}/v1/delta", tokens["read"], {"since": "2000-01-01", "since_page_seq": 2**64})
    assert r.status_code == 400 and r.json()["code"] == "invalid_params"
    r = _post(f"{server_url}/v1/list_pages", tokens["read"], {"cursor": "garbage!!"})
    assert r.status_code == 400 and r.json()["fix"]["mcp"] == {"tool": "list_pages", "arguments": {}}


# -- ttl: ASCII digits, a maximum -----------------------------------------------------------------------


def remember_ttl(deps: Deps, ttl: str) -> dict[str, Any]:
    return dispatch("remember", {"fact": "Cache entry", "provenance": "p", "ttl": ttl}, ADMIN, deps).body


@pytest.mark.parametrize(("ttl", "ascii_ttl"), [("٣d", "3d"), ("۱۲h", "12h"), ("٢٠٢٧-٠١-٠١", "2027-01-01")])
def test_ttl_digits_are_ascii_only_and_the_fix_spells_the_same_ttl_in_ascii(
    deps: Deps, ttl: str, ascii_ttl: str
) -> None:
    body = remember_ttl(deps, ttl)
    assert body["code"] == "invalid_params" and "ASCII" in body["message"]
    assert body["fix"]["next"] == "run" and body["fix"]["mcp"]["arguments"]["ttl"] == ascii_ttl
    assert not dispatch("remember", body["fix"]["mcp"]["arguments"], ADMIN, deps).is_error


@pytest.mark.parametrize(
    "ttl",
    ["99999999999d", "999999999d", f"{MAX_TTL_DAYS + 1}d", "9" * 5000 + "s", "P99999999999D", "200 years", "5300w"],
)
def test_a_ttl_past_the_maximum_is_too_large_not_unreadable(deps: Deps, ttl: str) -> None:
    body = remember_ttl(deps, ttl)
    assert body["code"] == "invalid_params", body
    assert "too large" in body["message"] and f"{MAX_TTL_DAYS}d" in body["message"]
    assert "not a duration" not in body["message"]
    assert body["fix"]["next"] == "report" and "mcp" not in body["fix"]
    assert f"{MAX_TTL_DAYS}d" in body["fix"]["why"]


def test_the_longest_ttl_is_accepted(deps: Deps) -> None:
    assert "valid_until" in remember_ttl(deps, f"{MAX_TTL_DAYS}d")


# -- since: no invented time ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "field"),
    [
        ("recall", "since"),
        ("context_pack", "since"),
        ("delta", "since"),
        ("synthesize", "since"),
        ("synthesize", "until"),
    ],
)
@pytest.mark.parametrize("value", ["not a date", 1717000000, "٢٠٢٦-٠١-٠١"])
def test_an_unreadable_time_gets_no_run_fix_and_a_why_that_gives_the_format(
    deps: Deps, tool: str, field: str, value: Any
) -> None:
    body = refused(deps, tool, **{field: value})
    fix = body["fix"]
    assert fix["next"] == "report" and "mcp" not in fix, fix
    assert "ISO 8601" in fix["why"] and "2026-06-01" in fix["why"]
    assert "Next:" not in body["suggestion"]


# -- list_pages: limit and cursor -------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "nearest"), [(0, 1), (-3, 1), (1000, 200)])
def test_list_pages_refuses_an_out_of_range_limit_with_the_nearest_bound(deps: Deps, limit: int, nearest: int) -> None:
    assert fixed_args(refused(deps, "list_pages", limit=limit)) == {"limit": nearest}


@pytest.mark.parametrize("cursor", ["garbage!!", "zzzz", "people/alice", "eyJ4IjoxfQ"])
def test_a_cursor_list_pages_never_returned_is_refused_with_a_fix_that_starts_over(deps: Deps, cursor: str) -> None:
    body = refused(deps, "list_pages", cursor=cursor, type="person")
    assert body["fix"]["next"] == "run" and fixed_args(body) == {"type": "person"}


def test_list_pages_cursors_round_trip_to_the_end(deps: Deps) -> None:
    for slug in ("a/one", "a/two", "b/three"):
        assert not dispatch("put_page", {"slug": slug, "content": "Body."}, ADMIN, deps).is_error
    seen, cursor = [], None
    while True:
        body = call(deps, "list_pages", limit=1, **({"cursor": cursor} if cursor else {})).body
        seen += [p["slug"] for p in body["pages"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == ["a/one", "a/two", "b/three"]
