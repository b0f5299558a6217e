"""remember's zero-LLM entity inference, null-like entities, `content_origin` and `_meta.session_id`
(reference 0.60 writes; docs/protocol.md: remember, D24). Every test runs on SQLite and on the AWS
store set (DynamoDB Local and the OpenSearch node), through the verb and through `dispatch`."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.unit.domain.delta_backends import BACKENDS, open_deps

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.errors import VerbError
from fleetmem.memory.verbs import recall, remember
from fleetmem.models import Caller, Page
from fleetmem.ports import CallContext, Deps
from fleetmem.transport.dispatch import dispatch

CTX = CallContext("test-correlation")


class Env:
    def __init__(self, deps: Deps, tenant: str) -> None:
        self.deps = deps
        self.tenant = tenant
        scopes = frozenset({"read", "write"})
        self.remote = Caller(tenant=tenant, client_id="agent-a", scopes=scopes, remote=True)
        self.local = Caller(tenant=tenant, client_id="local", scopes=scopes | {"admin"}, remote=False)

    def page(self, slug: str, title: str, *, aliases: tuple[str, ...] = (), **extra: Any) -> None:
        now = self.deps.clock.now()
        self.deps.pages.put(
            Page(tenant=self.tenant, slug=slug, title=title, aliases=aliases, created_at=now, updated_at=now, **extra)
        )

    def save(self, caller: Caller | None = None, **args: Any) -> dict[str, Any]:
        params = remember.RememberParams.model_validate({"provenance": "test", **args})
        return dict(remember.run(self.deps, caller or self.remote, params, CTX).body)

    def facts(self, caller: Caller | None = None, **args: Any) -> list[dict[str, Any]]:
        params = recall.RecallParams.model_validate(args)
        return list(recall.run(self.deps, caller or self.remote, params, CTX).body["facts"])


@pytest.fixture(params=BACKENDS)
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    clock = FixedClock(datetime.now(UTC).replace(microsecond=0))  # DynamoDB Local runs TTLs on the wall clock
    with open_deps(request.param, request, clock) as deps:
        yield Env(deps, "ti" + uuid.uuid4().hex[:12])


def _linked(body: dict[str, Any], slug: str) -> None:
    assert body["entity_slug"] == slug
    assert body["entity_inferred"] == "mention"
    assert "warnings" not in body and "hint" not in body


def _unattributed(body: dict[str, Any], warning: str) -> None:
    assert body["entity_slug"] is None
    assert "entity_inferred" not in body
    assert body["warnings"] == [warning]
    assert "`entity`" in body["hint"]


# --- inference ---------------------------------------------------------------------------------


def test_a_fact_naming_one_entity_page_is_linked_to_it(env: Env) -> None:
    env.page("people/alice-example", "Alice Example", type="person")
    body = env.save(fact="Alice Example prefers async standups over meetings")
    _linked(body, "people/alice-example")
    assert [f["fact_id"] for f in env.facts(entity="Alice Example")] == [body["id"]]
    # an explicit entity wins and carries no inference fields
    named = env.save(fact="Alice Example met the auditors", entity="companies/auditors")
    assert named["entity_slug"] == "companies/auditors"
    assert not {"entity_inferred", "warnings", "hint"} & set(named)


def test_an_alias_links_whatever_its_case(env: Env) -> None:
    env.page("companies/acme-corporation", "Acme Corporation", aliases=("Acme Labs",))
    _linked(env.save(fact="we renewed the ACME LABS contract today"), "companies/acme-corporation")
    _linked(env.save(fact="acme corporation pays net 30"), "companies/acme-corporation")


def test_a_name_inside_a_longer_matched_name_is_not_a_second_name(env: Env) -> None:
    env.page("companies/acme", "Acme")
    env.page("companies/acme-labs", "Acme Labs")
    _linked(env.save(fact="Acme Labs shipped the beta"), "companies/acme-labs")


def test_two_competing_names_leave_the_fact_unattributed(env: Env) -> None:
    env.page("people/alice-example", "Alice Example")
    env.page("people/bob-stone", "Bob Stone")
    body = env.save(fact="Alice Example and Bob Stone agreed on the launch date")
    _unattributed(body, "ENTITY_LINK_FAILED")


def test_one_name_shared_by_two_pages_is_ambiguous(env: Env) -> None:
    env.page("companies/orion-space", "Orion")
    env.page("projects/orion", "Orion")
    _unattributed(env.save(fact="Orion needs a new budget"), "ENTITY_LINK_FAILED")


def test_a_bare_first_name_links_nothing(env: Env) -> None:
    env.page("people/alice-example", "Alice Example", aliases=("Alice",))
    _unattributed(env.save(fact="Alice likes green tea"), "ENTITY_LINK_FAILED")
    # named in full, the first name later in the text is the same person
    _linked(env.save(fact="Alice Example said Alice will travel"), "people/alice-example")


def test_a_page_that_is_no_entity_is_never_linked(env: Env) -> None:
    env.page("notes/quarterly-plan", "Quarterly Plan")
    _unattributed(env.save(fact="The Quarterly Plan is due on Friday"), "NO_ENTITY")


def test_a_remote_caller_is_never_linked_to_nor_told_about_a_private_page(env: Env) -> None:
    env.page("people/secret-sam", "Secret Sam", visibility="private")
    _unattributed(env.save(fact="Secret Sam moved to Lisbon"), "NO_ENTITY")
    # the owner's local CLI reads private pages: it is linked
    _linked(env.save(env.local, fact="Secret Sam moved to Porto"), "people/secret-sam")


def test_infer_entity_false_saves_unattributed_with_the_warning(env: Env) -> None:
    env.page("people/alice-example", "Alice Example")
    _unattributed(env.save(fact="Alice Example joined the board", infer_entity=False), "NO_ENTITY")


def test_a_non_boolean_infer_entity_is_refused_without_renaming_it(env: Env) -> None:
    with pytest.raises(VerbError) as err:
        env.save(fact="x y z", infer_entity="yes")
    assert err.value.code == "invalid_params"
    assert "entity" not in (err.value.fix.mcp or {}).get("arguments", {})  # type: ignore[union-attr]


class _Same:
    """Every text at one direction: explicit-entity writes would supersede (cosine 1.0)."""

    model_id = "same-test"
    dim = 8

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1 / math.sqrt(8)] * 8 for _ in texts]


def test_an_inferred_link_dedups_on_exact_text_only_and_never_supersedes(env: Env) -> None:
    env.page("people/alice-example", "Alice Example")
    env.deps.embedder = _Same()  # type: ignore[assignment]
    old = env.save(fact="Alice Example's phone is 555-0100")
    new = env.save(fact="Alice Example's phone is now 555-0199")
    assert (old["status"], new["status"]) == ("inserted", "inserted")
    again = env.save(fact="Alice Example's phone is now 555-0199")
    assert (again["status"], again["id"]) == ("duplicate", new["id"])
    assert again["entity_inferred"] == "mention"
    assert len(env.facts(entity="people/alice-example")) == 2


# --- null-like entities -------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["null", "None", "N/A", "undefined", "", "   ", "NULL"])
def test_a_null_like_entity_means_omitted(env: Env, value: str) -> None:
    result = remember.run(
        env.deps,
        env.remote,
        remember.RememberParams.model_validate({"fact": "the build is green", "provenance": "p", "entity": value}),
        CTX,
    )
    assert result.body["entity_slug"] is None
    assert result.body["warnings"] == ["NO_ENTITY"]
    assert not [n for n in result.notices if n.code == "new_entity"]


def test_a_null_like_entity_still_infers(env: Env) -> None:
    env.page("people/alice-example", "Alice Example")
    _linked(env.save(fact="Alice Example owns the rollout", entity="null"), "people/alice-example")


# --- content_origin -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "tier"),
    [("tool_output", "external_untrusted"), ("user_said", "agent_written"), ("inferred", "agent_written")],
)
def test_content_origin_reads_back_as_a_trust_tier(env: Env, origin: str, tier: str) -> None:
    body = env.save(fact=f"the deploy log says {origin}", content_origin=origin, session_id="s-origin")
    by_session = env.facts(session_id="s-origin")
    by_time = env.facts()
    by_entity_less = [f for f in by_time if f["fact_id"] == body["id"]]
    for listed in (by_session, by_entity_less):
        (item,) = listed
        assert (item["trust_tier"], item["origin"]) == (tier, origin)
    assert env.deps.facts.get(env.tenant, body["id"]).content_origin == origin


def test_content_origin_on_an_entity_read_and_none_without_it(env: Env) -> None:
    tool = env.save(fact="the ticket says the cache is cold", entity="projects/cache", content_origin="tool_output")
    plain = env.save(fact="the cache was warmed at noon", entity="projects/cache")
    items = {f["fact_id"]: f for f in env.facts(entity="projects/cache")}
    assert (items[tool["id"]]["trust_tier"], items[tool["id"]]["origin"]) == ("external_untrusted", "tool_output")
    assert "trust_tier" not in items[plain["id"]] and "origin" not in items[plain["id"]]


def test_an_unknown_content_origin_is_invalid_params_listing_the_accepted_ones(env: Env) -> None:
    with pytest.raises(VerbError) as err:
        env.save(fact="x", content_origin="owner")
    assert err.value.code == "invalid_params"
    text = f"{err.value.message} {err.value.suggestion}"
    assert all(v in text for v in ("user_said", "tool_output", "inferred"))


# --- _meta.session_id ---------------------------------------------------------------------------


def _call(env: Env, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = dispatch(tool, args, env.remote, env.deps)
    assert not result.is_error, result.body
    return dict(result.body)


def test_meta_session_id_files_the_fact_under_that_session_and_the_argument_wins(env: Env) -> None:
    body = _call(env, "remember", {"fact": "meta session fact", "provenance": "p", "_meta": {"session_id": "s-meta"}})
    found = _call(env, "recall", {"session_id": "s-meta"})["facts"]
    assert [f["fact_id"] for f in found] == [body["id"]]
    args = {"fact": "argument session fact", "provenance": "p", "session_id": "s-arg", "_meta": {"session_id": "s-m"}}
    body = _call(env, "remember", args)
    assert [f["fact_id"] for f in _call(env, "recall", {"session_id": "s-arg"})["facts"]] == [body["id"]]
    assert _call(env, "recall", {"session_id": "s-m"})["facts"] == []


def test_the_new_parameters_pass_dispatch_on_a_write(env: Env) -> None:
    env.page("people/alice-example", "Alice Example")
    args = {"fact": "Alice Example signed", "provenance": "p", "infer_entity": True, "content_origin": "user_said"}
    _linked(_call(env, "remember", args), "people/alice-example")


def test_a_batch_infers_per_item_and_takes_the_meta_session(env: Env) -> None:
    env.page("people/alice-example", "Alice Example")
    args = {
        "items": ["Alice Example ships the beta", {"fact": "Alice Example owns QA", "infer_entity": False}],
        "provenance": "p",
        "_meta": {"session_id": "s-batch"},
    }
    body = _call(env, "remember", args)
    assert body["saved"] == 2
    found = {f["fact"]: f for f in _call(env, "recall", {"session_id": "s-batch"})["facts"]}
    assert found["Alice Example ships the beta"]["entity_slug"] == "people/alice-example"
    assert found["Alice Example owns QA"]["entity_slug"] is None
