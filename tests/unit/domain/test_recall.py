"""recall (PROTOCOL_NOTES §3, §5, D4, D8, D9, D13): one facts filter, per-arm limits, privacy,
read-time expiry, the hybrid search arm with evidence, degraded search, budget packing."""

from __future__ import annotations

import pytest

from fleetmem.errors import Unavailable, VerbError
from fleetmem.memory.budget import cost, costs
from fleetmem.memory.indexing import docs_for_page, embed_docs
from fleetmem.memory.registry import REGISTRY
from fleetmem.memory.verbs import forget, recall, remember
from fleetmem.models import Page
from fleetmem.ports import CallContext
from fleetmem.timefmt import iso

CTX = CallContext("test-correlation")


def save(deps, caller, **args):
    return remember.run(deps, caller, remember.RememberParams.model_validate(args), CTX).body


def ask(deps, caller, **args):
    return recall.run(deps, caller, recall.RecallParams.model_validate(args), CTX)


def ask_error(deps, caller, **args) -> VerbError:
    with pytest.raises(VerbError) as err:
        ask(deps, caller, **args)
    return err.value


def seed_page(deps, slug, title, body, *, aliases=(), visibility="world"):
    now = deps.clock.now()
    page = Page(
        tenant="t1",
        slug=slug,
        title=title,
        body=body,
        aliases=aliases,
        visibility=visibility,
        created_at=now,
        updated_at=now,
    )
    deps.pages.put(page)
    docs, _ = embed_docs(deps, docs_for_page(page))
    deps.search.upsert(docs)
    return page


def codes(outcome):
    return [n.code for n in outcome.notices]


# --- empty brain and shape -------------------------------------------------------------------------


def test_an_empty_brain_returns_empty_arrays_and_success(deps, remote_caller):
    out = ask(deps, remote_caller)
    assert out.body == {"protocol_version": 1, "facts": [], "total": 0, "results": []}


def test_an_empty_brain_with_a_query_adds_an_empty_retrieval_info_notice(deps, remote_caller):
    out = ask(deps, remote_caller, query="anything at all")
    assert out.body["facts"] == [] and out.body["results"] == []
    assert codes(out) == ["empty_retrieval"]
    assert out.notices[0].kind == "info"


def test_fact_items_carry_the_legacy_fields_plus_fact_id_and_provenance(deps, remote_caller):
    saved = save(
        deps,
        remote_caller,
        fact="Alice likes tea",
        provenance="chat",
        entity="people/alice",
        kind="preference",
        ttl="30d",
        session_id="s1",
    )
    [item] = ask(deps, remote_caller).body["facts"]
    assert item == {
        "id": 1,
        "fact_id": saved["id"],
        "fact": "Alice likes tea",
        "kind": "preference",
        "entity_slug": "people/alice",
        "provenance": "chat",
        "visibility": "world",
        "created_at": "2026-06-11T09:30:00.000Z",
        "valid_until": "2026-07-11T09:30:00.000Z",
        "session_id": "s1",
    }
    assert isinstance(item["id"], int) and isinstance(item["fact_id"], str)


# --- the facts arm's filters (D31: since ANDs with entity or session_id) --------------------------


def _three_facts(deps, caller, clock):
    a = save(deps, caller, fact="about alice", provenance="p", entity="people/alice", session_id="s-1")
    clock.advance(minutes=1)
    b = save(deps, caller, fact="in session two", provenance="p", session_id="s-2")
    clock.advance(minutes=1)
    c = save(deps, caller, fact="latest note", provenance="p")
    return a["id"], b["id"], c["id"]


def test_without_a_filter_the_most_recent_facts_come_first(deps, remote_caller, clock):
    a, b, c = _three_facts(deps, remote_caller, clock)
    assert [f["fact_id"] for f in ask(deps, remote_caller).body["facts"]] == [c, b, a]


def test_entity_beats_session_and_since_ands_with_it(deps, remote_caller, clock):
    a, _, _ = _three_facts(deps, remote_caller, clock)
    body = ask(deps, remote_caller, entity="people/alice", session_id="s-2", since="2026-01-01").body
    assert [f["fact_id"] for f in body["facts"]] == [a]
    body = ask(deps, remote_caller, entity="people/alice", session_id="s-2", since="2030-01-01").body
    assert body["facts"] == []  # D31: since ANDs with the entity filter


def test_since_ands_with_session(deps, remote_caller, clock):
    _, b, _ = _three_facts(deps, remote_caller, clock)
    body = ask(deps, remote_caller, session_id="s-2", since="2026-01-01").body
    assert [f["fact_id"] for f in body["facts"]] == [b]
    assert ask(deps, remote_caller, session_id="s-2", since="2030-01-01").body["facts"] == []  # D31


def test_since_keeps_only_facts_created_after_it(deps, remote_caller, clock):
    _, b, c = _three_facts(deps, remote_caller, clock)
    body = ask(deps, remote_caller, since="2026-06-11T09:30:30Z").body
    assert [f["fact_id"] for f in body["facts"]] == [c, b]


def test_the_entity_filter_is_canonicalized_like_remember(deps, remote_caller):
    saved = save(deps, remote_caller, fact="x", provenance="p", entity="people/alice-example")
    body = ask(deps, remote_caller, entity="People/Alice Example").body
    assert [f["fact_id"] for f in body["facts"]] == [saved["id"]]


def test_a_bad_since_is_invalid_params_without_a_made_up_time(deps, remote_caller):
    err = ask_error(deps, remote_caller, since="last tuesday", entity="people/x")
    assert err.code == "invalid_params"
    # which instant was meant is the caller's to say: no corrected call, the why gives the format
    assert err.fix is not None and err.fix.mcp is None and err.fix.amend is None
    assert "ISO 8601" in err.fix.why and "2026-06-01" in err.fix.why


# --- limit ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "expected"), [(0, 1), (-3, 1), (2, 2), (1000, 5)])
def test_limit_is_clamped_not_rejected(deps, remote_caller, limit, expected):
    for i in range(5):
        save(deps, remote_caller, fact=f"fact number {i}", provenance="p")
    assert len(ask(deps, remote_caller, limit=limit).body["facts"]) == expected


def test_limit_caps_at_one_hundred(deps, remote_caller):
    for i in range(105):  # one entity each: dedup compares facts of the same entity only
        save(deps, remote_caller, fact=f"fact number {i}", provenance="p", entity=f"people/p{i}")
    assert len(ask(deps, remote_caller, limit=500).body["facts"]) == 100
    assert len(ask(deps, remote_caller).body["facts"]) == 50


def test_a_non_numeric_limit_is_invalid_params_with_a_fix_keeping_the_query(deps, remote_caller):
    err = ask_error(deps, remote_caller, query="tea", limit="abc")
    assert err.code == "invalid_params"
    assert err.fix.mcp == {"tool": "recall", "arguments": {"query": "tea", "limit": 50}}


# --- visibility, tenancy, expiry ------------------------------------------------------------------


def test_remote_callers_never_see_private_facts_even_when_asking(deps, remote_caller, local_caller):
    save(deps, local_caller, fact="private thing", provenance="p", visibility="private", entity="people/a")
    world = save(deps, local_caller, fact="world thing", provenance="p", entity="people/a")
    for args in (
        {},
        {"include_private": True},
        {"entity": "people/a", "include_private": True},
        {"query": "thing", "include_private": True},
    ):
        assert [f["fact_id"] for f in ask(deps, remote_caller, **args).body["facts"]] == [world["id"]]


def test_trusted_local_callers_see_private_facts_only_when_asking(deps, local_caller):
    save(deps, local_caller, fact="private thing", provenance="p", visibility="private")
    assert ask(deps, local_caller).body["facts"] == []
    assert len(ask(deps, local_caller, include_private=True).body["facts"]) == 1


def test_another_tenants_facts_are_invisible(deps, remote_caller, other_tenant_caller):
    save(deps, remote_caller, fact="tenant one secret", provenance="p", entity="people/a")
    for args in ({}, {"entity": "people/a"}, {"query": "secret"}):
        assert ask(deps, other_tenant_caller, **args).body["facts"] == []


def test_facts_past_their_ttl_disappear_at_read_time_unless_include_expired(deps, remote_caller, clock):
    saved = save(deps, remote_caller, fact="Temporary badge code 1234", provenance="p", entity="people/a", ttl="1h")
    assert len(ask(deps, remote_caller, entity="people/a").body["facts"]) == 1
    clock.advance(minutes=61)
    assert ask(deps, remote_caller, entity="people/a").body["facts"] == []
    assert ask(deps, remote_caller).body["facts"] == []
    assert ask(deps, remote_caller, query="badge code").body["facts"] == []
    widened = ask(deps, remote_caller, entity="people/a", include_expired=True).body["facts"]
    assert [f["fact_id"] for f in widened] == [saved["id"]]


def test_forgotten_facts_are_hidden_unless_include_expired(deps, remote_caller):
    saved = save(deps, remote_caller, fact="Wrong fact", provenance="p")
    forget.run(deps, remote_caller, forget.ForgetParams(id=saved["id"]), CTX)
    assert ask(deps, remote_caller).body["facts"] == []
    assert [f["fact_id"] for f in ask(deps, remote_caller, include_expired=True).body["facts"]] == [saved["id"]]


# --- D13: relevance-ranked facts with a query and no filter --------------------------------------


def test_a_query_without_a_filter_ranks_facts_by_relevance_not_recency(deps, remote_caller, clock):
    tea = save(deps, remote_caller, fact="Alice drinks green tea every morning", provenance="p")
    clock.advance(minutes=5)
    newer = save(deps, remote_caller, fact="The build server runs on Fridays", provenance="p")
    body = ask(deps, remote_caller, query="green tea").body
    assert body["facts"][0]["fact_id"] == tea["id"]
    # without a query the newer fact leads
    assert ask(deps, remote_caller).body["facts"][0]["fact_id"] == newer["id"]


def test_a_query_with_a_filter_keeps_the_filters_order(deps, remote_caller, clock):
    first = save(deps, remote_caller, fact="tea tea tea", provenance="p", entity="people/a")
    clock.advance(minutes=1)
    second = save(deps, remote_caller, fact="unrelated words", provenance="p", entity="people/a")
    body = ask(deps, remote_caller, query="tea", entity="people/a").body
    assert [f["fact_id"] for f in body["facts"]] == [second["id"], first["id"]]


def test_relevance_ranked_facts_work_keyword_only(deps_keyword_only, remote_caller):
    tea = save(deps_keyword_only, remote_caller, fact="Alice drinks green tea", provenance="p")
    save(deps_keyword_only, remote_caller, fact="The build server runs", provenance="p")
    out = ask(deps_keyword_only, remote_caller, query="tea")
    assert [f["fact_id"] for f in out.body["facts"]] == [tea["id"]]
    assert out.body["search_degraded"]


# --- the search arm -----------------------------------------------------------------------------


def test_search_results_carry_slug_title_chunk_evidence_safety_and_provenance(deps, remote_caller):
    seed_page(deps, "companies/acme", "Acme Corp", "Acme sells rockets.\n\n## Pricing\nPer-seat pricing since 2024.")
    [hit] = ask(deps, remote_caller, query="per-seat pricing").body["results"]
    assert set(hit) == {"slug", "title", "chunk", "evidence", "create_safety", "provenance"}
    assert hit["slug"] == "companies/acme" and hit["provenance"] == "companies/acme"
    assert hit["title"] == "Acme Corp"
    assert "Per-seat pricing" in hit["chunk"]


def test_results_are_deduplicated_per_page(deps, remote_caller):
    seed_page(deps, "topics/tea", "Tea", "Tea intro.\n\n## Green tea\nGreen tea notes.\n\n## Black tea\nBlack tea.")
    results = ask(deps, remote_caller, query="tea").body["results"]
    assert [r["slug"] for r in results] == ["topics/tea"]


def test_an_alias_query_is_an_alias_hit_that_exists(deps, remote_caller):
    seed_page(deps, "companies/acme", "Acme Corporation", "Makes anvils.", aliases=("roadrunner supply",))
    [hit] = ask(deps, remote_caller, query="Roadrunner  Supply").body["results"]
    assert (hit["evidence"], hit["create_safety"]) == ("alias_hit", "exists")


def test_a_query_phrase_in_the_title_is_an_exact_title_match(deps, remote_caller):
    seed_page(deps, "projects/apollo-launch", "Apollo Launch Plan", "Dates and owners.")
    [hit] = ask(deps, remote_caller, query="apollo launch").body["results"]
    assert (hit["evidence"], hit["create_safety"]) == ("exact_title_match", "exists")


def test_a_near_identical_vector_is_a_high_vector_match(deps, remote_caller):
    seed_page(deps, "notes/q3", "Finance", "quarterly revenue grew")
    [hit] = ask(deps, remote_caller, query="quarterly revenue grew").body["results"]
    assert (hit["evidence"], hit["create_safety"]) == ("high_vector_match", "exists")


def test_a_lexical_hit_covering_every_query_word_is_keyword_exact(deps_keyword_only, remote_caller):
    seed_page(deps_keyword_only, "notes/ops", "Operations", "The backup rotation runs nightly at 2am.")
    [hit] = ask(deps_keyword_only, remote_caller, query="backup rotation").body["results"]
    assert (hit["evidence"], hit["create_safety"]) == ("keyword_exact", "probable")


def test_a_partial_lexical_hit_is_weak_semantic(deps_keyword_only, remote_caller):
    seed_page(deps_keyword_only, "notes/ops", "Operations", "The backup rotation runs nightly.")
    [hit] = ask(deps_keyword_only, remote_caller, query="backup volcano").body["results"]
    assert (hit["evidence"], hit["create_safety"]) == ("weak_semantic", "unknown")


def test_private_pages_and_private_sections_never_reach_remote_callers(deps, remote_caller, local_caller):
    seed_page(deps, "people/zed", "Zed", "Hidden zeppelin plans.", visibility="private")
    seed_page(deps, "people/amy", "Amy", "Likes kites.\n\n<!-- private -->zeppelin salary<!-- /private -->")
    remote = ask(deps, remote_caller, query="zeppelin", include_private=True).body["results"]
    assert all("zeppelin" not in r["chunk"] for r in remote)
    assert "people/zed" not in {r["slug"] for r in remote}
    local = ask(deps, local_caller, query="zeppelin", include_private=True).body["results"]
    assert {"people/zed", "people/amy"} <= {r["slug"] for r in local}


def test_no_search_arm_without_a_query(deps, remote_caller):
    seed_page(deps, "companies/acme", "Acme", "Body.")
    assert ask(deps, remote_caller, query="   ").body["results"] == []


def test_one_embedding_call_serves_both_the_facts_and_the_page_arms(deps, remote_caller):
    seed_page(deps, "companies/acme", "Acme", "Rockets for sale.")
    save(deps, remote_caller, fact="rockets are loud", provenance="p")
    inner = deps.embedder
    calls = []

    class Counting:
        """Wraps the test embedder to count provider round-trips."""

        model_id, dim = inner.model_id, inner.dim

        def embed(self, texts):
            calls.append(list(texts))
            return inner.embed(texts)

    deps.embedder = Counting()
    body = ask(deps, remote_caller, query="rockets").body
    assert body["facts"] and body["results"]
    assert calls == [["rockets"]]
    # A query asking two questions: each is searched too, and all three texts share the one call.
    calls.clear()
    body = ask(deps, remote_caller, query="What is for sale, and which things are loud?").body
    assert calls == [["What is for sale, and which things are loud?", "What is for sale", "which things are loud"]]
    assert [r["slug"] for r in body["results"]] == ["companies/acme"]
    assert [f["fact"] for f in body["facts"]] == ["rockets are loud"]


# --- degraded search ------------------------------------------------------------------------------


def test_without_an_embedder_search_is_keyword_only_and_says_so(deps_keyword_only, remote_caller):
    seed_page(deps_keyword_only, "companies/acme", "Acme", "Rockets for sale.")
    out = ask(deps_keyword_only, remote_caller, query="rockets")
    assert [r["slug"] for r in out.body["results"]] == ["companies/acme"]
    assert out.body["search_degraded"] == deps_keyword_only.diagnostics.embedder_problem
    assert "degraded_recall" in codes(out)
    assert next(n for n in out.notices if n.code == "degraded_recall").kind == "degraded"


def test_a_failing_embedder_degrades_search_instead_of_failing(deps, remote_caller):
    seed_page(deps, "companies/acme", "Acme", "Rockets for sale.")

    class Down:
        """Stands in for a throttled embedding provider (Bedrock), which cannot run here."""

        model_id, dim = deps.embedder.model_id, deps.embedder.dim

        def embed(self, texts):
            raise Unavailable("throttled", reason="throttled")

    deps.embedder = Down()
    out = ask(deps, remote_caller, query="rockets")
    assert [r["slug"] for r in out.body["results"]] == ["companies/acme"]
    assert "throttled" in out.body["search_degraded"]
    assert "degraded_recall" in codes(out)


def test_a_degraded_empty_result_carries_both_notices(deps_keyword_only, remote_caller):
    out = ask(deps_keyword_only, remote_caller, query="nothing here")
    assert codes(out) == ["degraded_recall", "empty_retrieval"]


def test_a_healthy_search_has_no_degraded_field(deps, remote_caller):
    seed_page(deps, "companies/acme", "Acme", "Rockets for sale.")
    out = ask(deps, remote_caller, query="rockets")
    assert "search_degraded" not in out.body and out.notices == []


# --- budget -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-5, 0, 1.5, "abc", True])
def test_a_budget_that_is_not_an_integer_of_at_least_one_is_invalid_params(deps, remote_caller, bad):
    err = ask_error(deps, remote_caller, query="tea", entity="people/a", budget_tokens=bad)
    assert err.code == "invalid_params"
    fixed = err.fix.mcp["arguments"]
    assert fixed["query"] == "tea" and fixed["entity"] == "people/a"
    assert isinstance(fixed["budget_tokens"], int) and fixed["budget_tokens"] >= 1
    assert ask(deps, remote_caller, **fixed).body["budget_tokens"] == fixed["budget_tokens"]


def test_budget_fields_appear_only_when_a_budget_is_given(deps, remote_caller):
    save(deps, remote_caller, fact="abcd", provenance="p")
    assert "budget_used" not in ask(deps, remote_caller).body
    body = ask(deps, remote_caller, budget_tokens=100).body
    assert (body["budget_tokens"], body["budget_used"], body["dropped_count"]) == (100, 1, 0)


def test_facts_pack_first_and_the_walk_stops_at_the_first_item_that_does_not_fit(deps, remote_caller, clock):
    texts = ["a" * 8, "b" * 40, "c" * 4]  # newest first after the loop: c (1), b (10), a (2)
    for t in texts:
        save(deps, remote_caller, fact=t, provenance="p")
        clock.advance(seconds=1)
    body = ask(deps, remote_caller, budget_tokens=5).body
    assert [f["fact"] for f in body["facts"]] == ["c" * 4]
    assert body["total"] == 1
    assert (body["budget_used"], body["dropped_count"]) == (1, 2)


def test_search_results_take_the_remainder_at_title_plus_chunk_cost(deps, remote_caller):
    save(deps, remote_caller, fact="rockets are loud", provenance="p", entity="people/a")
    seed_page(deps, "companies/acme", "Acme", "Rockets for sale.")
    full = ask(deps, remote_caller, query="rockets", entity="people/a").body
    [hit] = full["results"]
    need = cost("rockets are loud") + costs(hit["title"], hit["chunk"])
    fits = ask(deps, remote_caller, query="rockets", entity="people/a", budget_tokens=need).body
    assert (len(fits["facts"]), len(fits["results"]), fits["budget_used"], fits["dropped_count"]) == (
        1,
        1,
        need,
        0,
    )
    short = ask(deps, remote_caller, query="rockets", entity="people/a", budget_tokens=need - 1).body
    assert (len(short["facts"]), short["results"], short["dropped_count"]) == (1, [], 1)
    assert short["budget_used"] <= need - 1


# --- registration ----------------------------------------------------------------------------------


def test_recall_is_registered_as_a_read_only_verb():
    spec = REGISTRY["recall"]
    assert (spec.scope, spec.surface, spec.writes) == ("read", "verbs", False)
    assert spec.annotations.get("readOnlyHint") is True
    assert spec.description.startswith("MEMORY VERB (v1):")
    props = spec.input_schema()["properties"]
    assert props["budget_tokens"]["type"] == "integer" and props["limit"]["type"] == "integer"


# --- include_expired tells live facts from dead ones; limit clamping is said (issue 8, items 7, 11) ---


def test_include_expired_gives_every_fact_its_status_and_why(deps, remote_caller, clock):
    old = save(deps, remote_caller, fact="Alice works at Acme", provenance="p", entity="people/a")
    stored = deps.facts.get("t1", old["id"])
    clock.advance(minutes=1)
    replacement = stored.model_copy(
        update={
            "fact_id": "f_new",
            "seq": deps.facts.next_seq("t1"),
            "text": "Alice left Acme",
            "created_at": clock.now(),
            "supersedes": stored.fact_id,
        }
    )
    deps.facts.put(replacement, supersede=stored)  # what remember does when it supersedes
    new = {"id": "f_new"}
    gone = save(deps, remote_caller, fact="Alice owns a boat", provenance="p", entity="people/a")
    forget.run(deps, remote_caller, forget.ForgetParams(id=gone["id"]), CTX)
    clock.advance(minutes=1)
    brief = save(deps, remote_caller, fact="Alice is at the offsite", provenance="p", entity="people/a", ttl="1h")
    clock.advance(minutes=61)

    items = {f["fact_id"]: f for f in ask(deps, remote_caller, entity="people/a", include_expired=True).body["facts"]}
    superseded_at = deps.facts.get("t1", old["id"]).expired_at
    assert {k: items[old["id"]].get(k) for k in ("status", "superseded_by")} == {
        "status": "superseded",
        "superseded_by": new["id"],
    }
    assert items[old["id"]]["expired_at"] == iso(superseded_at)
    assert items[new["id"]]["status"] == "active"
    assert "expired_at" not in items[new["id"]] and "superseded_by" not in items[new["id"]]
    assert items[gone["id"]]["status"] == "forgotten" and items[gone["id"]]["expired_at"].endswith("Z")
    assert "superseded_by" not in items[gone["id"]]
    assert items[brief["id"]]["status"] == "expired"
    assert items[brief["id"]]["expired_at"] == brief["valid_until"]
    recall.RecallResult.model_validate(ask(deps, remote_caller, entity="people/a", include_expired=True).body)
    # without include_expired the items keep their frozen shape
    plain = ask(deps, remote_caller, entity="people/a").body["facts"]
    assert [f["fact_id"] for f in plain] == [new["id"]] and "status" not in plain[0]


@pytest.mark.parametrize(
    ("limit", "clamped"),
    [(0, True), (-3, True), (101, True), (500, True), (1, False), (100, False), (2.0, False)],
)
def test_a_limit_outside_one_to_one_hundred_is_clamped_with_a_notice(deps, remote_caller, limit, clamped):
    save(deps, remote_caller, fact="one fact", provenance="p")
    out = ask(deps, remote_caller, limit=limit)
    assert ("clamped" in codes(out)) is clamped
    if clamped:
        notice = next(n for n in out.notices if n.code == "clamped")
        assert str(limit) in notice.why and ("100" in notice.why or "limit 1 " in notice.why)
