"""entity(name): resolution ranks and ties, suggestions, misses and the full card incl. privacy;
the one resolution it shares with remember and recall; fact-only cards; names in every script.

Runs the tool's `run` over the real local stores (in-memory SQLite) with a FixedClock; the tests
marked `both backends` run again over DynamoDB Local + the OpenSearch node (delta_backends).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tests.unit.domain.delta_backends import BACKENDS, open_deps

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.errors import VerbError
from fleetmem.memory import indexing
from fleetmem.memory.entities import canonicalize_entity
from fleetmem.memory.verbs import entity, put_page, recall, remember
from fleetmem.models import Caller, Fact
from fleetmem.ports import CallContext
from fleetmem.timefmt import to_ms


def put(deps, caller, slug, content="", **kw):
    return put_page.run(deps, caller, put_page.PutPageParams(slug=slug, content=content, **kw), CallContext("t")).body


def lookup(deps, caller, name):
    return entity.run(deps, caller, entity.EntityParams(name=name), CallContext("t")).body


def add_fact(deps, text, *, entity_slug, kind="fact", visibility="world", tenant="t1", age=timedelta(0)):
    fact = Fact(
        tenant=tenant,
        fact_id=deps.ids.new_id("f_"),
        seq=deps.facts.next_seq(tenant),
        text=text,
        kind=kind,
        entity_slug=entity_slug,
        provenance="test",
        visibility=visibility,
        client_id="local",
        created_at=deps.clock.now() - age,
    )
    deps.facts.put(fact)
    return fact


def slugs(items):
    return [s["slug"] for s in items]


def test_an_alias_outranks_an_exact_title(deps, remote_caller):
    put(deps, remote_caller, "notes/phoenix-title", "---\ntitle: Phoenix\n---\nA note.")
    put(
        deps,
        remote_caller,
        "projects/p-7",
        "---\ntitle: Project Seven\naliases: [Phoenix]\n---\nThe project.",
    )
    body = lookup(deps, remote_caller, "  PHOENIX ")
    assert body["found"] is True
    assert body["card"]["entity"]["slug"] == "projects/p-7"
    assert slugs(body["suggestions"]) == ["notes/phoenix-title"]
    assert body["suggestions"][0]["create_safety"] == "exists"


def test_an_exact_title_or_slug_outranks_a_slug_suffix(deps, remote_caller, clock):
    put(deps, remote_caller, "archive/old/atlas", "Suffix match only.")
    clock.advance(seconds=1)
    put(deps, remote_caller, "notes/n1", "---\ntitle: Atlas\n---\nTitle match.")
    assert lookup(deps, remote_caller, "Atlas")["card"]["entity"]["slug"] == "notes/n1"


def test_a_raw_or_slugified_exact_slug_is_rank_one(deps, remote_caller):
    put(deps, remote_caller, "zeta/atlas", "Suffix match.")
    put(deps, remote_caller, "people/alice-example", "Alice.")
    assert lookup(deps, remote_caller, "people/alice-example")["card"]["entity"]["slug"] == "people/alice-example"
    assert lookup(deps, remote_caller, "People/Alice Example")["card"]["entity"]["slug"] == "people/alice-example"


def test_a_slug_suffix_resolves_a_bare_name(deps, remote_caller):
    put(deps, remote_caller, "companies/acme-example", "Acme.")
    body = lookup(deps, remote_caller, "Acme Example")
    assert body["found"] is True and body["card"]["entity"]["slug"] == "companies/acme-example"


def test_ties_break_on_the_most_recently_touched_page(deps, remote_caller, clock):
    put(deps, remote_caller, "people/jordan-a", "---\naliases: [Jordan]\n---\nFirst.")
    clock.advance(minutes=5)
    put(deps, remote_caller, "people/jordan-b", "---\naliases: [Jordan]\n---\nSecond.")
    assert lookup(deps, remote_caller, "jordan")["card"]["entity"]["slug"] == "people/jordan-b"
    clock.advance(minutes=5)
    put(deps, remote_caller, "people/jordan-a", "---\naliases: [Jordan]\n---\nFirst, edited.")
    body = lookup(deps, remote_caller, "jordan")
    assert body["card"]["entity"]["slug"] == "people/jordan-a"
    assert slugs(body["suggestions"]) == ["people/jordan-b"]


def test_at_most_three_runners_up_are_suggested(deps, remote_caller, clock):
    for i in range(6):
        put(deps, remote_caller, f"people/sam-{i}", "---\naliases: [Sam]\n---\nA Sam.")
        clock.advance(seconds=1)
    body = lookup(deps, remote_caller, "Sam")
    assert body["card"]["entity"]["slug"] == "people/sam-5"
    assert slugs(body["suggestions"]) == ["people/sam-4", "people/sam-3", "people/sam-2"]
    assert {s["create_safety"] for s in body["suggestions"]} == {"exists"}


def test_a_miss_is_found_false_with_keyword_near_misses(deps, remote_caller):
    put(
        deps,
        remote_caller,
        "companies/acme-widgets-international",
        "---\ntitle: Acme Widgets International\n---\nX.",
    )
    put(deps, remote_caller, "companies/acme-bank", "---\ntitle: Acme Bank\n---\nY.")
    body = lookup(deps, remote_caller, "Acme Widgets")
    assert body["found"] is False and "card" not in body
    by_slug = {s["slug"]: s["create_safety"] for s in body["suggestions"]}
    assert by_slug["companies/acme-widgets-international"] == "probable"
    assert by_slug.get("companies/acme-bank", "unknown") == "unknown"
    assert len(body["suggestions"]) <= 3
    assert isinstance(body["latency_ms"], int)


def test_a_miss_with_nothing_similar_has_empty_suggestions(deps, remote_caller):
    body = lookup(deps, remote_caller, "Nobody Anywhere")
    assert body == {
        "protocol_version": 1,
        "found": False,
        "suggestions": [],
        "latency_ms": body["latency_ms"],
        "coverage": {"state": "complete", "pending_pages": 0, "last_pass_at": None},
    }


@pytest.mark.parametrize("name", ["", "   "])
def test_an_empty_name_is_invalid_params(deps, remote_caller, name):
    with pytest.raises(VerbError) as err:
        lookup(deps, remote_caller, name)
    assert err.value.code == "invalid_params"
    assert err.value.suggestion


def test_remote_callers_never_resolve_a_private_page(deps, remote_caller, local_caller):
    put(deps, local_caller, "people/secret-agent", "---\naliases: [Shadow]\nvisibility: private\n---\nHidden.")
    hidden = lookup(deps, remote_caller, "Shadow")
    assert hidden["found"] is False and hidden["suggestions"] == []
    remote = lookup(deps, remote_caller, "people/secret-agent")
    assert remote["found"] is False
    assert "people/secret-agent" not in slugs(remote["suggestions"])
    assert lookup(deps, local_caller, "Shadow")["card"]["entity"]["slug"] == "people/secret-agent"


def test_another_tenant_cannot_resolve_the_page(deps, remote_caller, other_tenant_caller):
    put(deps, remote_caller, "people/alice-example", "Alice.")
    body = lookup(deps, other_tenant_caller, "people/alice-example")
    assert body["found"] is False and body["suggestions"] == []


def test_the_card_carries_every_field(deps, remote_caller, clock):
    put(deps, remote_caller, "companies/acme-example", "Acme.")
    put(
        deps,
        remote_caller,
        "people/alice-example",
        "---\ntitle: Alice Example\ntype: person\naliases: [Ali, ALICE,  alice ]\n"
        "timeline:\n  - {date: '2026-06-01', text: Joined Acme}\n"
        "  - {date: '2025-01-01', text: Old news}\n---\n"
        "# Alice\nAlice runs payments at [[companies/acme-example]]. She likes tea.\n",
        links=[{"type": "works_at", "target": "companies/acme-example", "context": "since 2026"}],
    )
    add_fact(deps, "Alice prefers async standups", entity_slug="people/alice-example")
    card = lookup(deps, remote_caller, "Alice Example")["card"]
    assert card["entity"] == {"slug": "people/alice-example", "title": "Alice Example", "type": "person"}
    assert card["aka"] == ["ali", "alice"]
    assert card["summary"] == "Alice runs payments at companies/acme-example."
    assert card["last_touched"] == {
        "updated_at": "2026-06-11T09:30:00.000Z",
        "last_retrieved_at": None,
        "last_timeline_date": "2026-06-01T00:00:00.000Z",
    }
    assert card["open_threads"] == [{"kind": "recent_event", "text": "Joined Acme", "date": "2026-06-01T00:00:00.000Z"}]
    assert card["edges"] == [
        {"type": "works_at", "direction": "out", "slug": "companies/acme-example", "context": "since 2026"},
    ]
    assert card["backlink_count"] == 0
    assert card["active_fact_count"] == 1


def test_the_summary_prefers_frontmatter_and_is_clipped_to_160_characters(deps, remote_caller):
    put(deps, remote_caller, "topics/long", "Body sentence.", summary="word " * 60)
    summary = lookup(deps, remote_caller, "topics/long")["card"]["summary"]
    assert len(summary) == 160 and summary.endswith("…")
    put(deps, remote_caller, "topics/short", "---\nsummary: From frontmatter.\n---\nBody sentence.")
    assert lookup(deps, remote_caller, "topics/short")["card"]["summary"] == "From frontmatter."


def test_private_content_is_stripped_from_the_card_for_remote_callers_only(deps, remote_caller, local_caller):
    put(
        deps,
        local_caller,
        "people/bob",
        "<!-- private -->Bob is in rehab. <!-- /private -->Bob leads sales.\n\n## Health (private)\nDetails.\n",
        timeline=[{"date": "2026-06-05", "text": "Met <!-- private -->his lawyer<!-- /private --> the board"}],
    )
    remote = lookup(deps, remote_caller, "people/bob")["card"]
    local = lookup(deps, local_caller, "people/bob")["card"]
    assert remote["summary"] == "Bob leads sales."
    assert "lawyer" not in remote["open_threads"][0]["text"]
    assert local["summary"] == "Bob is in rehab."
    assert "lawyer" in local["open_threads"][0]["text"]


def test_open_threads_put_commitments_first_keep_90_days_and_cap_at_three(deps, remote_caller, clock):
    put(
        deps,
        remote_caller,
        "people/carol",
        "Carol.",
        timeline=[
            {"date": "2026-06-10", "text": "Signed contract"},
            {"date": "2026-05-01", "text": "Kickoff"},
            {"date": "2026-02-01", "text": "Too old (more than 90 days)"},
        ],
    )
    add_fact(
        deps,
        "Carol will send the deck",
        entity_slug="people/carol",
        kind="commitment",
        age=timedelta(hours=2),
    )
    add_fact(deps, "Carol likes rust", entity_slug="people/carol", kind="preference")
    threads = lookup(deps, remote_caller, "people/carol")["card"]["open_threads"]
    assert [(t["kind"], t["text"]) for t in threads] == [
        ("commitment", "Carol will send the deck"),
        ("recent_event", "Signed contract"),
        ("recent_event", "Kickoff"),
    ]
    clock.advance(days=50)  # Kickoff (2026-05-01) is now older than 90 days
    threads = lookup(deps, remote_caller, "people/carol")["card"]["open_threads"]
    assert [t["text"] for t in threads] == ["Carol will send the deck", "Signed contract"]


def test_private_facts_are_hidden_from_remote_cards(deps, remote_caller, local_caller):
    put(deps, remote_caller, "people/dave", "Dave.")
    add_fact(deps, "Dave owes us money", entity_slug="people/dave", kind="commitment", visibility="private")
    add_fact(deps, "Dave joined in May", entity_slug="people/dave")
    remote = lookup(deps, remote_caller, "people/dave")["card"]
    local = lookup(deps, local_caller, "people/dave")["card"]
    assert remote["active_fact_count"] == 1 and remote["open_threads"] == []
    assert local["active_fact_count"] == 2 and local["open_threads"][0]["text"] == "Dave owes us money"


def test_edges_list_out_links_first_exclude_mentions_and_cap_at_ten(deps, remote_caller):
    out_links = [{"type": "knows", "target": f"people/p{i}"} for i in range(8)]
    put(deps, remote_caller, "people/hub", "Hub mentions [[people/m1]].", links=out_links)
    for i in range(4):
        put(deps, remote_caller, f"people/fan{i}", "Fan.", links=[{"type": "follows", "target": "people/hub"}])
    put(deps, remote_caller, "people/mentioner", "Knows [[people/hub]].")
    card = lookup(deps, remote_caller, "people/hub")["card"]
    edges = card["edges"]
    assert len(edges) == 10
    assert [e["direction"] for e in edges] == ["out"] * 8 + ["in"] * 2
    assert all(e["type"] != "mentions" for e in edges)


def test_backlink_count_counts_incoming_links_except_mentions(deps, remote_caller):
    put(deps, remote_caller, "people/hub", "Hub.")
    for i in range(4):
        put(deps, remote_caller, f"people/fan{i}", "Fan.", links=[{"type": "follows", "target": "people/hub"}])
    put(deps, remote_caller, "people/mentioner", "Knows [[people/hub]].")
    assert lookup(deps, remote_caller, "people/hub")["card"]["backlink_count"] == 4


def test_remote_callers_do_not_see_edges_to_or_from_private_pages(deps, remote_caller, local_caller):
    put(
        deps,
        local_caller,
        "people/ghost",
        "Ghost.",
        visibility="private",
        links=[{"type": "watches", "target": "people/eve"}],
    )
    put(deps, remote_caller, "people/eve", "Eve.", links=[{"type": "knows", "target": "people/ghost"}])
    remote = lookup(deps, remote_caller, "people/eve")["card"]
    local = lookup(deps, local_caller, "people/eve")["card"]
    assert remote["edges"] == [] and remote["backlink_count"] == 0
    assert {(e["direction"], e["slug"]) for e in local["edges"]} == {
        ("out", "people/ghost"),
        ("in", "people/ghost"),
    }
    assert local["backlink_count"] == 1


def test_canonicalize_prefers_an_existing_slug_then_a_unique_alias(deps, remote_caller):
    put(deps, remote_caller, "people/alice-example", "---\naliases: [Ally]\n---\nAlice.")
    assert canonicalize_entity(deps, "t1", "people/alice-example").slug == "people/alice-example"
    assert canonicalize_entity(deps, "t1", " ally ").slug == "people/alice-example"


def test_canonicalize_maps_a_bare_token_to_a_unique_people_or_company_page(deps, remote_caller):
    put(deps, remote_caller, "people/alice-example", "Alice.")
    put(deps, remote_caller, "companies/globex", "Globex.")
    put(deps, remote_caller, "people/bob-one", "Bob 1.")
    put(deps, remote_caller, "companies/bob-two", "Bob 2.")
    assert canonicalize_entity(deps, "t1", "Alice").slug == "people/alice-example"
    assert canonicalize_entity(deps, "t1", "globex").slug == "companies/globex"
    assert canonicalize_entity(deps, "t1", "bob").slug == "bob"  # ambiguous: no guess
    assert canonicalize_entity(deps, "t1", "Alice Smith").slug == "alice-smith"  # not a bare token


def test_canonicalize_never_fuzzy_matches_and_slugifies_otherwise(deps, remote_caller):
    put(deps, remote_caller, "people/alicia", "Alicia.")
    assert canonicalize_entity(deps, "t1", "Alice").slug == "alice"
    assert canonicalize_entity(deps, "t1", "Projects/Big Launch").slug == "projects/big-launch"
    assert canonicalize_entity(deps, "t1", "   ").slug == ""


def test_canonicalize_ignores_private_aliases_unless_asked(deps, local_caller):
    put(deps, local_caller, "people/hidden", "---\naliases: [Mask]\nvisibility: private\n---\nX.")
    assert canonicalize_entity(deps, "t1", "Mask").slug == "mask"
    assert canonicalize_entity(deps, "t1", "Mask", world_only=False).slug == "people/hidden"


def test_entity_is_a_read_only_verb_on_the_verbs_surface():
    spec = entity.SPEC
    assert (spec.surface, spec.scope, spec.writes) == ("verbs", "read", False)
    assert spec.annotations.get("readOnlyHint") is True
    assert spec.description.startswith("MEMORY VERB (v1):")
    # `names` (D35) is the alternative to `name`: neither is schema-required; `entity{}` is invalid_params
    schema = spec.input_schema()
    assert schema.get("required", []) == [] and {"name", "names"} <= set(schema["properties"])


# --- one resolution for remember, recall and entity -------------------------------------------


def save(deps, caller, name, fact, **kw):
    args = {"fact": fact, "provenance": "chat", "entity": name, **kw}
    return remember.run(deps, caller, remember.RememberParams.model_validate(args), CallContext("t")).body


def recalled(deps, caller, name):
    body = recall.run(deps, caller, recall.RecallParams.model_validate({"entity": name}), CallContext("t")).body
    return [f["fact"] for f in body["facts"]]


def test_a_bare_token_resolves_for_entity_as_it_does_for_remember_and_recall(deps, remote_caller):
    put(deps, remote_caller, "people/zora-quill", "---\ntitle: Zora Quill\n---\nZora designs engines.")
    assert save(deps, remote_caller, "Zora", "Zora prefers tea")["entity_slug"] == "people/zora-quill"
    assert recalled(deps, remote_caller, "Zora") == ["Zora prefers tea"]
    body = lookup(deps, remote_caller, "Zora")
    assert body["found"] is True
    assert body["card"]["entity"]["slug"] == "people/zora-quill"
    assert body["card"]["page"] is True and body["card"]["active_fact_count"] == 1


def test_an_entity_with_facts_but_no_page_has_a_fact_only_card(deps, remote_caller):
    save(deps, remote_caller, "Dana Vance", "Dana will send the contract by Friday", kind="commitment")
    save(deps, remote_caller, "Dana Vance", "Dana lives in Lisbon")
    body = lookup(deps, remote_caller, "dana vance")
    assert body["found"] is True and body["suggestions"] == []
    card = body["card"]
    assert card["entity"] == {"slug": "dana-vance", "title": "dana vance", "type": None}
    assert card["page"] is False
    assert card["active_fact_count"] == 2
    assert [t["text"] for t in card["open_threads"]] == ["Dana will send the contract by Friday"]
    assert card["open_threads"][0]["kind"] == "commitment"
    assert (card["edges"], card["backlink_count"], card["aka"], card["summary"]) == ([], 0, [], "")
    assert entity.EntityResult.model_validate(body)  # the advertised result shape


def test_a_fact_only_card_takes_its_type_from_the_slug_folder_and_its_title_from_the_slug(deps, remote_caller):
    save(deps, remote_caller, "people/ivo-brandt", "Ivo joined in May")
    card = lookup(deps, remote_caller, "people/ivo-brandt")["card"]
    assert card["entity"] == {"slug": "people/ivo-brandt", "title": "ivo brandt", "type": "person"}


def test_a_fact_only_card_lists_pages_that_link_to_it(deps, remote_caller):
    save(deps, remote_caller, "projects/orion", "Orion ships in March")
    put(deps, remote_caller, "people/lead", "Leads Orion.", links=[{"type": "leads", "target": "projects/orion"}])
    card = lookup(deps, remote_caller, "projects/orion")["card"]
    assert card["page"] is False and card["entity"]["type"] == "project"
    assert card["edges"] == [{"type": "leads", "direction": "in", "slug": "people/lead", "context": None}]
    assert card["backlink_count"] == 1


def test_the_fact_only_card_is_where_remember_filed_the_facts_even_when_pages_tie(deps, remote_caller, clock):
    put(deps, remote_caller, "people/jordan-a", "---\naliases: [Jordan]\n---\nFirst.")
    clock.advance(minutes=1)
    put(deps, remote_caller, "people/jordan-b", "---\naliases: [Jordan]\n---\nSecond.")
    assert save(deps, remote_caller, "Jordan", "Jordan asked for a demo")["entity_slug"] == "jordan"
    body = lookup(deps, remote_caller, "Jordan")
    assert body["card"]["entity"]["slug"] == "jordan" and body["card"]["page"] is False
    assert slugs(body["suggestions"]) == ["people/jordan-b", "people/jordan-a"]
    assert recalled(deps, remote_caller, "Jordan") == ["Jordan asked for a demo"]


def test_private_facts_never_make_a_fact_only_card_for_a_remote_caller(deps, remote_caller, local_caller):
    save(deps, local_caller, "Quiet Person", "Quiet Person is on leave", visibility="private")
    assert lookup(deps, remote_caller, "Quiet Person")["found"] is False
    assert lookup(deps, local_caller, "Quiet Person")["card"]["active_fact_count"] == 1


@pytest.mark.parametrize("name", ["!!!///???", "—", "🚀🚀"])
def test_a_name_with_no_letter_or_digit_is_invalid_params_everywhere(deps, remote_caller, name):
    for call in (
        lambda: lookup(deps, remote_caller, name),
        lambda: save(deps, remote_caller, name, "Something happened"),
        lambda: recalled(deps, remote_caller, name),
    ):
        with pytest.raises(VerbError) as err:
            call()
        assert err.value.code == "invalid_params"
        assert err.value.fix is not None and err.value.fix.mcp is None  # nothing guessed to run
        assert "letter or digit" in err.value.suggestion
    assert deps.fact_listing.recent("t1", now=deps.clock.now(), world_only=False, limit=10) == []


def test_a_name_of_symbols_still_resolves_when_a_page_has_it_as_an_alias(deps, remote_caller):
    put(deps, remote_caller, "topics/question-marks", "---\naliases: ['???']\n---\nPunctuation.")
    assert save(deps, remote_caller, "???", "Three marks")["entity_slug"] == "topics/question-marks"
    assert lookup(deps, remote_caller, "???")["card"]["entity"]["slug"] == "topics/question-marks"


def test_latency_ms_is_a_whole_number_of_at_least_one(deps, remote_caller):
    # rounded up from a positive duration, so a sub-millisecond call reports 1, never 0
    for name in ("Nobody Here", "Zora"):
        assert lookup(deps, remote_caller, name)["latency_ms"] >= 1


def test_card_summaries_strip_markup_but_keep_intraword_underscores_and_asterisks(deps, remote_caller):
    put(
        deps,
        remote_caller,
        "topics/verbs",
        "MEMORY_VERBS is the **frozen** spec for `snake_case_name` and *all* _seven_ verbs, 2*3*4 ways.",
    )
    assert lookup(deps, remote_caller, "topics/verbs")["card"]["summary"] == (
        "MEMORY_VERBS is the frozen spec for snake_case_name and all seven verbs, 2*3*4 ways."
    )


# --- names in every script, on both adapter sets -------------------------------------------------


@pytest.fixture
def bdeps(request: pytest.FixtureRequest) -> Any:
    clock = FixedClock(to_ms(datetime.now(UTC)))  # DynamoDB Local runs TTLs on the wall clock
    backend = getattr(request, "param", "sqlite")
    with open_deps(backend, request, clock) as d:
        d.test_tenant = "t-" + uuid.uuid4().hex[:12]  # a fresh tenant per test (shared tables)
        yield d


def _caller(d: Any) -> Caller:
    return Caller(tenant=d.test_tenant, client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)


NAMES = [
    ("北京办公室", "北京办公室"),
    ("Сергей Иванов", "сергей-иванов"),
    ("محمد علي", "محمد-علي"),
    ("Łukasz Müller", "łukasz-müller"),
]


@pytest.mark.parametrize("bdeps", BACKENDS, indirect=True)
def test_names_in_every_script_are_filed_found_and_carded(bdeps):
    caller = _caller(bdeps)
    for name, slug in NAMES:
        assert save(bdeps, caller, name, f"{name} signed the lease")["entity_slug"] == slug
        assert recalled(bdeps, caller, name) == [f"{name} signed the lease"]
        body = lookup(bdeps, caller, name)
        assert body["found"] is True, name
        assert body["card"]["entity"] == {"slug": slug, "title": name, "type": None}
        assert body["card"]["active_fact_count"] == 1


@pytest.mark.parametrize("bdeps", BACKENDS, indirect=True)
def test_pages_with_multibyte_slugs_at_the_length_limit_are_stored_indexed_and_found(bdeps):
    caller = _caller(bdeps)
    long_slug = "offices/" + "北" * 100 + "/" + "京" * 91  # 200 characters, 584 UTF-8 bytes
    for slug in ("offices/北京办公室", "people/сергей-иванов", long_slug):
        put(bdeps, caller, slug, "---\ntitle: Office\n---\nThe office opens at nine.")
        page = bdeps.pages.get(caller.tenant, slug)
        assert page is not None and page.slug == slug
        bdeps.search.replace_page(caller.tenant, slug, indexing.docs_for_page(page))  # the stream indexer's write
        assert save(bdeps, caller, slug, "Rent is due monthly")["entity_slug"] == slug
        card = lookup(bdeps, caller, slug)["card"]
        assert (card["entity"]["slug"], card["page"], card["active_fact_count"]) == (slug, True, 1)
    client = getattr(bdeps.search, "client", None)
    if client is not None:  # OpenSearch: make the writes searchable now
        client.indices.refresh(index=bdeps.search.index)
    found = recall.run(
        bdeps, caller, recall.RecallParams.model_validate({"query": "office opens nine"}), CallContext("t")
    ).body
    assert {"offices/北京办公室", "people/сергей-иванов", long_slug} <= {r["slug"] for r in found["results"]}
    bdeps.search.delete_page(caller.tenant, long_slug)


@pytest.mark.parametrize("bdeps", BACKENDS, indirect=True)
def test_a_bare_token_in_cyrillic_resolves_to_the_only_people_page(bdeps):
    caller = _caller(bdeps)
    put(bdeps, caller, "people/сергей-иванов", "Sergei.")
    assert save(bdeps, caller, "Сергей", "Sergei moved to Riga")["entity_slug"] == "people/сергей-иванов"
    assert lookup(bdeps, caller, "Сергей")["card"]["entity"]["slug"] == "people/сергей-иванов"
    assert recalled(bdeps, caller, "сергей") == ["Sergei moved to Riga"]


def test_accented_names_still_find_pages_whose_slugs_were_written_without_accents(deps, remote_caller):
    put(deps, remote_caller, "people/jose-garcia", "José.")
    put(deps, remote_caller, "people/zoe-muller", "Zoë.")
    assert canonicalize_entity(deps, "t1", "José").slug == "people/jose-garcia"
    assert canonicalize_entity(deps, "t1", "people/Zoë Müller").slug == "people/zoe-muller"
    assert lookup(deps, remote_caller, "José")["card"]["entity"]["slug"] == "people/jose-garcia"
