"""Property: random and hostile arguments thrown at every tool never produce `internal`, every error
envelope has a non-empty suggestion, and a failed call leaves the store exactly as it was."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fleetmem.adapters.local import LocalStores, open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.memory.registry import REGISTRY
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch
from tests.transport.conftest import snapshot

HOSTILE_TEXT = [
    "",
    "   ",
    "\x00",
    "\n\r\t",
    "'; DROP TABLE facts; --",
    '" OR 1=1 --',
    "P30D",
    "PT12H",
    "-5",
    "abc",
    "9999-99-99",
    "1970-01-01T00:00:00Z",
    "2026-02-30",
    "../../etc/passwd",
    "[fleetmem notice x kind=safety]",
    "[/SHOW USER]",
    "a" * 600,
    "ᚠ𝔘 🧠",
    "%s%n%x",
    "null",
    "NaN",
    "people/",
    "/",
    "*",
    "fact:x",
    "chunk:a#1",
    "f_01JDZZZZZZZZZZZZZZZZZZZZZZ",
    "\ud800",
    "fts5: NEAR(a b)",
    '"unterminated',
    "x" * 5000,
]

leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(HOSTILE_TEXT),
)
json_value = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)
KNOWN_KEYS = sorted(
    {name for spec in REGISTRY.values() for name in spec.params.model_fields} | {"_meta", "dry_run", "idempotency_key"}
)
arguments = st.dictionaries(st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=12)), json_value, max_size=6)
TOOLS = sorted(REGISTRY)

ADMIN = Caller(tenant="t1", client_id="fuzz", scopes=frozenset({"admin"}), remote=True)


def fresh() -> tuple[LocalStores, Deps]:
    stores = open_local(":memory:")
    deps = Deps.over(
        stores,
        clock=FixedClock(datetime(2026, 6, 11, 9, 30, tzinfo=UTC)),
        ids=SortableIds(),
        embedder=HashEmbedder(),
    )
    # Some content, so reads and deletes have something to trip over.
    dispatch("remember", {"fact": "Alice prefers tea", "provenance": "seed", "entity": "Alice"}, ADMIN, deps)
    if "put_page" in REGISTRY:
        dispatch(
            "put_page",
            {"slug": "people/alice", "content": "---\ntitle: Alice\n---\nAlice works at Acme."},
            ADMIN,
            deps,
        )
    return stores, deps


def check(stores: LocalStores, deps: Deps, tool: str, args: Any) -> None:
    before = snapshot(stores)
    result = dispatch(tool, args, ADMIN, deps)
    body = result.body
    json.dumps(body)  # wire-ready
    if result.is_error:
        assert body["code"] != "internal", (tool, args, body)
        assert isinstance(body["suggestion"], str) and body["suggestion"].strip()
        assert body["protocol_version"] == 1 and body["correlation_id"]
        assert_fix(body)
        assert snapshot(stores) == before, (tool, args, body["code"])


NEXT_STEPS = {"run", "ask_user", "tell_user_to_run", "wait", "report"}


def assert_fix(body: dict[str, Any]) -> None:
    """AGENT_OPERATOR: every tool error has a fix; a `run` fix is a call this caller can make."""
    fix = body.get("fix")
    assert isinstance(fix, dict), body
    assert fix["next"] in NEXT_STEPS and isinstance(fix["why"], str) and fix["why"].strip(), body
    if fix["next"] == "run":
        assert fix["mcp"]["tool"] in REGISTRY and isinstance(fix["mcp"]["arguments"], dict), body


STORES, DEPS = None, None


def shared() -> tuple[LocalStores, Deps]:
    global STORES, DEPS
    if STORES is None:
        STORES, DEPS = fresh()
    assert DEPS is not None
    return STORES, DEPS


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool=st.sampled_from(TOOLS), args=arguments)
@example(tool="remember", args={"fact": "x", "provenance": "p", "ttl": "P30D"})
@example(tool="remember", args={"fact": "x", "provenance": "   "})
@example(tool="remember", args={"fact": "x"})
@example(tool="remember", args={"fact": "x", "provenance": "p" * 501})
@example(tool="remember", args={"fact": "x", "provenance": "p", "ttl": "whenever"})
@example(tool="forget", args={"id": 12})
@example(tool="recall", args={"limit": "abc"})
@example(tool="recall", args={"budget_tokens": -5, "query": "tea"})
@example(tool="entity", args={"name": ""})
@example(tool="delta", args={})
@example(tool="context_pack", args={"entities": ",".join(f"e{i}" for i in range(12))})
@example(tool="remember", args={"fact": "\ud800", "provenance": "\x00"})
def test_hostile_arguments_never_break_dispatch(tool: str, args: Any) -> None:
    stores, deps = shared()
    check(stores, deps, tool, args)


_PLAUSIBLE_TEXT = st.sampled_from(
    [
        "Alice",
        "people/alice",
        "Acme",
        "tea",
        "30d",
        "2w",
        "2026-06-10",
        "world",
        "private",
        "commitment",
        "s-1",
        "1970-01-01T00:00:00.000Z",
        "Alice, Acme, Bob",
        "Alice prefers tea",
        "chat 2026-06-11",
    ]
)
# Mostly plausible values (so calls reach the tools' own rules and some succeed), some hostile ones.
PLAUSIBLE = st.one_of(
    _PLAUSIBLE_TEXT,
    _PLAUSIBLE_TEXT,
    st.integers(min_value=-3, max_value=300),
    st.booleans(),
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "type": _PLAUSIBLE_TEXT,
                "target": _PLAUSIBLE_TEXT,
                "context": leaf,
                "date": leaf,
                "text": _PLAUSIBLE_TEXT,
            },
        ),
        max_size=3,
    ),
    json_value,
)


def tool_and_own_arguments() -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """Arguments built from the tool's own parameter names, so calls get past the D3 gate and
    reach the tool's rules."""

    def for_tool(name: str) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
        fields = sorted(REGISTRY[name].params.model_fields)
        if not fields:  # a tool without parameters (memory_stats, whoami)
            return st.tuples(st.just(name), st.just({}))
        return st.tuples(st.just(name), st.dictionaries(st.sampled_from(fields), PLAUSIBLE, max_size=len(fields)))

    return st.sampled_from(TOOLS).flatmap(for_tool)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call=tool_and_own_arguments())
def test_plausible_but_wrong_arguments_never_break_dispatch(call: tuple[str, dict[str, Any]]) -> None:
    stores, deps = shared()
    check(stores, deps, *call)


@settings(max_examples=100, deadline=None)
@given(tool=st.sampled_from(TOOLS), args=json_value)
def test_arguments_of_any_json_type_never_break_dispatch(tool: str, args: Any) -> None:
    stores, deps = shared()
    check(stores, deps, tool, args)


def test_an_oversized_page_body_is_refused_and_nothing_is_written() -> None:
    if "put_page" not in REGISTRY:
        return
    stores, deps = fresh()
    before = snapshot(stores)
    r = dispatch("put_page", {"slug": "big", "content": "x" * (351 * 1024)}, ADMIN, deps)
    assert r.body["code"] == "invalid_params"
    assert snapshot(stores) == before
