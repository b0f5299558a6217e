"""Every error path the one dispatch can produce answers with a `fix` (AGENT_OPERATOR, issue 8
item 10): the dispatch gates (surface, scope, argument shape, D3, validation, dry_run, idempotency),
each port error, the unexpected exception, and the verbs' own refusals. A fix whose `next` is `run`
is a call the caller can make; where no corrected call exists the fix has no step (`report`,
`tell_user_to_run` or `wait`). No rendered text ends a sentence with a doubled full stop."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from fleetmem.errors import Conflict, NotFound, TooLarge, Unavailable, VerbError
from fleetmem.memory.registry import REGISTRY
from fleetmem.models import Caller, IdempotencyRecord
from fleetmem.ports import Deps, Diagnostics
from fleetmem.protocol import request_uuid, tool_request_hash
from fleetmem.transport.dispatch import dispatch
from fleetmem.transport.idempotency import request_hash
from tests.transport.conftest import Probe, ProbeParams

NEXT_STEPS = {"run", "ask_user", "tell_user_to_run", "wait", "report"}
#: A doubled full stop that is not an ellipsis ("f_01JD...") or a range ("1..100").
DOUBLED_STOP = re.compile(r"(?<![.\d])\.\.(?![.\d])")


def who(*scopes: str, remote: bool = True) -> Caller:
    return Caller(tenant="t1", client_id="agent-a", scopes=frozenset(scopes), remote=remote)  # type: ignore[arg-type]


ADMIN = who("read", "write", "admin")


def assert_error_with_fix(body: dict[str, Any], code: str | None = None) -> dict[str, Any]:
    assert "code" in body, body
    if code is not None:
        assert body["code"] == code, body
    fix = body.get("fix")
    assert isinstance(fix, dict), f"{body['code']}: no fix in {body}"
    assert fix["next"] in NEXT_STEPS
    assert isinstance(fix["why"], str) and fix["why"].strip()
    assert fix["consent"] == [] or isinstance(fix["consent"], list)
    if fix["next"] == "run":
        assert fix["mcp"]["tool"] in REGISTRY and isinstance(fix["mcp"]["arguments"], dict)
    if fix["next"] == "wait":
        assert isinstance(fix["retry_after_seconds"], int)
    for text in (body["message"], body["suggestion"], fix["why"], fix.get("user_message") or ""):
        assert not DOUBLED_STOP.search(text), text
    return fix


# -- the dispatch's own gates ---------------------------------------------------------------------


GATES: list[tuple[str, str, Any, Caller, str, str | None]] = [
    # (id, tool, arguments, caller, code, expected next or None for "any")
    ("unknown tool, nothing close", "no_such_tool_at_all", {}, ADMIN, "unknown_tool", "report"),
    ("unknown tool, a close name", "recal", {"query": "x"}, ADMIN, "unknown_tool", "run"),
    ("scope denied", "remember", {"fact": "x", "provenance": "p"}, who("read"), "scope_denied", None),
    ("arguments not an object", "recall", ["query"], ADMIN, "invalid_params", "report"),
    ("unpaired surrogate", "recall", {"query": "\ud800"}, ADMIN, "invalid_params", "run"),
    (
        "unknown parameter on a write",
        "remember",
        {"fact": "x", "provenance": "p", "fakt": 1},
        ADMIN,
        "invalid_params",
        "run",
    ),
    ("missing required parameter", "forget", {}, ADMIN, "invalid_params", None),
    ("wrong type, derivable", "recall", {"include_expired": "maybe"}, ADMIN, "invalid_params", None),
    (
        "non-boolean dry_run",
        "remember",
        {"fact": "x", "provenance": "p", "dry_run": "yes"},
        ADMIN,
        "invalid_params",
        "run",
    ),
    (
        "bad idempotency key",
        "remember",
        {"fact": "x", "provenance": "p", "idempotency_key": ""},
        ADMIN,
        "invalid_params",
        "run",
    ),
]


@pytest.mark.parametrize(
    ("tool", "args", "caller", "code", "next_step"), [g[1:] for g in GATES], ids=[g[0] for g in GATES]
)
def test_each_dispatch_gate_answers_with_a_fix(
    deps: Deps, tool: str, args: Any, caller: Caller, code: str, next_step: str | None
) -> None:
    fix = assert_error_with_fix(dispatch(tool, args, caller, deps).body, code)
    if next_step is not None:
        assert fix["next"] == next_step


def test_a_hidden_tool_on_the_verbs_surface_has_a_fix(deps: Deps) -> None:
    body = dispatch("put_page", {"slug": "a/b", "content": "x"}, ADMIN, deps, surface="verbs").body
    assert assert_error_with_fix(body, "unknown_tool")["next"] == "tell_user_to_run"


def test_a_reused_idempotency_key_and_an_in_flight_one_have_fixes(deps: Deps, make_probe: Callable[..., Probe]) -> None:
    first = {"fact": "Alice likes tea", "provenance": "p", "idempotency_key": "k-1"}
    assert not dispatch("remember", first, ADMIN, deps).is_error
    other = dispatch("remember", {**first, "fact": "Bob likes coffee"}, ADMIN, deps).body
    assert assert_error_with_fix(other, "invalid_params")["next"] == "run"

    make_probe("zz_write", writes=True, scope="write", idempotency=True)
    # the retry waits this long for the first call, then gives up
    deps.policy = replace(deps.policy, idempotency_wait_s=0.2)
    now = deps.clock.now()
    deps.idempotency.claim(
        IdempotencyRecord(
            tenant="t1",
            client_id="agent-a",
            verb="zz_write",
            key=request_uuid("k-2")[0],  # D22: the key is stored as its request id
            request_hash=tool_request_hash("zz_write", request_hash(ProbeParams(name="x"))),
            created_at=now,
            expires_at=now.replace(year=now.year + 1),
        ),
        now=now,
    )
    busy = dispatch("zz_write", {"name": "x", "idempotency_key": "k-2"}, ADMIN, deps).body
    # D22: a write still running is write_pending; its fix polls the write's receipt
    fix = assert_error_with_fix(busy, "unavailable")
    assert busy["write_error"] == "write_pending" and busy["retryable"] is True
    assert fix["next"] == "run" and fix["mcp"]["tool"] == "get_write_request"


@pytest.mark.parametrize(
    ("raised", "code", "next_step"),
    [
        (Unavailable("throttled", retry_after_seconds=3), "unavailable", "wait"),
        (Unavailable("down", reason="config"), "unavailable", "tell_user_to_run"),
        (Conflict("lost"), "unavailable", "wait"),
        (NotFound("gone"), "not_found", "report"),
        (TooLarge("big"), "invalid_params", "report"),
        (RuntimeError("boom"), "internal", "report"),
        (VerbError("invalid_params", "A refusal without a fix.", "Do it differently."), "invalid_params", "report"),
    ],
)
def test_port_errors_the_unexpected_and_fixless_verb_errors_get_a_fix(
    deps: Deps, make_probe: Callable[..., Probe], raised: BaseException, code: str, next_step: str
) -> None:
    probe = make_probe()
    probe.raises = raised
    body = dispatch("zz_probe", {"name": "x"}, ADMIN, deps).body
    assert assert_error_with_fix(body, code)["next"] == next_step


# -- the verbs' own refusals ----------------------------------------------------------------------


VERB_ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("remember", {"fact": " ", "provenance": "p"}, "invalid_params"),
    ("remember", {"fact": "x"}, "invalid_params"),
    ("remember", {"fact": "x", "provenance": " "}, "provenance_required"),
    ("remember", {"fact": "x", "provenance": "p" * 501}, "invalid_params"),
    ("remember", {"fact": "x", "provenance": "p", "kind": "opinion"}, "invalid_params"),
    ("remember", {"fact": "x", "provenance": "p", "visibility": "public"}, "invalid_params"),
    ("remember", {"fact": "x", "provenance": "p", "ttl": "-5m"}, "invalid_params"),
    ("remember", {"fact": "x", "provenance": "p", "ttl": "1y"}, "invalid_params"),
    ("remember", {"fact": "x", "provenance": "p", "ttl": "forever"}, "invalid_params"),
    ("remember", {"fact": "x", "provenance": "p", "ttl": 12.5}, "invalid_params"),
    ("recall", {"budget_tokens": 0}, "invalid_params"),
    ("recall", {"limit": "ten"}, "invalid_params"),
    ("recall", {"since": "yesterday"}, "invalid_params"),
    ("entity", {"name": " "}, "invalid_params"),
    ("forget", {"id": 12}, "invalid_params"),
    ("forget", {"id": "f_unknown"}, "not_found"),
    ("forget", {"id": " "}, "invalid_params"),
    ("context_pack", {"entities": "people/a", "since": "soon"}, "invalid_params"),
    ("context_pack", {"entities": "people/a", "budget_tokens": -1}, "invalid_params"),
    ("delta", {}, "invalid_params"),
    ("delta", {"since": "soon"}, "invalid_params"),
    ("synthesize", {"question": "What does Alice prefer?"}, "unavailable"),
    ("synthesize", {"question": " "}, "invalid_params"),
    ("put_page", {"slug": "Not A Slug", "content": "x"}, "invalid_params"),
    ("put_page", {"slug": "notes/bad", "content": "---\ntitle: [unclosed\n---\nBody."}, "invalid_params"),
    ("put_page", {"slug": "notes/big", "content": "x" * 400_000}, "invalid_params"),
    ("put_page", {"slug": "notes/v", "content": "x", "visibility": "public"}, "invalid_params"),
    (
        "put_page",
        {"slug": "notes/gone", "content": "x", "expected_updated_at": "2026-01-01T00:00:00.000Z"},
        "invalid_params",
    ),
    ("put_page", {"slug": "notes/t", "content": "x", "expected_updated_at": "yesterday"}, "invalid_params"),
    ("get_page", {"slug": "people/nobody"}, "not_found"),
    ("delete_page", {"slug": "people/nobody"}, "not_found"),
    ("list_pages", {"limit": "all"}, "invalid_params"),
    ("trace_fact", {"id": "f_unknown"}, "not_found"),
    ("purge_fact", {"id": "f_unknown"}, "not_found"),
    ("list_facts", {"cursor": "garbage!!"}, "invalid_params"),
    ("list_facts", {"created_after": "soon"}, "invalid_params"),
    ("export_pack", {"since": "soon"}, "invalid_params"),
    ("import_pack", {"pack": "not a pack"}, "invalid_params"),
    ("list_activity", {"cursor": "garbage!!"}, "invalid_params"),
    ("list_activity", {"since": "soon"}, "invalid_params"),
    ("whoami", {"dry_run": "yes"}, "invalid_params"),
    ("list_followers", {"limit": 0}, "invalid_params"),
    ("list_tokens", {"dry_run": "yes"}, "invalid_params"),
    ("create_token", {"client": "Bad Name", "scopes": ["read"]}, "invalid_params"),
    ("create_token", {"client": "ok", "scopes": []}, "invalid_params"),
    ("revoke_token", {"token_id": "tok_unknown"}, "not_found"),
    ("get_write_request", {"request_id": "never-sent"}, "not_found"),
    ("list_write_requests", {"state": "done"}, "invalid_params"),
    ("list_write_requests", {"cursor": "garbage!!"}, "invalid_params"),
    ("cancel_write_request", {"request_id": "never-sent"}, "not_found"),
]
#: Tools that take no arguments and read nothing by id: no call of theirs is refused by the tool.
NO_REFUSALS = {"memory_stats"}


@pytest.mark.parametrize(
    ("tool", "args", "code"), VERB_ERRORS, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(VERB_ERRORS)]
)
def test_each_verb_refusal_has_a_fix(deps_keyword_only: Deps, tool: str, args: dict[str, Any], code: str) -> None:
    assert tool in REGISTRY, f"{tool} is not registered"
    body = dispatch(tool, args, ADMIN, deps_keyword_only).body
    assert_error_with_fix(body, code)


def test_the_walk_covers_every_registered_tool() -> None:
    covered = {t for t, _, _ in VERB_ERRORS} | NO_REFUSALS
    assert set(REGISTRY) - covered == set(), sorted(set(REGISTRY) - covered)
    for tool in NO_REFUSALS:
        assert REGISTRY[tool].input_schema()["properties"] == {}, f"{tool} takes parameters: walk its refusals"


# -- doubled full stops (issue 8 item 11) ---------------------------------------------------------


def test_configured_reasons_embedded_in_sentences_never_double_the_full_stop(stores: Any, clock: Any) -> None:
    """The wiring's reasons are whole sentences ("… has no LLM."); the synthesize refusal and the
    degraded_recall notice embed them mid-sentence."""
    from fleetmem.adapters.local.ids import SortableIds
    from fleetmem.config import Settings
    from fleetmem.contract.envelope import render_notice_block
    from fleetmem.wiring import LLM_NOT_CONFIGURED, local_embedder

    _, embedder_problem = local_embedder(Settings(embedder="none"))
    assert embedder_problem and embedder_problem.endswith(".") and LLM_NOT_CONFIGURED.endswith(".")
    deps = Deps.over(
        stores,
        clock=clock,
        ids=SortableIds(),
        embedder=None,
        llm=None,
        diagnostics=Diagnostics(embedder_problem=embedder_problem, llm_problem=LLM_NOT_CONFIGURED),
    )
    refusal = dispatch("synthesize", {"question": "What does Alice like?"}, ADMIN, deps).body
    assert_error_with_fix(refusal, "unavailable")
    recall = dispatch("recall", {"query": "tea"}, ADMIN, deps)
    degraded = [n for n in recall.notices if n.code == "degraded_recall"]
    assert degraded
    for n in degraded:
        assert not DOUBLED_STOP.search(n.why), n.why
        assert not DOUBLED_STOP.search(render_notice_block(n, "mcp"))
