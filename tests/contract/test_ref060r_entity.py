"""entity as the reference 0.60 resolves and answers it (D35), through the one `dispatch`, on the local
SQLite stores and on the AWS stores (DynamoDB Local + the run's OpenSearch node), all on 127.0.0.1.
Nothing is mocked; one test wraps the real page listing so that its backlink read fails (a store
outage cannot be had on demand otherwise), to show the `failed` coverage and its notice.

- `names`: light rows in first-seen order, duplicates once, integer found/missing, leads without
  headings, tables, private fences or credentials, miss suggestions, private pages hidden from
  remote callers; one batch reads the pages once (a counting wrapper around the real page store);
- `name` with `names`, neither (`entity{}`), 51 names or only blanks: invalid_params with a fix;
- precedence: alias > exact slug > exact title > suffix; an entity page beats a newer note of the
  same title (for entity, remember and recall alike); a note is still the fallback;
- the card: referenced_by_count (distinct pages, mentions included), referenced_by groups (newest
  first, 10 rows per group, private linking pages hidden from remote callers), recent_facts (5
  newest, world-only and redacted for remote callers), coverage complete; a miss has coverage;
- entity's result model holds the single answer and the batch answer (a stray field fails).
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.errors import Unavailable
from fleetmem.memory.verbs.entity import EntityAnswer
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.ports.pages import REFERRING_PER_GROUP
from fleetmem.transport.dispatch import dispatch

NOW = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)
AWS_KEY = "AKIAZ7Q2M4N8P1R5T9V3"


def _caller(tenant: str, *, remote: bool) -> Caller:
    return Caller(tenant=tenant, client_id="agent-a", scopes=frozenset({"read", "write"}), remote=remote)


@pytest.fixture
def agent() -> Caller:
    """A remote agent of a fresh tenant (the module's stores are shared by its tests)."""
    return _caller("t-" + uuid.uuid4().hex[:10], remote=True)


def local(caller: Caller) -> Caller:
    return _caller(caller.tenant, remote=False)


def call(deps: Deps, caller: Caller, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    result = dispatch(tool, arguments, caller, deps, transport="mcp")
    return bool(result.is_error), dict(result.body)


def ok(deps: Deps, caller: Caller, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    is_error, body = call(deps, caller, tool, arguments)
    assert not is_error, body
    return body


def put(deps: Deps, caller: Caller, slug: str, content: str, **kw: Any) -> None:
    ok(deps, caller, "put_page", {"slug": slug, "content": content, **kw})
    deps.clock.advance(seconds=1)  # type: ignore[attr-defined]


# -- names ------------------------------------------------------------------------------------------


def test_names_answers_light_rows_in_first_seen_order_with_integer_counts(brain: Deps, agent: Caller) -> None:
    put(
        brain,
        agent,
        "people/alice-example",
        "---\ntitle: Alice Example\ntype: person\naliases: [Ali]\n---\n# Alice\n| role | cto |\n"
        f"Alice runs the platform team. Her old key was {AWS_KEY}.\n"
        "<!-- private -->Alice is job hunting.<!-- /private -->\nShe joined in 2024.",
    )
    put(brain, agent, "companies/acme-widgets", "---\ntitle: Acme Widgets\ntype: company\n---\nMakes widgets.")
    body = ok(brain, agent, "entity", {"names": ["Ali", "acme widgets", "Ali", "  ", "Acme Gadgets", "Zzyzx Qwv"]})
    assert body["found"] == 2 and body["missing"] == 2
    assert isinstance(body["found"], int) and not isinstance(body["found"], bool)
    assert [r["name"] for r in body["results"]] == ["Ali", "acme widgets", "Acme Gadgets", "Zzyzx Qwv"]
    alice, acme, gadgets, nothing = body["results"]
    assert alice == {
        "name": "Ali",
        "found": True,
        "slug": "people/alice-example",
        "title": "Alice Example",
        "type": "person",
        "aka": ["ali"],
        "lead": "Alice runs the platform team. Her old key was <REDACTED:aws_access_key>. She joined in 2024.",
    }
    assert acme["slug"] == "companies/acme-widgets" and acme["lead"] == "Makes widgets."
    assert gadgets == {
        "name": "Acme Gadgets",
        "found": False,
        "suggestions": [{"slug": "companies/acme-widgets", "title": "Acme Widgets"}],
    }
    assert nothing == {"name": "Zzyzx Qwv", "found": False}
    assert body["protocol_version"] == 1 and body["latency_ms"] >= 1
    EntityAnswer.model_validate(body)


def test_names_resolve_as_name_does_and_hide_private_pages_from_remote_callers(brain: Deps, agent: Caller) -> None:
    put(brain, local(agent), "people/quiet-one", "---\ntitle: Quiet One\nvisibility: private\n---\nHidden.")
    put(brain, agent, "archive/2025/orion", "An old project.")
    names = ["Quiet One", "orion", "people/quiet-one"]
    remote = ok(brain, agent, "entity", {"names": names})
    assert [r["found"] for r in remote["results"]] == [False, True, False]
    assert remote["results"][0] == {"name": "Quiet One", "found": False}  # no suggestion names it either
    trusted = ok(brain, local(agent), "entity", {"names": names})
    assert [r.get("slug") for r in trusted["results"]] == ["people/quiet-one", "archive/2025/orion", "people/quiet-one"]
    for name in names:  # each row is the page `entity{name}` shows
        single = ok(brain, local(agent), "entity", {"name": name})
        row = next(r for r in trusted["results"] if r["name"] == name)
        assert single["card"]["entity"]["slug"] == row["slug"]


def test_names_of_a_fact_only_entity_are_a_hit_as_for_one_name(brain: Deps, agent: Caller) -> None:
    ok(brain, agent, "remember", {"fact": "Dana Vance joined the board", "provenance": "chat", "entity": "Dana Vance"})
    body = ok(brain, agent, "entity", {"names": ["Dana Vance"]})
    assert body["results"] == [
        {
            "name": "Dana Vance",
            "found": True,
            "slug": "dana-vance",
            "title": "Dana Vance",
            "type": None,
            "aka": [],
            "lead": "",
        }
    ]


def test_a_batch_reads_the_pages_once_not_once_per_name(brain: Deps, agent: Caller) -> None:
    for i in range(12):
        put(brain, agent, f"people/member-{i}", f"---\ntitle: Member Number {i}\ntype: person\n---\nMember {i}.")

    class Counting:
        """The real page store; counts its resolution lookups."""

        def __init__(self, inner: Any) -> None:
            self.inner, self.lookups = inner, 0

        def lookup(self, tenant: str, **opts: Any) -> Any:
            self.lookups += 1
            return self.inner.lookup(tenant, **opts)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    pages = Counting(brain.pages)
    counted = dataclasses.replace(brain, pages=pages)  # type: ignore[arg-type]
    body = ok(counted, agent, "entity", {"names": [f"Member Number {i}" for i in range(12)]})
    assert body["found"] == 12 and pages.lookups == 1


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({}, None),
        ({"name": "Alice", "names": ["Bob"]}, "name_and_names"),
        ({"names": [f"n{i}" for i in range(51)]}, "names_count"),
        ({"names": [" ", ""]}, "names_count"),
        ({"names": []}, "names_count"),
    ],
)
def test_names_refusals_are_invalid_params_with_a_fix(
    brain: Deps, agent: Caller, arguments: dict[str, Any], reason: str | None
) -> None:
    is_error, body = call(brain, agent, "entity", arguments)
    assert is_error and body["code"] == "invalid_params"
    assert body["suggestion"].startswith("Problem:") and body["fix"]["why"]
    if reason:
        assert body["detail"] == {"field": "names", "reason": reason}
    else:  # entity{}: the user is asked which entity is meant
        assert body["fix"]["next"] == "ask_user" and "names" in body["suggestion"]


# -- precedence -------------------------------------------------------------------------------------


def test_an_exact_slug_beats_an_exact_title(brain: Deps, agent: Caller) -> None:
    put(brain, agent, "atlas", "---\ntitle: Atlas Archive\n---\nThe page whose slug is the name.")
    put(brain, agent, "projects/p-9", "---\ntitle: Atlas\ntype: project\n---\nThe titled page, newer.")
    assert ok(brain, agent, "entity", {"name": "Atlas"})["card"]["entity"]["slug"] == "atlas"
    saved = ok(brain, agent, "remember", {"fact": "Atlas moved racks", "provenance": "chat", "entity": "Atlas"})
    assert saved["entity_slug"] == "atlas"


def test_an_entity_page_beats_a_newer_note_of_the_same_title_for_reads_and_writes(brain: Deps, agent: Caller) -> None:
    put(brain, agent, "people/m-lin", "---\ntitle: Maya Lin\ntype: person\n---\nMaya the designer.")
    put(brain, agent, "notes/call-with-maya", "---\ntitle: Maya Lin\ntype: note\n---\nA newer note.")
    body = ok(brain, agent, "entity", {"name": "Maya Lin"})
    assert body["card"]["entity"]["slug"] == "people/m-lin"
    assert [s["slug"] for s in body["suggestions"]] == ["notes/call-with-maya"]
    saved = ok(brain, agent, "remember", {"fact": "Maya prefers Figma", "provenance": "chat", "entity": "Maya Lin"})
    assert saved["entity_slug"] == "people/m-lin"
    recalled = ok(brain, agent, "recall", {"entity": "Maya Lin"})
    assert [f["fact"] for f in recalled["facts"]] == ["Maya prefers Figma"]
    # an alias still beats the type preference; a note's exact title is still the fallback
    put(brain, agent, "notes/standup", "---\ntitle: Standup\ntype: note\naliases: [Orin Kade]\n---\nA note.")
    put(brain, agent, "people/o-kade", "---\ntitle: Orin Kade\ntype: person\n---\nOrin.")
    assert ok(brain, agent, "entity", {"name": "Orin Kade"})["card"]["entity"]["slug"] == "notes/standup"
    put(brain, agent, "notes/retro", "---\ntitle: Retro Notes\ntype: note\n---\nA retro.")
    assert ok(brain, agent, "entity", {"name": "Retro Notes"})["card"]["entity"]["slug"] == "notes/retro"


# -- the card's reference fields ---------------------------------------------------------------------


def test_the_card_groups_the_pages_that_link_to_the_entity(brain: Deps, agent: Caller) -> None:
    put(brain, agent, "companies/hub-co", "---\ntitle: Hub Co\ntype: company\n---\nThe hub.")
    for i in range(12):
        put(brain, agent, f"notes/n{i}", f"Note {i} about [[companies/hub-co]].")
    put(
        brain,
        agent,
        "people/pat",
        "---\ntype: person\n---\nPat works at [[companies/hub-co]].",
        links=[{"type": "works_at", "target": "companies/hub-co", "context": f"since 2024, key {AWS_KEY}"}],
    )
    put(brain, local(agent), "people/hidden", "---\ntype: person\nvisibility: private\n---\nSee [[companies/hub-co]].")
    card = ok(brain, agent, "entity", {"name": "Hub Co"})["card"]
    assert card["referenced_by_count"] == 13  # distinct pages, mentions included; the private one hidden
    groups = card["referenced_by"]
    assert [(g["canonical_type"], g["total"], len(g["rows"])) for g in groups] == [("person", 1, 1), ("page", 12, 10)]
    pat = groups[0]["rows"][0]
    assert pat == {
        "slug": "people/pat",
        "title": pat["title"],
        "type": "person",
        "canonical_type": "person",
        "date": pat["date"],
        "date_source": "updated_at",
        "preview": "since 2024, key <REDACTED:aws_access_key>",
    }
    assert [r["slug"] for r in groups[1]["rows"]] == [f"notes/n{i}" for i in range(11, 1, -1)]
    assert card["coverage"] == {"state": "complete", "pending_pages": 0, "last_pass_at": None}
    trusted = ok(brain, local(agent), "entity", {"name": "Hub Co"})["card"]
    assert trusted["referenced_by_count"] == 14 and trusted["referenced_by"][0]["rows"][0]["slug"] == "people/hidden"


def test_recent_facts_are_the_five_newest_the_caller_may_see(brain: Deps, agent: Caller) -> None:
    put(brain, agent, "people/rhea-moss", "---\ntitle: Rhea Moss\ntype: person\n---\nRhea.")
    for i in range(6):
        ok(brain, agent, "remember", {"fact": f"Rhea shipped release {i}", "provenance": "chat", "entity": "Rhea Moss"})
        brain.clock.advance(seconds=1)  # type: ignore[attr-defined]
    ok(
        brain,
        local(agent),
        "remember",
        {
            "fact": "Rhea is interviewing elsewhere",
            "provenance": "chat",
            "entity": "Rhea Moss",
            "visibility": "private",
        },
    )
    ok(
        brain,
        agent,
        "remember",
        {"fact": f"Rhea's deploy key is {AWS_KEY}", "provenance": "chat", "entity": "Rhea Moss"},
    )
    card = ok(brain, agent, "entity", {"name": "Rhea Moss"})["card"]
    facts = card["recent_facts"]
    assert [f["fact"] for f in facts] == [
        "Rhea's deploy key is <REDACTED:aws_access_key>",
        "Rhea shipped release 5",
        "Rhea shipped release 4",
        "Rhea shipped release 3",
        "Rhea shipped release 2",
    ]
    assert {f["kind"] for f in facts} == {"fact"} and {f["entity_slug"] for f in facts} == {"people/rhea-moss"}
    assert all(f["id"] and f["valid_from"].endswith("Z") for f in facts)
    trusted = ok(brain, local(agent), "entity", {"name": "Rhea Moss"})["card"]["recent_facts"]
    assert "Rhea is interviewing elsewhere" in [f["fact"] for f in trusted]


def test_an_older_commitment_is_still_an_open_thread_and_packs_keep_every_fact(brain: Deps, agent: Caller) -> None:
    """The card reads only the facts it shows (5 newest, commitments among the 50 newest): a
    commitment older than the 5 newest is still an open thread; context_pack's hot facts are not cut."""
    put(brain, agent, "people/ines-roy", "---\ntitle: Ines Roy\ntype: person\n---\nInes.")
    ok(
        brain,
        agent,
        "remember",
        {
            "fact": "Ines will send the audit by Friday",
            "provenance": "chat",
            "entity": "Ines Roy",
            "kind": "commitment",
        },
    )
    brain.clock.advance(seconds=1)  # type: ignore[attr-defined]
    for i in range(8):
        ok(brain, agent, "remember", {"fact": f"Ines closed ticket {i}", "provenance": "chat", "entity": "Ines Roy"})
        brain.clock.advance(seconds=1)  # type: ignore[attr-defined]
    card = ok(brain, agent, "entity", {"name": "Ines Roy"})["card"]
    assert [t["text"] for t in card["open_threads"]] == ["Ines will send the audit by Friday"]
    assert [f["fact"] for f in card["recent_facts"]] == [f"Ines closed ticket {i}" for i in (7, 6, 5, 4, 3)]
    assert card["active_fact_count"] == 9
    pack = ok(brain, agent, "context_pack", {"entities": "Ines Roy", "budget_tokens": 4000})
    packed = " ".join(str(v) for v in pack.values())
    assert "Ines closed ticket 0" in packed and "Ines will send the audit by Friday" in packed


def test_a_miss_carries_coverage_and_context_pack_cards_leave_the_reference_fields_out(
    brain: Deps, agent: Caller
) -> None:
    miss = ok(brain, agent, "entity", {"name": "Nobody Known"})
    assert miss["found"] is False and miss["coverage"]["state"] == "complete"
    put(brain, agent, "people/lee-park", "---\ntitle: Lee Park\ntype: person\n---\nLee.")
    pack = ok(brain, agent, "context_pack", {"entities": "Lee Park", "query": "Lee"})
    assert pack["cards"] and not {"referenced_by", "recent_facts", "coverage"} & set(pack["cards"][0])


def test_a_failed_backlink_read_answers_the_card_with_failed_coverage_and_a_notice(brain: Deps, agent: Caller) -> None:
    put(brain, agent, "people/ana-ruiz", "---\ntitle: Ana Ruiz\ntype: person\n---\nAna.")

    class Failing:
        """The real page listing, whose backlink read is down (a store outage)."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def referring(self, *args: Any, **kw: Any) -> Any:
            raise Unavailable("the page store is not answering")

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    down = dataclasses.replace(brain, page_listing=Failing(brain.page_listing))  # type: ignore[arg-type]
    result = dispatch("entity", {"name": "Ana Ruiz"}, agent, down, transport="mcp")
    assert not result.is_error
    card = result.body["card"]
    assert card["coverage"] == {"state": "failed", "pending_pages": 0, "last_pass_at": None, "degraded": True}
    assert card["referenced_by"] == [] and card["entity"]["slug"] == "people/ana-ruiz"
    assert [n.code for n in result.notices] == ["mention_index"]


def test_the_result_model_holds_either_answer_and_refuses_a_stray_field() -> None:
    single = {"protocol_version": 1, "found": False, "suggestions": [], "latency_ms": 1}
    batch = {
        "protocol_version": 1,
        "latency_ms": 1,
        "results": [{"name": "x", "found": False}],
        "found": 0,
        "missing": 1,
    }
    EntityAnswer.model_validate(single)
    EntityAnswer.model_validate(batch)
    with pytest.raises(ValidationError):
        EntityAnswer.model_validate({**batch, "cards": []})
    schema = EntityAnswer.model_json_schema()
    assert {"results", "card", "missing"} <= set(schema["properties"])
    # MCP clients check structured content against the listed properties: `found` is a flag or a count
    assert {alt["type"] for alt in schema["properties"]["found"]["anyOf"]} == {"boolean", "integer"}


class _Counting:
    """A real store; counts the calls of the named methods and passes everything through."""

    def __init__(self, inner: Any, *names: str) -> None:
        self.inner, self.calls = inner, dict.fromkeys(names, 0)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in self.calls:
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return counted


def test_a_batch_reads_suffix_token_and_miss_candidates_once_for_all_names(brain: Deps, agent: Caller) -> None:
    for i in range(6):
        put(brain, agent, f"people/zed{i}-quill", f"---\ntitle: Zed Quill {i}\ntype: person\n---\nZed {i}.")
    names = [f"zed{i}-quill" for i in range(6)] + [f"zed{i}" for i in range(6)] + ["Nobody Quill", "No One Zed"]
    pages = _Counting(brain.pages, "lookup", "heads", "keyword", "keyword_many", "bare_candidates")
    counted = dataclasses.replace(brain, pages=pages)  # type: ignore[arg-type]
    body = ok(counted, agent, "entity", {"names": names})
    # suffix names and bare tokens each resolve to their page, the two misses get suggestions
    assert [r.get("slug") for r in body["results"]] == [f"people/zed{i}-quill" for i in range(6)] * 2 + [None, None]
    assert all(r.get("suggestions") for r in body["results"][-2:])
    # one exact lookup, one read of every bare name's candidates, one keyword read for every miss
    assert pages.calls == {"lookup": 1, "heads": 0, "keyword": 0, "keyword_many": 1, "bare_candidates": 1}


def test_the_card_counts_and_groups_linking_pages_without_reading_their_pages(brain: Deps, agent: Caller) -> None:
    put(brain, agent, "companies/quiet-co", "---\ntitle: Quiet Co\ntype: company\n---\nQuiet.")
    for i in range(4):
        put(brain, agent, f"people/q{i}", f"---\ntitle: Q {i}\ntype: person\n---\nAt [[companies/quiet-co]].")
    pages = _Counting(brain.pages, "heads", "many")
    counted = dataclasses.replace(brain, pages=pages)  # type: ignore[arg-type]
    card = ok(counted, agent, "entity", {"name": "Quiet Co"})["card"]
    assert card["referenced_by_count"] == 4
    assert [(g["canonical_type"], g["total"]) for g in card["referenced_by"]] == [("person", 4)]
    assert [r["title"] for r in card["referenced_by"][0]["rows"]] == ["Q 3", "Q 2", "Q 1", "Q 0"]
    assert pages.calls == {"heads": 0, "many": 0}  # the link read answers it (D35)


def test_a_link_row_written_before_it_carried_its_page_head_still_counts(brain: Deps, agent: Caller) -> None:
    """DynamoDB only: link rows from before `src_title`/`src_ptype` fall back to one head read."""
    listing: Any = brain.page_listing
    if not hasattr(listing, "_db"):
        pytest.skip("the SQLite link index joins the page rows; no link row carries a head")
    from fleetmem.adapters.aws.page_table import page_pk

    put(brain, agent, "companies/old-co", "---\ntitle: Old Co\ntype: company\n---\nOld.")
    put(brain, agent, "people/old-timer", "---\ntitle: Old Timer\ntype: person\n---\nAt [[companies/old-co]].")
    put(brain, agent, "notes/fresh", "Fresh note on [[companies/old-co]].")
    pk = page_pk(agent.tenant, "people/old-timer")
    rows = listing._db.query(
        TableName=listing.table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :l)",
        ExpressionAttributeValues={":pk": {"S": pk}, ":l": {"S": "L#"}},
    )["Items"]
    assert rows
    for row in rows:  # as a link row written before the head was stored on it
        listing._db.update_item(
            TableName=listing.table,
            Key={"pk": row["pk"], "sk": row["sk"]},
            UpdateExpression="REMOVE src_title, src_ptype",
        )
    card = ok(brain, agent, "entity", {"name": "Old Co"})["card"]
    assert card["referenced_by_count"] == 2
    got = {g["canonical_type"]: (g["total"], [r["title"] for r in g["rows"]]) for g in card["referenced_by"]}
    assert got == {"person": (1, ["Old Timer"]), "page": (1, [got["page"][1][0]])}


def test_a_schema_8_data_directory_gets_its_link_groups_on_open(tmp_path: Any) -> None:
    """SQLite store schema 10 (D35): link rows from before carry their page's group once reopened."""
    import sqlite3

    from fleetmem.adapters.local import open_local

    caller = _caller("t-migrate", remote=True)
    stores = open_local(tmp_path)
    deps = Deps.over(stores, clock=FixedClock(NOW), ids=SortableIds(), embedder=None, llm=None)
    put(deps, caller, "companies/mig-co", "---\ntitle: Mig Co\ntype: company\n---\nMig.")
    pat = "---\ntitle: Mig Pat\ntype: person\n---\nAt [[companies/mig-co]], see [[companies/mig-co]] again."
    put(deps, caller, "people/mig-pat", pat, links=[{"type": "works_at", "target": "companies/mig-co"}])
    put(deps, caller, "notes/mig-note", "On [[companies/mig-co]].")
    stores.close()
    db = sqlite3.connect(tmp_path / "fleetmem.db")
    with db:  # back to schema 8's layout: link rows without their page's group, no link counts
        for trigger in ("links_groups_ai", "links_groups_ad", "links_groups_au"):
            db.execute(f"DROP TRIGGER {trigger}")
        db.execute("DROP TABLE link_groups")
        db.execute("DROP INDEX links_group")
        db.execute("ALTER TABLE links DROP COLUMN source_group")
        db.execute("ALTER TABLE links DROP COLUMN first_to_target")
        db.execute("PRAGMA user_version = 8")
    db.close()
    stores = open_local(tmp_path)
    try:
        deps = Deps.over(stores, clock=FixedClock(NOW), ids=SortableIds(), embedder=None, llm=None)
        card = ok(deps, caller, "entity", {"name": "Mig Co"})["card"]
        assert [(g["canonical_type"], g["total"]) for g in card["referenced_by"]] == [("page", 1), ("person", 1)]
    finally:
        stores.close()


# -- link counts (SQLite store schema 11) ------------------------------------------------------------

#: what `link_groups` must hold: the counts scanned from the link rows themselves
_SCANNED = (
    "SELECT tenant, target, source_group, source_visibility, sum(first_to_target), "
    "sum(type NOT IN ('mentions', 'mention')) FROM links WHERE source <> target GROUP BY 1, 2, 3, 4"
)
_KEPT = "SELECT tenant, target, source_group, source_visibility, pages, typed FROM link_groups"


def _counts(path: Any) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    import sqlite3

    db = sqlite3.connect(path / "fleetmem.db")
    try:
        return set(db.execute(_SCANNED).fetchall()), set(db.execute(_KEPT).fetchall())
    finally:
        db.close()


def test_link_counts_follow_every_page_write(tmp_path: Any) -> None:
    """The per-target counts entity's referenced_by and the card's backlink_count read (schema 11)
    stay equal to a scan of the link rows through puts, type and visibility changes, link edits,
    self links and deletes, in two tenants."""
    import random

    from fleetmem.adapters.local import open_local

    stores = open_local(tmp_path)
    try:
        deps = Deps.over(stores, clock=FixedClock(NOW), ids=SortableIds(), embedder=None, llm=None)
        callers = [local(_caller(t, remote=False)) for t in ("t-count-a", "t-count-b")]
        targets = [f"companies/co-{i}" for i in range(4)]
        rng = random.Random(7)
        for step in range(120):
            caller = rng.choice(callers)
            slug = f"notes/n-{rng.randrange(12)}"
            if rng.random() < 0.15:
                call(deps, caller, "delete_page", {"slug": slug})
                continue
            kind = rng.choice(["person", "company", ""])
            vis = rng.choice(["world", "private"])
            chosen = rng.sample([*targets, slug], rng.randrange(4))
            body = " ".join(f"[[{t}]]" for t in chosen) or "no links"
            links = [{"type": rng.choice(["works_at", "mentions"]), "target": t} for t in rng.sample(targets, 2)]
            head = f"---\ntitle: N {step}\n" + (f"type: {kind}\n" if kind else "") + f"visibility: {vis}\n---\n"
            put(deps, caller, slug, head + body, links=links)
    finally:
        stores.close()
    scanned, kept = _counts(tmp_path)
    assert scanned, "the walk wrote no links"
    assert kept == scanned


def test_a_schema_10_data_directory_gets_its_link_counts_on_open(tmp_path: Any) -> None:
    """Schema 10 -> 11: the counts are taken from the link rows once, then kept by the triggers; the
    card answers the same counts as before the upgrade."""
    import sqlite3

    from fleetmem.adapters.local import open_local

    caller = _caller("t-count-mig", remote=True)
    stores = open_local(tmp_path)
    deps = Deps.over(stores, clock=FixedClock(NOW), ids=SortableIds(), embedder=None, llm=None)
    put(deps, caller, "companies/cm-co", "---\ntitle: Cm Co\ntype: company\n---\nCm.")
    put(
        deps,
        caller,
        "people/cm-pat",
        "---\ntitle: Cm Pat\ntype: person\n---\nAt [[companies/cm-co]].",
        links=[{"type": "works_at", "target": "companies/cm-co"}],
    )
    put(deps, caller, "notes/cm-note", "On [[companies/cm-co]] and [[companies/cm-co]].")
    before = ok(deps, caller, "entity", {"name": "Cm Co"})["card"]
    stores.close()
    db = sqlite3.connect(tmp_path / "fleetmem.db")
    with db:  # back to schema 10: no link counts, the link rows' covering count index
        for trigger in ("links_groups_ai", "links_groups_ad", "links_groups_au"):
            db.execute(f"DROP TRIGGER {trigger}")
        db.execute("DROP TABLE link_groups")
        db.execute("CREATE INDEX links_count ON links (tenant, target, source_visibility, type)")
        db.execute("PRAGMA user_version = 10")
    db.close()
    stores = open_local(tmp_path)
    try:
        deps = Deps.over(stores, clock=FixedClock(NOW), ids=SortableIds(), embedder=None, llm=None)
        after = ok(deps, caller, "entity", {"name": "Cm Co"})["card"]
        keys = ("referenced_by_count", "backlink_count", "referenced_by")
        assert {k: after[k] for k in keys} == {k: before[k] for k in keys}
        assert after["referenced_by_count"] == 2 and after["backlink_count"] == 1
        put(deps, caller, "notes/cm-more", "And [[companies/cm-co]].")
        assert ok(deps, caller, "entity", {"name": "Cm Co"})["card"]["referenced_by_count"] == 3
    finally:
        stores.close()
    scanned, kept = _counts(tmp_path)
    assert kept == scanned
    db = sqlite3.connect(tmp_path / "fleetmem.db")
    try:
        assert db.execute("SELECT name FROM sqlite_master WHERE name = 'links_count'").fetchone() is None
    finally:
        db.close()


def test_referring_reads_the_same_from_the_rows_as_from_the_counts(tmp_path: Any) -> None:
    """A target with few links is answered from its link rows alone; a hub (more rows than the read
    takes) from `link_groups` and an index range per group. Both give the same counts, groups, order
    and pages shown, for trusted and remote readers."""
    import random

    from fleetmem.adapters.local import open_local

    stores = open_local(tmp_path)
    try:
        deps = Deps.over(stores, clock=FixedClock(NOW), ids=SortableIds(), embedder=None, llm=None)
        caller = local(_caller("t-ref-paths", remote=False))
        rng = random.Random(3)
        for i in range(40):
            kind = rng.choice(["person", "company", "project", ""])
            vis = rng.choice(["world", "world", "private"])
            head = f"---\ntitle: Src {i}\n" + (f"type: {kind}\n" if kind else "") + f"visibility: {vis}\n---\n"
            body = "On [[companies/hub-co]]." + (" Again [[companies/hub-co]]." if i % 3 == 0 else "")
            links = [{"type": "works_at", "target": "companies/hub-co"}] if i % 2 else []
            put(deps, caller, f"notes/src-{i:02d}", head + body, links=links)
        listing = stores.page_listing
        for world_only in (False, True):
            whole = listing.referring("t-ref-paths", "companies/hub-co", world_only=world_only, limit=500)
            counted = listing.referring("t-ref-paths", "companies/hub-co", world_only=world_only, limit=3)
            assert whole.count > REFERRING_PER_GROUP and len(whole.links) > 3  # the two paths were taken
            assert (counted.count, counted.link_count, counted.totals) == (whole.count, whole.link_count, whole.totals)
            assert list(counted.totals) == list(whole.totals)  # groups in the same order
            assert [h.slug for h in counted.heads] == [h.slug for h in whole.heads]
            assert counted.links == whole.links[:3]
    finally:
        stores.close()
