"""remember (PROTOCOL_NOTES §4, D5–D7, D11): validation order, TTL, canonical entities, dedup and
supersession, audit rows, write-through indexing. Runs over the in-memory local stores."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime

import pytest
from tests.unit.domain.delta_backends import BACKENDS, open_deps

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.errors import Unavailable, VerbError
from fleetmem.memory.registry import REGISTRY
from fleetmem.memory.verbs import forget, recall, remember
from fleetmem.models import Caller, Page, SearchQuery
from fleetmem.ports import CallContext
from fleetmem.timefmt import to_ms
from fleetmem.transport.dispatch import dispatch

CTX = CallContext("test-correlation")


def save(deps, caller, **args):
    return remember.run(deps, caller, remember.RememberParams.model_validate(args), CTX).body


def save_error(deps, caller, **args) -> VerbError:
    with pytest.raises(VerbError) as err:
        remember.run(deps, caller, remember.RememberParams.model_validate(args), CTX)
    return err.value


def facts_of(deps, caller, **args):
    return recall.run(deps, caller, recall.RecallParams.model_validate(args), CTX).body["facts"]


class TableEmbedder:
    """Deterministic test embedder: maps chosen texts to chosen unit vectors, so the 0.95
    dedup/supersession threshold is exercised exactly. Unknown texts map to a fixed orthogonal
    direction. The real MiniLM model is tested in tests/unit/embedder; this pins the domain rule."""

    model_id = "table-test"
    dim = 3

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed(self, texts):
        return [self.table.get(t, [0.0, 0.0, 1.0]) for t in texts]


def _at(cos: float) -> list[float]:
    return [cos, math.sqrt(1 - cos * cos), 0.0]


# --- the happy path --------------------------------------------------------------------------------


def test_a_new_fact_is_inserted_with_every_response_field(deps, remote_caller):
    body = save(
        deps,
        remote_caller,
        fact="Alice prefers async standups",
        provenance="chat 2026-06-11",
        entity="people/alice",
    )
    assert body["status"] == "inserted"
    assert isinstance(body["id"], str) and body["id"].startswith("f_")
    assert body["status_text"] == "Saved fact #1"
    assert body["entity_slug"] == "people/alice"
    assert body["valid_until"] is None
    assert body["protocol_version"] == 1
    assert body["search_state"] == "current"
    assert "degraded_dedup" not in body


def test_omitted_optional_inputs_echo_as_null(deps, remote_caller):
    body = save(deps, remote_caller, fact="The office moves in July", provenance="memo")
    assert "entity_slug" in body and body["entity_slug"] is None
    assert "valid_until" in body and body["valid_until"] is None


def test_sequence_numbers_grow_per_tenant_and_become_recalls_legacy_id(deps, remote_caller, other_tenant_caller):
    a = save(deps, remote_caller, fact="one", provenance="p")
    b = save(deps, remote_caller, fact="two", provenance="p")
    c = save(deps, other_tenant_caller, fact="three", provenance="p")
    assert (a["status_text"], b["status_text"], c["status_text"]) == (
        "Saved fact #1",
        "Saved fact #2",
        "Saved fact #1",
    )
    ids = {f["fact_id"]: f["id"] for f in facts_of(deps, remote_caller)}
    assert ids == {a["id"]: 1, b["id"]: 2}


def test_the_fact_is_stored_verbatim_with_kind_visibility_session_and_provenance(deps, local_caller):
    body = save(
        deps,
        local_caller,
        fact="  Ship v2 by Friday  ",
        provenance="standup notes",
        kind="commitment",
        visibility="private",
        session_id="s" * 250,
    )
    stored = deps.facts.get("t1", body["id"])
    assert stored.text == "Ship v2 by Friday"
    assert stored.kind == "commitment" and stored.visibility == "private"
    assert stored.provenance == "standup notes"
    assert stored.session_id == "s" * 200
    assert stored.client_id == "local"
    assert stored.created_at == deps.clock.now()


def test_writes_leave_an_audit_row_with_actor_and_provenance(deps, remote_caller):
    body = save(deps, remote_caller, fact="Audit me", provenance="source X")
    events = deps.audit.for_subject("t1", body["id"])
    assert [(e.action, e.actor, e.provenance) for e in events] == [("write", "agent-a", "source X")]


def test_write_through_indexes_the_fact_so_search_finds_it_at_once(deps, remote_caller):
    body = save(deps, remote_caller, fact="Zebra migration finished", provenance="p")
    hits = deps.search.search(SearchQuery(tenant="t1", text="zebra", kinds=("fact",)))
    assert [h.fact_id for h in hits.keyword] == [body["id"]]


def test_an_asynchronous_index_reports_search_state_pending(deps, remote_caller):
    deps.search.write_through = False
    body = save(deps, remote_caller, fact="Indexed later", provenance="p")
    assert body["search_state"] == "pending"
    assert deps.search.search(SearchQuery(tenant="t1", text="indexed", kinds=("fact",))).keyword == ()


# --- TTL ------------------------------------------------------------------------------------------------


def test_ttl_shorthand_sets_valid_until_from_the_clock(deps, remote_caller):
    body = save(deps, remote_caller, fact="Temporary", provenance="p", ttl="12h")
    assert body["valid_until"] == "2026-06-11T21:30:00.000Z"


def test_ttl_weeks_and_absolute_past_dates_are_accepted(deps, remote_caller):
    assert save(deps, remote_caller, fact="a", provenance="p", ttl="2w")["valid_until"] == "2026-06-25T09:30:00.000Z"
    assert save(deps, remote_caller, fact="b", provenance="p", ttl="2020-01-01")["valid_until"] == (
        "2020-01-01T00:00:00.000Z"
    )


@pytest.mark.parametrize("ttl", [None, ""])
def test_null_or_empty_ttl_never_expires(deps, remote_caller, ttl):
    assert save(deps, remote_caller, fact="Forever", provenance="p", ttl=ttl)["valid_until"] is None


def test_an_iso_duration_ttl_is_rejected_with_the_shorthand_in_the_fix(deps, remote_caller):
    # The fix is "the same call with ttl 30d"; tests/unit/domain/test_ttl.py checks the rendered call.
    err = save_error(deps, remote_caller, fact="x", provenance="p", entity="people/a", ttl="P30D")
    assert err.code == "invalid_params"
    assert err.fix.amend == {"ttl": "30d"}
    assert "30d" in err.suggestion


@pytest.mark.parametrize("ttl", [30, -5, 2.5])
def test_a_ttl_without_a_unit_gets_no_guessed_run_fix(deps, remote_caller, ttl):
    """A bare number has no unit: "30d" would be a guess that changes the meaning (30 seconds?)."""
    err = save_error(deps, remote_caller, fact="x", provenance="p", ttl=ttl)
    assert err.code == "invalid_params"
    assert err.fix is None or err.fix.mcp is None  # the envelope then says next: report
    assert '"30d"' in err.suggestion and "unit" in err.suggestion


# --- validation order ---------------------------------------------------------------------------


@pytest.mark.parametrize("fact", ["", "   \n\t"])
def test_an_empty_fact_is_invalid_params(deps, remote_caller, fact):
    assert save_error(deps, remote_caller, fact=fact, provenance="p").code == "invalid_params"


def test_missing_provenance_is_invalid_params_with_a_fix_keeping_the_other_arguments(deps, remote_caller):
    err = save_error(deps, remote_caller, fact="Alice likes tea", entity="people/alice", kind="preference")
    assert err.code == "invalid_params"
    args = err.fix.mcp["arguments"]
    assert args["fact"] == "Alice likes tea" and args["entity"] == "people/alice" and args["kind"] == "preference"
    assert isinstance(args["provenance"], str) and args["provenance"].strip()


@pytest.mark.parametrize("prov", ["", "   "])
def test_blank_provenance_is_provenance_required_with_a_suggestion_and_fix(deps, remote_caller, prov):
    err = save_error(deps, remote_caller, fact="Alice likes tea", provenance=prov)
    assert err.code == "provenance_required"
    assert err.suggestion
    assert err.fix.mcp["arguments"]["fact"] == "Alice likes tea"
    assert err.fix.mcp["arguments"]["provenance"].strip()


def test_provenance_over_500_characters_is_invalid_params_and_the_fix_clips_it(deps, remote_caller):
    err = save_error(deps, remote_caller, fact="x", provenance="p" * 501)
    assert err.code == "invalid_params"
    assert err.fix.mcp["arguments"]["provenance"] == "p" * 500
    assert save(deps, remote_caller, fact="x", provenance="p" * 500)["status"] == "inserted"


def test_non_string_provenance_is_invalid_params(deps, remote_caller):
    assert save_error(deps, remote_caller, fact="x", provenance=42).code == "invalid_params"


def test_unknown_kind_and_visibility_are_invalid_params_with_defaults_in_the_fix(deps, remote_caller):
    err = save_error(deps, remote_caller, fact="x", provenance="p", kind="opinion")
    assert err.code == "invalid_params" and err.fix.mcp["arguments"]["kind"] == "fact"
    err = save_error(deps, remote_caller, fact="x", provenance="p", visibility="public")
    assert err.code == "invalid_params" and err.fix.mcp["arguments"]["visibility"] == "world"


def test_validation_runs_in_the_documented_order(deps, remote_caller):
    # fact before provenance
    assert save_error(deps, remote_caller, fact=" ", provenance=" ").code == "invalid_params"
    # blank provenance before a bad kind / visibility / ttl
    assert save_error(deps, remote_caller, fact="x", provenance=" ", kind="bad", ttl="P1D").code == (
        "provenance_required"
    )
    # kind before visibility before ttl
    assert (
        save_error(deps, remote_caller, fact="x", provenance="p", kind="bad", visibility="bad").fix.mcp["arguments"][
            "kind"
        ]
        == "fact"
    )
    assert (
        save_error(deps, remote_caller, fact="x", provenance="p", visibility="bad", ttl="P1D").fix.mcp["arguments"][
            "visibility"
        ]
        == "world"
    )


def test_nothing_is_written_when_validation_fails(deps, remote_caller):
    save_error(deps, remote_caller, fact="x", provenance="p", ttl="P30D")
    assert facts_of(deps, remote_caller) == []


# --- entities ---------------------------------------------------------------------------------------


def test_entity_names_are_slugified_per_segment(deps, remote_caller):
    assert save(deps, remote_caller, fact="x", provenance="p", entity="People/Alice Example")["entity_slug"] == (
        "people/alice-example"
    )


def test_an_entity_alias_resolves_to_its_page_slug(deps, remote_caller, clock):
    now = clock.now()
    deps.pages.put(
        Page(
            tenant="t1",
            slug="companies/acme-corp",
            title="Acme Corporation",
            aliases=("acme",),
            created_at=now,
            updated_at=now,
        )
    )
    assert save(deps, remote_caller, fact="x", provenance="p", entity="Acme")["entity_slug"] == "companies/acme-corp"


def test_a_blank_entity_means_no_entity(deps, remote_caller):
    assert save(deps, remote_caller, fact="x", provenance="p", entity="  ")["entity_slug"] is None


# --- dedup and supersession -------------------------------------------------------------------------


def test_an_exact_duplicate_returns_the_existing_id_and_writes_nothing(deps, remote_caller):
    first = save(deps, remote_caller, fact="Alice likes tea", provenance="p", entity="people/alice")
    again = save(deps, remote_caller, fact="  alice LIKES   tea ", provenance="q", entity="people/alice")
    assert again["status"] == "duplicate"
    assert again["id"] == first["id"]
    assert again["status_text"] == "Duplicate of fact #1"
    assert len(facts_of(deps, remote_caller, entity="people/alice")) == 1


def test_dedup_is_per_entity_and_per_tenant(deps, remote_caller, other_tenant_caller):
    save(deps, remote_caller, fact="Likes tea", provenance="p", entity="people/alice")
    assert save(deps, remote_caller, fact="Likes tea", provenance="p", entity="people/bob")["status"] == "inserted"
    assert save(deps, other_tenant_caller, fact="Likes tea", provenance="p", entity="people/alice")["status"] == (
        "inserted"
    )


def test_without_an_embedder_exact_duplicates_are_still_caught_and_dedup_is_flagged_degraded(
    deps_keyword_only,
    remote_caller,
):
    first = save(deps_keyword_only, remote_caller, fact="Alice likes tea", provenance="p", entity="people/alice")
    assert first["degraded_dedup"] is True and first["status"] == "inserted"
    again = save(deps_keyword_only, remote_caller, fact="alice likes tea", provenance="p", entity="people/alice")
    assert again["status"] == "duplicate" and again["id"] == first["id"] and again["degraded_dedup"] is True


def test_an_unavailable_embedder_degrades_dedup_instead_of_failing(deps, remote_caller):
    class Down:
        """Stands in for a throttled embedding provider (Bedrock), which cannot run here."""

        model_id, dim = "down", 3

        def embed(self, texts):
            raise Unavailable("throttled", reason="throttled")

    deps.embedder = Down()
    body = save(deps, remote_caller, fact="Still saved", provenance="p")
    assert body["status"] == "inserted" and body["degraded_dedup"] is True


def test_a_near_identical_fact_of_the_same_kind_supersedes_the_old_one(deps, remote_caller):
    deps.embedder = TableEmbedder({"Alice works at Acme": _at(1.0), "Alice left Acme": _at(0.97)})
    old = save(deps, remote_caller, fact="Alice works at Acme", provenance="p", entity="people/alice")
    new = save(deps, remote_caller, fact="Alice left Acme", provenance="q", entity="people/alice")
    assert new["status"] == "superseded"
    assert new["id"] != old["id"]
    assert new["status_text"] == "Saved fact #2 (supersedes #1)"
    assert [f["fact_id"] for f in facts_of(deps, remote_caller, entity="people/alice")] == [new["id"]]
    stored_old = deps.facts.get("t1", old["id"])
    assert stored_old.superseded_by == new["id"]
    assert deps.facts.get("t1", new["id"]).supersedes == old["id"]
    assert not stored_old.is_active(deps.clock.now())
    actions = [e.action for e in deps.audit.for_subject("t1", old["id"])]
    assert actions == ["write", "supersede"]
    # the superseded fact leaves the search index
    hits = deps.search.search(SearchQuery(tenant="t1", text="Alice works Acme", kinds=("fact",)))
    assert old["id"] not in {h.fact_id for h in hits.keyword}


def test_a_near_identical_fact_of_another_kind_is_a_duplicate(deps, remote_caller):
    deps.embedder = TableEmbedder({"Alice works at Acme": _at(1.0), "Alice maybe works at Acme": _at(0.96)})
    old = save(deps, remote_caller, fact="Alice works at Acme", provenance="p", entity="people/alice")
    dup = save(
        deps,
        remote_caller,
        fact="Alice maybe works at Acme",
        provenance="p",
        entity="people/alice",
        kind="belief",
    )
    assert dup["status"] == "duplicate" and dup["id"] == old["id"]
    assert len(facts_of(deps, remote_caller, entity="people/alice")) == 1


def test_similarity_below_the_threshold_inserts_a_new_fact(deps, remote_caller):
    deps.embedder = TableEmbedder({"Alice works at Acme": _at(1.0), "Alice visited Acme": _at(0.94)})
    save(deps, remote_caller, fact="Alice works at Acme", provenance="p", entity="people/alice")
    assert (
        save(deps, remote_caller, fact="Alice visited Acme", provenance="p", entity="people/alice")["status"]
        == "inserted"
    )
    assert len(facts_of(deps, remote_caller, entity="people/alice")) == 2


def test_forgotten_or_expired_facts_are_not_dedup_candidates(deps, remote_caller, clock):
    save(deps, remote_caller, fact="Short lived", provenance="p", entity="people/a", ttl="1h")
    clock.advance(hours=2)
    assert save(deps, remote_caller, fact="Short lived", provenance="p", entity="people/a")["status"] == "inserted"


def test_a_remote_writer_never_learns_of_another_clients_private_fact(deps, local_caller, remote_caller):
    save(deps, local_caller, fact="Secret plan", provenance="p", visibility="private", entity="people/a")
    body = save(deps, remote_caller, fact="Secret plan", provenance="p", visibility="private", entity="people/a")
    assert body["status"] == "inserted"


def test_a_world_fact_is_not_deduplicated_against_a_private_one(deps, local_caller, remote_caller):
    save(deps, local_caller, fact="Shared text", provenance="p", visibility="private")
    assert save(deps, remote_caller, fact="Shared text", provenance="p")["status"] == "inserted"


def test_private_facts_written_remotely_are_invisible_to_remote_reads(deps, remote_caller, local_caller):
    body = save(deps, remote_caller, fact="Only local eyes", provenance="p", visibility="private")
    assert body["status"] == "inserted"
    assert facts_of(deps, remote_caller, include_private=True) == []
    assert [f["fact_id"] for f in facts_of(deps, local_caller, include_private=True)] == [body["id"]]


# --- registration ---------------------------------------------------------------------------------


def test_remember_is_registered_as_an_idempotent_write_verb():
    spec = REGISTRY["remember"]
    assert spec.scope == "write" and spec.surface == "verbs" and spec.writes and spec.idempotency
    assert spec.annotations.get("idempotentHint") is True
    assert spec.description.startswith("MEMORY VERB (v1):")
    schema = spec.input_schema()
    # `items` is the alternative to `fact` (D26): the handler, not the schema, requires them
    assert not {"fact", "provenance"} & set(schema["required"]) and "items" in schema["properties"]
    assert schema["properties"]["kind"]["enum"] == ["event", "preference", "commitment", "belief", "fact"]


# --- sameness: only facts that say the same thing merge (issue 8, item 5) ------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Invoice 2026-118 to Orchid Health was paid", "Invoice 2026-119 to Orchid Health was paid"),
        (
            "Stand-up 2026-06-03: Priya finished the ledger migration",
            "Stand-up 2026-06-04: Priya finished the ledger migration",
        ),
        ("Alice promised the Q2 report to Bob", "Alice promised the Q3 report to Bob"),
    ],
)
def test_near_identical_facts_with_different_identifiers_stay_two_facts(deps, remote_caller, old, new):
    deps.embedder = TableEmbedder({old: _at(1.0), new: _at(0.99)})
    first = save(deps, remote_caller, fact=old, provenance="p", entity="companies/orchid")
    second = save(deps, remote_caller, fact=new, provenance="p", entity="companies/orchid")
    assert second["status"] == "inserted" and second["id"] != first["id"]
    assert {f["fact"] for f in facts_of(deps, remote_caller, entity="companies/orchid")} == {old, new}


def test_a_genuine_update_of_the_same_attribute_supersedes(deps, remote_caller):
    old, new = "Alice's phone is 555-0100", "Alice's phone is now 555-0199"
    deps.embedder = TableEmbedder({old: _at(1.0), new: _at(0.97)})
    save(deps, remote_caller, fact=old, provenance="p", entity="people/alice")
    body = save(deps, remote_caller, fact=new, provenance="q", entity="people/alice")
    assert body["status"] == "superseded"
    assert [f["fact"] for f in facts_of(deps, remote_caller, entity="people/alice")] == [new]


def test_a_distinct_nearest_neighbour_does_not_hide_a_restatement_behind_it(deps, remote_caller):
    a, b = "Invoice 2026-118 was paid", "Invoice 2026-119 was paid"
    # the restatement of b lies closer to a than to b: the nearest neighbour is the wrong fact
    deps.embedder = TableEmbedder({a: _at(1.0), b: _at(0.99), "Invoice 2026-119 was paid.": _at(1.0)})
    save(deps, remote_caller, fact=a, provenance="p", entity="companies/orchid")
    kept = save(deps, remote_caller, fact=b, provenance="p", entity="companies/orchid")
    again = save(deps, remote_caller, fact="Invoice 2026-119 was paid.", provenance="p", entity="companies/orchid")
    assert again["status"] == "superseded"
    assert deps.facts.get("t1", kept["id"]).superseded_by == again["id"]
    assert deps.facts.get("t1", facts_of(deps, remote_caller, entity="companies/orchid")[-1]["fact_id"]).text == a


# --- natural updates below the dedup gate ----------------------------------------------------------


@pytest.mark.parametrize(
    "new",
    [
        "The Orion launch deadline moved to 2027-02-01",
        "The Orion launch deadline was pushed to 2027-02-01",
        "The Orion launch deadline is 2027-02-01 instead of 2027-01-15",
    ],
)
def test_a_natural_update_phrasing_supersedes_below_the_dedup_gate(deps, remote_caller, new):
    old = "The Orion launch deadline is 2027-01-15"
    deps.embedder = TableEmbedder({old: _at(1.0), new: _at(0.91)})  # what MiniLM scores these
    first = save(deps, remote_caller, fact=old, provenance="p", entity="projects/orion")
    body = save(deps, remote_caller, fact=new, provenance="q", entity="projects/orion")
    assert body["status"] == "superseded"
    assert deps.facts.get("t1", first["id"]).superseded_by == body["id"]
    assert [f["fact"] for f in facts_of(deps, remote_caller, entity="projects/orion")] == [new]


def test_without_an_entity_an_update_below_the_gate_needs_a_named_subject(deps, remote_caller):
    old, new = "The launch deadline is 2027-01-15", "The launch deadline moved to 2027-02-01"
    deps.embedder = TableEmbedder({old: _at(1.0), new: _at(0.91)})
    save(deps, remote_caller, fact=old, provenance="p")
    assert save(deps, remote_caller, fact=new, provenance="q")["status"] == "inserted"  # whose deadline?


# --- supersedes: the caller names the fact a new one replaces ---------------------------------------


@pytest.fixture(params=BACKENDS)
def bdeps(request: pytest.FixtureRequest):
    clock = FixedClock(to_ms(datetime.now(UTC)))
    with open_deps(request.param, request, clock) as d:
        d.test_tenant = "t-" + uuid.uuid4().hex[:12]  # a fresh tenant per test (shared tables)
        yield d


def _caller(deps, *, client: str = "agent-a", remote: bool = True, tenant: str | None = None) -> Caller:
    scopes = frozenset({"read", "write"}) if remote else frozenset({"read", "write", "admin"})
    return Caller(tenant=tenant or deps.test_tenant, client_id=client, scopes=scopes, remote=remote)


ORION_OLD = "The Orion launch deadline is 2027-01-15"
ORION_NEW = "Orion ships on 2027-02-01 now"  # no rule could tell this replaces the old fact


def test_supersedes_expires_the_named_fact_and_links_both(bdeps):
    caller = _caller(bdeps)
    old = save(bdeps, caller, fact=ORION_OLD, provenance="p", entity="projects/orion")
    other = save(bdeps, caller, fact="Orion's code freeze is 2027-01-05", provenance="p", entity="projects/orion")
    new = save(bdeps, caller, fact=ORION_NEW, provenance="q", entity="projects/orion", supersedes=old["id"])
    assert new["status"] == "superseded" and new["id"] not in (old["id"], other["id"])
    assert new["status_text"].endswith("(supersedes #1)")
    assert bdeps.facts.get(caller.tenant, old["id"]).superseded_by == new["id"]
    assert bdeps.facts.get(caller.tenant, new["id"]).supersedes == old["id"]
    assert [e.action for e in bdeps.audit.for_subject(caller.tenant, old["id"])] == ["write", "supersede"]
    assert {f["fact_id"] for f in facts_of(bdeps, caller, entity="projects/orion")} == {new["id"], other["id"]}
    history = {f["fact_id"]: f for f in facts_of(bdeps, caller, entity="projects/orion", include_expired=True)}
    assert history[old["id"]]["status"] == "superseded"
    assert history[old["id"]]["superseded_by"] == new["id"]


def test_supersedes_across_entities_is_refused_as_an_entity_mismatch(bdeps):
    caller = _caller(bdeps)
    old = save(bdeps, caller, fact="Alice works at Acme", provenance="p", entity="people/alice")
    err = save_error(
        bdeps, caller, fact="Alice works at Acme", provenance="q", entity="people/alice-chen", supersedes=old["id"]
    )
    # D23 (the reference's replaces): a fact replaces a fact about the same entity
    assert err.code == "invalid_params" and err.message.startswith("replaces_entity_mismatch")
    assert [f["fact_id"] for f in facts_of(bdeps, caller, entity="people/alice")] == [old["id"]]


def _forget_not_found(deps, caller, fact_id):
    with pytest.raises(VerbError) as err:
        forget.run(deps, caller, forget.ForgetParams(id=fact_id), CTX)
    return err.value


def _same_answer(a: VerbError, b: VerbError) -> None:
    assert (a.code, a.message, a.why, a.fix) == (b.code, b.message, b.why, b.fix)
    assert a.suggestion.replace("remember", "forget", 1) == b.suggestion


def test_a_foreign_private_or_unknown_id_is_not_found_like_forget_and_nothing_is_written(bdeps):
    caller, local = _caller(bdeps), _caller(bdeps, client="local", remote=False)
    stranger = _caller(bdeps, tenant=bdeps.test_tenant + "-other")
    foreign = save(bdeps, stranger, fact="Globex pays in EUR", provenance="p")["id"]
    private = save(bdeps, local, fact="Alice's salary is 100k", provenance="p", visibility="private")["id"]
    own_private = save(bdeps, caller, fact="My note", provenance="p", visibility="private")["id"]
    for fact_id in (foreign, private, own_private, "f_0000000000000000000000NOPE"):
        err = save_error(bdeps, caller, fact="Orion slipped", provenance="q", supersedes=fact_id)
        _same_answer(err, _forget_not_found(bdeps, caller, fact_id))
    assert "Orion slipped" not in {f["fact"] for f in facts_of(bdeps, local, include_private=True)}
    assert bdeps.facts.get(local.tenant, private).is_active(bdeps.clock.now())
    # the trusted local CLI sees private facts, so it may replace them
    assert (
        save(bdeps, local, fact="Alice's salary is 110k", provenance="p", visibility="private", supersedes=private)[
            "status"
        ]
        == "superseded"
    )


def test_an_inactive_fact_cannot_be_superseded(bdeps):
    caller = _caller(bdeps)
    old = save(bdeps, caller, fact=ORION_OLD, provenance="p", entity="projects/orion")["id"]
    forget.run(bdeps, caller, forget.ForgetParams(id=old), CTX)
    err = save_error(bdeps, caller, fact=ORION_NEW, provenance="q", entity="projects/orion", supersedes=old)
    assert err.code == "invalid_params"  # D23: the reference's target_withdrawn
    assert err.message.startswith("target_withdrawn") and "forgotten" in err.message
    assert err.fix.drop == ("replaces", "supersedes")
    assert facts_of(bdeps, caller, entity="projects/orion") == []


def test_a_blank_supersedes_is_invalid_params_with_the_call_without_it_as_fix(deps, remote_caller):
    err = save_error(deps, remote_caller, fact="Orion slipped", provenance="q", supersedes="  ")
    assert err.code == "invalid_params"
    assert err.fix.mcp == {"tool": "remember", "arguments": {"fact": "Orion slipped", "provenance": "q"}}


def test_a_numeric_supersedes_is_invalid_params_with_the_id_as_a_string(deps, remote_caller):
    r = dispatch("remember", {"fact": "Orion slipped", "provenance": "q", "supersedes": 12}, remote_caller, deps)
    assert r.body["code"] == "invalid_params"
    assert r.body["fix"]["mcp"]["arguments"]["supersedes"] == "12"


def test_a_retried_superseding_remember_replays_its_first_answer(bdeps):
    caller = _caller(bdeps)
    old = save(bdeps, caller, fact=ORION_OLD, provenance="p", entity="projects/orion")["id"]
    args = {
        "fact": ORION_NEW,
        "provenance": "q",
        "entity": "projects/orion",
        "supersedes": old,
        "idempotency_key": "orion-1",
    }
    first = dispatch("remember", args, caller, bdeps)
    again = dispatch("remember", args, caller, bdeps)
    assert first.body["status"] == "superseded" and "idempotent_replay" not in first.body
    assert again.body == {**first.body, "idempotent_replay": True}
    assert [f["fact_id"] for f in facts_of(bdeps, caller, entity="projects/orion")] == [first.body["id"]]


def test_supersedes_is_in_the_tool_schema_as_a_string():
    prop = REGISTRY["remember"].input_schema()["properties"]["supersedes"]
    assert prop["type"] == "string" and "fact_id" in prop["description"]
    assert "supersedes" not in REGISTRY["remember"].input_schema()["required"]
