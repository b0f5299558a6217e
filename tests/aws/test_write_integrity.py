"""Writes never misfile or wrongly merge a memory, on BOTH adapter sets (issue 8, items 3, 4, 6, 11):

- size limits (D16): an oversized fact, slug, title or alias is refused with `invalid_params`
  and nothing is written;
- a page's exact title used as `entity` files the fact under that page (D15), and recall's entity
  filter resolves the same way; a name that resolves nowhere gets a `new_entity` notice whose
  suggestions include prefix near-misses;
- a fact born expired is stored expired and never supersedes or deduplicates a live fact.

Every test runs through the one `dispatch` over the local SQLite stores and over the AWS stores
(DynamoDB on moto in server mode and on DynamoDB Local, OpenSearch on the real OpenSearch node), all on
127.0.0.1. The embedder is a deterministic table (below) so the 0.95 dedup threshold is hit
exactly; nothing is mocked.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch
from tests.aws import engines

NOW = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)
CALLER = Caller(tenant="t1", client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)
PRIYA = "people/priya-raman"
LIVE_PHONE = "Priya's phone number is +1 555 010 5678"
DEAD_PHONE = "Priya's phone number is +1 555 010 5679"
RESTATED = "Priya's phone number is +1 555 010 5678!"


class TableEmbedder:
    """Texts listed here get chosen unit vectors (the phone facts are cosine 0.99 apart, above the
    0.95 dedup threshold); every other text gets its own direction from a hash, so unrelated facts
    never meet the threshold."""

    model_id = "table-16"
    dim = 16

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def _one(self, text: str) -> list[float]:
        near = math.sqrt(1 - 0.99**2)
        if text == LIVE_PHONE:
            return [1.0] + [0.0] * 15
        if text in (DEAD_PHONE, RESTATED):
            return [0.99, near] + [0.0] * 14
        slot = 2 + sum(text.encode()) % 14
        return [0.0] * slot + [1.0] + [0.0] * (15 - slot)


@pytest.fixture(params=["sqlite", "aws-moto", "aws-dynamodb-local"])
def brain(request: pytest.FixtureRequest) -> Iterator[Deps]:
    clock = FixedClock(NOW)
    embedder = TableEmbedder()
    if request.param == "sqlite":
        stores = open_local(":memory:")
        try:
            yield Deps.over(stores, clock=clock, ids=SortableIds(), embedder=embedder, llm=None)
        finally:
            stores.close()
        return
    endpoint = (
        engines.moto_endpoint(request.config)
        if request.param == "aws-moto"
        else engines.dynamodb_local_endpoint(request.config)
    )
    with engines.aws_deps(request.config, endpoint, embedder=embedder, clock=clock) as deps:
        yield deps


def call(deps: Deps, tool: str, **args: Any) -> Any:
    return dispatch(tool, args, CALLER, deps)


def ok(deps: Deps, tool: str, **args: Any) -> dict[str, Any]:
    result = call(deps, tool, **args)
    assert not result.is_error, result.body
    return result.body


def notice(result: Any, code: str) -> Any:
    found = [n for n in result.notices if n.code == code]
    return found[0] if found else None


def put_priya(deps: Deps) -> None:
    ok(deps, "put_page", slug=PRIYA, content="---\ntitle: Priya Raman\ntype: person\n---\nPriya runs payments.\n")


def all_facts(deps: Deps, **filters: Any) -> list[dict[str, Any]]:
    return ok(deps, "recall", include_expired=True, **filters)["facts"]


# --- 3. size limits --------------------------------------------------------------------------------


def test_a_one_megabyte_fact_is_refused_and_nothing_is_written(brain):
    result = call(brain, "remember", fact="x" * 1_000_000, provenance="import", entity=PRIYA)
    assert result.is_error
    body = result.body
    assert body["code"] == "invalid_params"
    assert "keep the long text as a page" in body["suggestion"]  # names no tool a verbs caller lacks
    assert body["fix"]["next"] == "report"  # a cut fact is a different fact: no corrected call
    assert all_facts(brain) == []
    # the limit itself is inclusive
    assert ok(brain, "remember", fact="y" * 2000, provenance="import")["status"] == "inserted"


def test_oversized_page_names_are_refused_and_nothing_is_stored(brain):
    long_slug = "notes/" + "-".join(["word"] * 600)
    cases = [
        {"slug": long_slug, "content": "x"},
        {"slug": "notes/" + "a" * 101, "content": "x"},
        {"slug": PRIYA, "content": "x", "title": "T" * 301},
        {"slug": PRIYA, "content": "---\ntitle: " + "T" * 301 + "\n---\nx"},
        {"slug": PRIYA, "content": "x", "aliases": ["A" * 201]},
        {"slug": PRIYA, "content": "x", "aliases": [f"name {i}" for i in range(51)]},
    ]
    for args in cases:
        result = call(brain, "put_page", **args)
        assert result.is_error, args
        assert result.body["code"] == "invalid_params"
        assert result.body["fix"]["next"] == "report"
        assert result.body["suggestion"]
    assert ok(brain, "list_pages")["pages"] == []
    assert call(brain, "get_page", slug=long_slug).body["code"] == "invalid_params"
    assert call(brain, "delete_page", slug=long_slug).body["code"] == "invalid_params"


def test_an_entity_name_that_makes_an_overlong_slug_is_refused(brain):
    result = call(brain, "remember", fact="A fact", provenance="chat", entity="word " * 70)
    assert result.is_error and result.body["code"] == "invalid_params"
    assert call(brain, "remember", fact="A fact", provenance="chat", entity="x" * 301).body["code"] == (
        "invalid_params"
    )
    assert all_facts(brain) == []
    # reads: an over-long name names nothing (a miss, not an error)
    assert ok(brain, "entity", name="x" * 5000)["found"] is False
    assert ok(brain, "recall", entity="x" * 5000)["facts"] == []


# --- 4. names resolve on writes --------------------------------------------------------------------


def test_a_pages_exact_title_files_the_fact_under_the_page(brain):
    put_priya(brain)
    result = call(brain, "remember", fact="Priya prefers email", provenance="chat", entity="Priya Raman")
    assert not result.is_error, result.body
    assert result.body["entity_slug"] == PRIYA
    assert notice(result, "new_entity") is None
    facts = ok(brain, "recall", entity="Priya Raman")["facts"]
    assert [f["fact"] for f in facts] == ["Priya prefers email"]
    assert [f["entity_slug"] for f in facts] == [PRIYA]
    assert ok(brain, "entity", name="people/priya-raman")["card"]["active_fact_count"] == 1


def test_a_name_that_resolves_nowhere_says_so_with_prefix_suggestions(brain):
    put_priya(brain)
    result = call(brain, "remember", fact="Pri called about the invoice", provenance="chat", entity="Pri")
    assert not result.is_error, result.body
    assert result.body["entity_slug"] == "pri"
    new = notice(result, "new_entity")
    assert new is not None and PRIYA in new.why
    assert new.fix is not None
    assert new.fix.mcp["arguments"]["entity"] == PRIYA
    assert new.fix.mcp["arguments"]["fact"] == "Pri called about the invoice"
    # a second fact on the same (now used) slug is not new any more
    again = call(brain, "remember", fact="Pri paid", provenance="chat", entity="Pri")
    assert notice(again, "new_entity") is None


def test_entity_suggests_prefix_near_misses(brain):
    put_priya(brain)
    ok(brain, "put_page", slug="companies/acme", content="---\ntitle: Acme\naliases: [Roadrunner Supply]\n---\nx")
    miss = ok(brain, "entity", name="Pri")
    assert miss["found"] is False
    assert [s["slug"] for s in miss["suggestions"]] == [PRIYA]
    by_alias = ok(brain, "entity", name="Roadrun")
    assert [s["slug"] for s in by_alias["suggestions"]] == ["companies/acme"]


# --- 6. born-expired facts -------------------------------------------------------------------------


def test_a_fact_born_expired_never_hides_the_live_fact(brain):
    put_priya(brain)
    live = ok(brain, "remember", fact=LIVE_PHONE, provenance="chat", entity=PRIYA)
    for text in (DEAD_PHONE, RESTATED):
        result = call(brain, "remember", fact=text, provenance="old crm", entity=PRIYA, ttl="2020-01-01")
        assert not result.is_error, result.body
        assert result.body["status"] == "inserted"
        assert result.body["id"] != live["id"]
        assert result.body["valid_until"] == "2020-01-01T00:00:00.000Z"
        assert notice(result, "already_expired") is not None
    active = ok(brain, "recall", entity=PRIYA)["facts"]
    assert [f["fact"] for f in active] == [LIVE_PHONE]
    assert sorted(f["fact"] for f in all_facts(brain, entity=PRIYA)) == sorted([LIVE_PHONE, DEAD_PHONE, RESTATED])
    # a live restatement still deduplicates against the live fact, never the dead ones
    again = ok(brain, "remember", fact=LIVE_PHONE, provenance="chat", entity=PRIYA)
    assert (again["status"], again["id"]) == ("duplicate", live["id"])
