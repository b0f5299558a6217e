"""Names match as people write them: a title or alias is compared by `slugs.match_key` (NFKC,
casefold, format characters dropped, whitespace collapsed, the dot casefold gives "İ" dropped), so
an NFD spelling, an upper-case "STRASSE", a lower-case Turkish "ilker işık" or a ZWJ inside a word
finds the page that has the name — through remember (filed under that page), recall {entity},
entity and list_facts {entity}. Names that differ in a letter (Müller/Muller, Işık/Isik) stay
apart, and pages whose keys were written before match_key are still found.

Runs through the one `dispatch` on the local SQLite stores and on the AWS stores (DynamoDB Local
for the tables, the run's OpenSearch node for the index), all on 127.0.0.1. Nothing is mocked; the
embedder is the deterministic HashEmbedder.
"""

from __future__ import annotations

import unicodedata
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetmem.memory.slugs import match_key, normalize_alias
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch

NOW = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)
ZWJ = "\u200d"


@pytest.fixture
def agent() -> Caller:
    return Caller(
        tenant="t-" + uuid.uuid4().hex[:10], client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True
    )


def ok(deps: Deps, caller: Caller, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    deps.clock.advance(seconds=1)  # type: ignore[attr-defined]  # every write gets its own updated_at
    result = dispatch(tool, arguments, caller, deps, transport="mcp")
    assert not result.is_error, result.body
    return dict(result.body)


def page(deps: Deps, caller: Caller, slug: str, *, title: str, aliases: tuple[str, ...] = ()) -> None:
    ok(deps, caller, "put_page", {"slug": slug, "content": f"About {slug}.", "title": title, "aliases": list(aliases)})


def filed_and_found(deps: Deps, caller: Caller, name: str, slug: str) -> None:
    """remember(entity=name) files under `slug`; recall, list_facts and entity find it by `name`."""
    saved = ok(deps, caller, "remember", {"fact": f"Met {name} at the fair", "provenance": "chat", "entity": name})
    assert saved["entity_slug"] == slug
    assert saved["id"] in [f["fact_id"] for f in ok(deps, caller, "recall", {"entity": name})["facts"]]
    assert saved["id"] in [f["fact_id"] for f in ok(deps, caller, "list_facts", {"entity": name})["facts"]]
    assert ok(deps, caller, "entity", {"name": name})["card"]["entity"]["slug"] == slug


NFD_RENE = unicodedata.normalize("NFD", "René Lefèvre")
assert NFD_RENE != unicodedata.normalize("NFC", NFD_RENE)  # really another code-point sequence

# (the name a page has, the name a caller writes)
SPELLINGS = [
    pytest.param("René Lefèvre", NFD_RENE, id="nfd"),
    pytest.param("Jürgen Straße", "JÜRGEN STRASSE", id="casefold"),
    pytest.param("İlker Işık", "ilker işık", id="turkish-i"),
    pytest.param("Karen Smith", f"Ka{ZWJ}ren Smith", id="zwj"),
]


@pytest.mark.parametrize(("stored", "written"), SPELLINGS)
def test_a_title_matches_as_people_write_it(brain, agent, stored, written):
    page(brain, agent, "team/member-1", title=stored)
    filed_and_found(brain, agent, written, "team/member-1")


@pytest.mark.parametrize(("stored", "written"), [p for p in SPELLINGS if p.id != "casefold"])  # aliases were casefolded
def test_an_alias_matches_as_people_write_it(brain, agent, stored, written):
    page(brain, agent, "team/member-2", title="Member Two", aliases=(stored,))
    filed_and_found(brain, agent, written, "team/member-2")


def test_a_zwj_inside_a_word_files_a_pageless_fact_under_the_same_slug(brain, agent):
    first = ok(brain, agent, "remember", {"fact": "Karen runs the lab", "provenance": "chat", "entity": "Karen Smith"})
    assert first["entity_slug"] == "karen-smith"
    again = ok(
        brain, agent, "remember", {"fact": "Karen moved to Oslo", "provenance": "chat", "entity": f"Ka{ZWJ}ren Smith"}
    )
    assert again["entity_slug"] == "karen-smith"
    found = {f["fact_id"] for f in ok(brain, agent, "list_facts", {"entity": f"Ka{ZWJ}ren Smith"})["facts"]}
    assert found == {first["id"], again["id"]}


@pytest.mark.parametrize(
    ("stored", "other"),
    [
        ("Anna Müller", "Anna Muller"),
        ("Ayşe Işık", "Ayse Isik"),
        ("René Lefèvre", "Rene Lefevre"),
        ("Ilker Isik", "İlker Işık"),
    ],
)
def test_names_that_differ_in_a_letter_stay_apart(brain, agent, stored, other):
    # sanity: the keys differ (this is what keeps the two people apart), the resolver agrees
    assert match_key(stored) != match_key(other)
    page(brain, agent, "team/member-3", title=stored)
    saved = ok(brain, agent, "remember", {"fact": "Someone else entirely", "provenance": "chat", "entity": other})
    assert saved["entity_slug"] != "team/member-3"
    assert ok(brain, agent, "list_facts", {"entity": stored})["facts"] == []


# ----------------------------------------------------------------------------- keys written before match_key


def _write_legacy_keys(deps: Deps, tenant: str, slug: str) -> None:
    """Rewrite the page's stored title and alias keys in the form the stores wrote before
    match_key: `str.lower()` of the title, `normalize_alias` of each alias."""
    stored = deps.pages.get(tenant, slug)
    assert stored is not None
    title_key = stored.title.lower()
    alias_keys = {normalize_alias(a) for a in stored.aliases}  # (the SQLite aliases table)
    assert title_key != match_key(stored.title)
    assert all(normalize_alias(a) != match_key(a) for a in stored.aliases)
    if hasattr(deps.pages, "db"):  # SQLite

        def run(conn: Any) -> None:
            conn.execute("UPDATE pages SET title_lc = ? WHERE tenant = ? AND slug = ?", (title_key, tenant, slug))
            conn.execute("DELETE FROM aliases WHERE tenant = ? AND slug = ?", (tenant, slug))
            conn.executemany(
                "INSERT INTO aliases (tenant, alias, slug) VALUES (?, ?, ?)", [(tenant, a, slug) for a in alias_keys]
            )

        deps.pages.db.write(run)
        return
    from fleetmem.adapters.aws import keys
    from fleetmem.adapters.aws.dynamo import to_ddb
    from fleetmem.adapters.aws.pages import derived_rows, page_pk

    store: Any = deps.pages
    pk = page_pk(tenant, slug)
    store._db.update_item(
        TableName=store.table,
        Key={"pk": {"S": pk}, "sk": {"S": "P"}},
        UpdateExpression="SET tk = :tk",
        ExpressionAttributeValues={":tk": {"S": keys.key(tenant, title_key)}},
    )
    for row in derived_rows(stored):
        if row["typ"] == "alias":
            store._db.delete_item(TableName=store.table, Key={"pk": {"S": pk}, "sk": {"S": row["sk"]}})
            old = next(normalize_alias(a) for a in stored.aliases if match_key(a) == row["alias"])
            row = {**row, "sk": f"A#{keys.part(old)}", "ak": keys.key(tenant, old), "alias": old}
            store._db.put_item(TableName=store.table, Item=to_ddb(row))


def test_a_page_whose_keys_were_written_before_match_key_is_still_found(brain, agent):
    page(brain, agent, "team/member-4", title="Jürgen Straße", aliases=("İlker Işık",))
    page(brain, agent, "team/member-5", title=NFD_RENE)
    _write_legacy_keys(brain, agent.tenant, "team/member-4")
    _write_legacy_keys(brain, agent.tenant, "team/member-5")
    # the names as they were written still resolve (old key), and so do the forms the old keys had
    filed_and_found(brain, agent, "Jürgen Straße", "team/member-4")
    filed_and_found(brain, agent, "İlker Işık", "team/member-4")
    filed_and_found(brain, agent, NFD_RENE, "team/member-5")
