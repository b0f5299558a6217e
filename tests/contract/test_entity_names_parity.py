"""entity's `names` batch resolves each name exactly as `entity{name}` does (D35), through the one
`dispatch`, on the local SQLite stores and on the AWS stores (DynamoDB Local + the run's OpenSearch
node), all on 127.0.0.1. Nothing is mocked.

The name set mixes exact titles, aliases, case, diacritic, NFD and punctuation variants, slugs,
slug suffixes, bare tokens, a title of more than four words (no name item keeps it: DynamoDB reads
it through its index), a title twelve pages share (more than one key's candidate cut, so a name
alone and a name among many must see the same candidates), a fact-only entity, private pages for a
remote caller, and misses. On DynamoDB the batch reads the name items, not one index Query per
alias or title key, reads no suffix candidates for a name the bare-token rule resolves, and one
word-prefix Query per distinct prefix of the misses' words, and asks the slug index for a few
items at a time (a botocore hook on the real client counts the Queries).
"""

from __future__ import annotations

import unicodedata
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch

NOW = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)

PAGES: list[tuple[str, str]] = [
    ("people/alice-example", "---\ntitle: Alice Example\ntype: person\naliases: [Ally, Al E.]\n---\nAlice."),
    ("people/jurgen-strasse", "---\ntitle: Jürgen Straße\ntype: person\n---\nJürgen."),
    ("people/rene-lefevre", "---\ntitle: René Lefèvre\ntype: person\n---\nRené."),
    ("people/bob-smith", "---\ntitle: Bob Smith\ntype: person\n---\nBob S."),
    ("people/bob-jones", "---\ntitle: Bob Jones\ntype: person\n---\nBob J."),
    ("people/quiet-one", "---\ntitle: Quiet One\nvisibility: private\naliases: [Q One]\n---\nHidden."),
    ("companies/acme", "---\ntitle: Acme, Inc.\ntype: company\naliases: [ACME]\n---\nAcme."),
    ("notes/acme", "---\ntitle: Acme, Inc.\ntype: note\n---\nA note about Acme."),
    ("archive/2025/orion-project", "---\ntitle: Orion Project\n---\nAn old project."),
    ("meetings/q3-board", "---\ntitle: The Quarterly Board Review Meeting\n---\nMinutes."),
    ("notes/secret-plan", "---\ntitle: Secret Plan\nvisibility: private\n---\nPrivate."),
    # twelve pages share one title; the newest sorts last by slug
    *((f"notes/sync-{i:02d}", f"---\ntitle: Weekly Sync\ntype: note\n---\nSync {i}.") for i in range(1, 13)),
]

NAMES = [
    "Alice Example",
    "alice example",
    "ALLY",
    "al e.",
    "people/alice-example",
    "alice",
    "JÜRGEN STRASSE",
    "jürgen straße",
    unicodedata.normalize("NFD", "René Lefèvre"),
    "rene lefevre",
    "bob",
    "Bob Smith",
    "Acme, Inc.",
    "acme inc",
    "acme",
    "companies/acme",
    "orion-project",
    "Orion Project",
    "the quarterly board review meeting",
    "q3-board",
    "Weekly Sync",
    "Quiet One",
    "q one",
    "people/quiet-one",
    "Secret Plan",
    "Dana Vance",
    "Nobody Known",
    "Zzyzx Qwv",
]


def _caller(tenant: str, *, remote: bool) -> Caller:
    return Caller(tenant=tenant, client_id="agent-a", scopes=frozenset({"read", "write"}), remote=remote)


def ok(deps: Deps, caller: Caller, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = dispatch(tool, arguments, caller, deps, transport="mcp")
    assert not result.is_error, result.body
    return dict(result.body)


@pytest.fixture(scope="module")
def tenant(brain: Deps) -> str:
    name = "t-" + uuid.uuid4().hex[:10]
    owner = _caller(name, remote=False)
    for slug, content in PAGES:
        ok(brain, owner, "put_page", {"slug": slug, "content": content})
        brain.clock.advance(seconds=1)  # type: ignore[attr-defined]
    ok(brain, owner, "remember", {"fact": "Dana Vance joined the board", "provenance": "chat", "entity": "Dana Vance"})
    return name


def _single(deps: Deps, caller: Caller, name: str) -> tuple[bool, str | None]:
    body = ok(deps, caller, "entity", {"name": name})
    return bool(body["found"]), (body["card"]["entity"]["slug"] if body["found"] else None)


@pytest.mark.parametrize("remote", [True, False], ids=["remote", "trusted-local"])
def test_each_batch_row_resolves_as_the_single_call_does(brain: Deps, tenant: str, remote: bool) -> None:
    caller = _caller(tenant, remote=remote)
    batch = ok(brain, caller, "entity", {"names": NAMES})
    rows = {r["name"]: r for r in batch["results"]}
    assert len(rows) == len(NAMES)
    for name in NAMES:
        row = rows[name]
        assert (row["found"], row.get("slug")) == _single(brain, caller, name), name
    found = {r["name"]: r.get("slug") for r in batch["results"] if r["found"]}
    # the set is not trivially all hits or all misses, and the private pages show only to the owner
    assert found["Weekly Sync"] is not None and found["the quarterly board review meeting"] == "meetings/q3-board"
    assert found["JÜRGEN STRASSE"] == "people/jurgen-strasse" and "Nobody Known" not in found
    assert ("Quiet One" in found, "Secret Plan" in found) == (not remote, not remote)
    assert batch["found"] + batch["missing"] == len(NAMES) and batch["missing"] >= 3


@pytest.mark.dynamodb_local
@pytest.mark.parametrize("brain", ["dynamodb-local"], indirect=True)  # it counts DynamoDB requests
def test_a_batch_reads_name_items_not_an_index_query_per_key(brain: Deps, tenant: str) -> None:
    queries: list[str] = []
    slug_reads: list[int] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        queries.append(str(params.get("IndexName", "")))
        if params.get("IndexName") == "by_slug":  # the bare-token rule's "next two slugs"
            slug_reads.append(int(params.get("Limit", 10**6)))

    events = brain.pages._db.meta.events  # type: ignore[attr-defined]
    events.register("provide-client-params.dynamodb.Query", count)
    try:
        body = ok(brain, _caller(tenant, remote=True), "entity", {"names": NAMES})
        # the one title of more than four words is the only key read through an index
        assert body["found"] > 10 and queries.count("by_alias") + queries.count("by_title") <= 2, queries
        queries.clear()
        # "alice": the bare-token rule names people/alice-example, so its suffix candidates are not
        # read; the miss reads its suffix candidates and one prefix row Query per word ("zzy", "qwv")
        body = ok(brain, _caller(tenant, remote=True), "entity", {"names": ["alice", "Zzyzx Qwv"]})
    finally:
        events.unregister("provide-client-params.dynamodb.Query", count)
    assert [r["found"] for r in body["results"]] == [True, False]
    assert (queries.count("by_leaf"), queries.count("by_word")) == (1, 2), queries
    # and each of its slug-order reads asks for a few index items, not a 1 MB page of page rows
    assert slug_reads and max(slug_reads) <= 10, slug_reads
