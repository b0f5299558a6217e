"""Writes resolve names exactly like `entity()` (PROTOCOL_NOTES §4, D6, D15), say when they make a new
slug (`new_entity`), and enforce the size limits (D16) with the fields advertised in the schemas.
Runs over the in-memory local stores (the AWS set runs tests/aws/test_write_integrity.py)."""

from __future__ import annotations

import pytest

from fleetmem.errors import VerbError
from fleetmem.memory.entities import canonicalize_entity
from fleetmem.memory.registry import REGISTRY
from fleetmem.memory.slugs import shorten_slug, slug_size_problem
from fleetmem.memory.verbs import put_page, recall, remember
from fleetmem.ports import CallContext
from fleetmem.protocol import ALIAS_MAX, ALIASES_MAX, FACT_MAX, SLUG_MAX, SLUG_SEGMENT_MAX, TITLE_MAX

CTX = CallContext("test-correlation")


def put(deps, caller, slug, content="x", **kw):
    return put_page.run(deps, caller, put_page.PutPageParams(slug=slug, content=content, **kw), CTX).body


def save(deps, caller, **args):
    return remember.run(deps, caller, remember.RememberParams.model_validate(args), CTX)


def codes(outcome):
    return [n.code for n in outcome.notices]


def test_an_exact_title_resolves_only_when_one_page_has_it(deps, remote_caller):
    put(deps, remote_caller, "people/alex-one", title="Alex Example")
    assert canonicalize_entity(deps, "t1", "alex example").slug == "people/alex-one"
    put(deps, remote_caller, "people/alex-two", title="Alex Example")
    target = canonicalize_entity(deps, "t1", "Alex Example")
    assert (target.slug, target.page) == ("alex-example", None)
    assert sorted(h.slug for h in target.ambiguous) == ["people/alex-one", "people/alex-two"]
    out = save(deps, remote_caller, fact="Alex likes tea", provenance="chat", entity="Alex Example")
    assert out.body["entity_slug"] == "alex-example"
    (notice,) = [n for n in out.notices if n.code == "new_entity"]
    assert "several pages" in notice.why
    assert "people/alex-one" in notice.why and "people/alex-two" in notice.why


def test_a_private_pages_title_never_resolves_or_shows_for_a_remote_writer(deps, remote_caller, local_caller):
    put(deps, local_caller, "people/hidden-person", title="Hidden Person", visibility="private")
    out = save(deps, remote_caller, fact="Hidden met us", provenance="chat", entity="Hidden Person")
    assert out.body["entity_slug"] == "hidden-person"
    assert all("people/hidden-person" not in n.why for n in out.notices)
    assert canonicalize_entity(deps, "t1", "Hidden Person", world_only=False).slug == "people/hidden-person"


def test_the_new_entity_fix_repeats_the_call_with_the_suggested_slug_and_no_idempotency_key(deps, remote_caller):
    put(deps, remote_caller, "people/priya-raman", title="Priya Raman")
    out = save(
        deps,
        remote_caller,
        fact="Priya R. called",
        provenance="chat",
        entity="Priya R",
        kind="event",
        idempotency_key="k-1",
    )
    (notice,) = [n for n in out.notices if n.code == "new_entity"]
    args = notice.fix.mcp["arguments"]
    assert notice.fix.mcp["tool"] == "remember"
    assert args == {"fact": "Priya R. called", "provenance": "chat", "entity": "people/priya-raman", "kind": "event"}


def test_a_name_with_no_similar_page_gets_a_notice_whose_fix_creates_the_page(deps, remote_caller):
    out = save(deps, remote_caller, fact="Zed is new", provenance="chat", entity="Zed Quux")
    (notice,) = [n for n in out.notices if n.code == "new_entity"]
    # D28: the page step is the fix (the edge drops it for a caller without put_page), not the text
    assert notice.fix is not None and notice.fix.mcp["tool"] == "put_page" and "put_page" not in notice.why
    assert codes(save(deps, remote_caller, fact="Zed again", provenance="chat", entity="Zed Quux")) == []


def test_recall_filters_by_the_resolved_page(deps, remote_caller):
    put(deps, remote_caller, "companies/acme-corp", title="Acme Corporation", aliases=["ACME"])
    save(deps, remote_caller, fact="Acme renewed", provenance="chat", entity="acme")
    facts = recall.run(deps, remote_caller, recall.RecallParams(entity="Acme Corporation"), CTX).body["facts"]
    assert [(f["fact"], f["entity_slug"]) for f in facts] == [("Acme renewed", "companies/acme-corp")]


def test_a_fact_over_the_limit_is_refused_before_anything_is_read_or_written(deps, remote_caller):
    with pytest.raises(VerbError) as err:
        save(deps, remote_caller, fact="z" * (FACT_MAX + 1), provenance="chat")
    assert err.value.code == "invalid_params"
    assert err.value.fix is not None and err.value.fix.mcp is None and err.value.fix.argv is None
    assert deps.facts.next_seq("t1") == 1  # no sequence number was even allocated


def test_a_heading_title_is_clipped_but_a_given_title_is_refused(deps, remote_caller):
    put(deps, remote_caller, "notes/long", content="# " + "H" * 400 + "\n\nbody")
    assert len(deps.pages.get("t1", "notes/long").title) == TITLE_MAX
    with pytest.raises(VerbError):
        put(deps, remote_caller, "notes/long2", title="T" * (TITLE_MAX + 1))
    with pytest.raises(VerbError):
        put(deps, remote_caller, "notes/long3", aliases=[f"a{i}" for i in range(ALIASES_MAX + 1)])
    put(deps, remote_caller, "notes/ok", title="T" * TITLE_MAX, aliases=["a" * ALIAS_MAX] * 1)
    assert deps.pages.get("t1", "notes/long2") is None and deps.pages.get("t1", "notes/long3") is None


def test_slug_limits_and_the_shortened_example():
    assert slug_size_problem("a/" + "b" * SLUG_SEGMENT_MAX) is None
    assert slug_size_problem("a/" + "b" * (SLUG_SEGMENT_MAX + 1))
    long = "/".join(["c" * 90] * 3)
    assert slug_size_problem(long)
    short = shorten_slug("notes/" + "-".join(["word"] * 100))
    assert slug_size_problem(short) is None and short.startswith("notes/word-")
    assert slug_size_problem(shorten_slug(long)) is None


def test_the_write_limits_are_advertised_in_the_input_schemas():
    rem = REGISTRY["remember"].input_schema()["properties"]
    assert rem["fact"]["maxLength"] == FACT_MAX
    assert rem["entity"]["maxLength"] == TITLE_MAX
    page = REGISTRY["put_page"].input_schema()["properties"]
    assert page["slug"]["maxLength"] == SLUG_MAX
    assert page["title"]["maxLength"] == TITLE_MAX
    assert page["aliases"]["maxItems"] == ALIASES_MAX
    assert page["aliases"]["items"]["maxLength"] == ALIAS_MAX


def test_a_slug_shaped_name_is_matched_by_its_last_segment_not_its_folder(deps, remote_caller):
    put(deps, remote_caller, "people/alice-example", title="Alice Example")
    put(deps, remote_caller, "people/bobby-tables", title="Bobby Tables")
    out = save(deps, remote_caller, fact="Bob called", provenance="chat", entity="people/bob")
    (notice,) = [n for n in out.notices if n.code == "new_entity"]
    assert "people/bobby-tables" in notice.why
    assert "people/alice-example" not in notice.why


# --- slugs that are paths are refused, never folded into a guess ----------------------------------


def _refused(call):
    with pytest.raises(VerbError) as err:
        call()
    assert err.value.code == "invalid_params"
    fix = err.value.fix
    assert fix is not None and fix.mcp is None and fix.amend is None and fix.argv is None  # nothing to run
    assert 'etc/passwd"' not in err.value.suggestion and "'etc/passwd'" not in err.value.suggestion
    assert "any script" in err.value.suggestion  # the grammar is explained instead
    return err.value


@pytest.mark.parametrize("slug", ["../../etc/passwd", "./etc/passwd", "people/../etc/passwd", "etc\\passwd"])
def test_a_path_slug_is_refused_without_a_guessed_slug(deps, remote_caller, slug):
    from fleetmem.memory.verbs import delete_page, get_page

    _refused(lambda: put(deps, remote_caller, slug, "Body."))
    _refused(lambda: get_page.run(deps, remote_caller, get_page.GetPageParams(slug=slug), CTX))
    _refused(lambda: delete_page.run(deps, remote_caller, delete_page.DeletePageParams(slug=slug), CTX))
    assert deps.page_listing.list("t1", world_only=False, limit=10) == []


def test_a_path_link_target_is_refused_and_nothing_is_stored(deps, remote_caller):
    link = {"type": "see", "target": "../../etc/passwd"}
    _refused(lambda: put(deps, remote_caller, "notes/a", "Body.", links=[link]))
    _refused(lambda: put(deps, remote_caller, "notes/a", "See [[../../etc/passwd]] for more."))
    assert deps.pages.get("t1", "notes/a") is None


def test_a_slug_in_another_script_is_canonical_and_a_sloppy_one_still_gets_its_slug_form(deps, remote_caller):
    assert put(deps, remote_caller, "offices/北京办公室", "Body.")["status"] == "created"
    assert put(deps, remote_caller, "people/сергей-иванов", "Body.")["status"] == "created"
    with pytest.raises(VerbError) as err:
        put(deps, remote_caller, "People/Сергей Иванов", "Body.")
    assert err.value.fix is not None and err.value.fix.mcp["arguments"]["slug"] == "people/сергей-иванов"
