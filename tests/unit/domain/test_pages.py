"""Page tools: put_page (frontmatter, overrides, mentions, limits, status, indexing, audit), get_page,
list_pages and delete_page, including private pages hidden from remote callers.

Runs each tool's `run` over the real local stores (in-memory SQLite, write-through search index).
"""

from __future__ import annotations

import pytest

from fleetmem.errors import VerbError
from fleetmem.memory.verbs import delete_page, get_page, list_pages, put_page
from fleetmem.models import SearchQuery
from fleetmem.ports import CallContext
from fleetmem.protocol import PAGE_BODY_MAX_BYTES

CTX = CallContext("t")


def put(deps, caller, slug, content="", **kw):
    return put_page.run(deps, caller, put_page.PutPageParams(slug=slug, content=content, **kw), CTX).body


def get(deps, caller, slug):
    return get_page.run(deps, caller, get_page.GetPageParams(slug=slug), CTX).body


def listing(deps, caller, **kw):
    return list_pages.run(deps, caller, list_pages.ListPagesParams(**kw), CTX).body


def delete(deps, caller, slug):
    return delete_page.run(deps, caller, delete_page.DeletePageParams(slug=slug), CTX).body


def chunk_slugs(deps, tenant, text, *, world_only=False):
    hits = deps.search.search(SearchQuery(tenant=tenant, text=text, world_only=world_only))
    return {h.slug for h in hits.keyword}


ALICE = (
    "---\n"
    "title: Alice Example\n"
    "type: person\n"
    "aliases: [Ali, Alice E.]\n"
    "summary: Runs payments.\n"
    "links:\n  - {type: works_at, target: companies/acme-example, context: since 2026}\n"
    "timeline:\n  - {date: 2026-06-01, text: Joined Acme}\n"
    "team: payments\n"
    "---\n"
    "# Alice\nAlice runs payments at [[companies/acme-example]] with [[people/bob|Bob]].\n"
)


def test_put_page_reads_frontmatter_and_keeps_unknown_keys(deps, remote_caller):
    assert put(deps, remote_caller, "people/alice-example", ALICE) == {
        "slug": "people/alice-example",
        "status": "created",
        "search_state": "current",
        "protocol_version": 1,
    }
    page = deps.pages.get("t1", "people/alice-example")
    assert (page.title, page.type, page.aliases, page.summary) == (
        "Alice Example",
        "person",
        ("Ali", "Alice E."),
        "Runs payments.",
    )
    assert page.frontmatter == {"team": "payments"}
    assert [(t.date, t.text) for t in page.timeline] == [("2026-06-01", "Joined Acme")]
    assert page.body.startswith("# Alice\n")


def test_body_mentions_become_mentions_links_next_to_explicit_links(deps, remote_caller):
    put(deps, remote_caller, "people/alice-example", ALICE)
    links = {(x.type, x.target, x.context) for x in deps.pages.get("t1", "people/alice-example").links}
    assert links == {
        ("works_at", "companies/acme-example", "since 2026"),
        ("mentions", "companies/acme-example", None),
        ("mentions", "people/bob", None),
    }


def test_explicit_arguments_override_the_frontmatter(deps, remote_caller):
    put(
        deps,
        remote_caller,
        "people/alice-example",
        ALICE,
        title="Alice E.",
        type="founder",
        aliases=["Ace"],
        summary="Explicit.",
        visibility="world",
        links=[{"type": "advises", "target": "Companies/Globex"}],
        timeline=[{"date": "2026-06-02", "text": "New"}],
    )
    page = deps.pages.get("t1", "people/alice-example")
    assert (page.title, page.type, page.aliases, page.summary) == (
        "Alice E.",
        "founder",
        ("Ace",),
        "Explicit.",
    )
    assert [(x.type, x.target) for x in page.links if x.type != "mentions"] == [("advises", "companies/globex")]
    assert [(t.date, t.text) for t in page.timeline] == [("2026-06-02", "New")]


@pytest.mark.parametrize(
    ("slug", "content", "title"),
    [
        ("notes/standup", "Intro line.\n\n# The Real Title\nText.", "The Real Title"),
        ("notes/standup-2026-06-11", "No heading here.", "standup-2026-06-11"),
    ],
)
def test_the_title_defaults_to_the_first_h1_then_the_last_slug_segment(deps, remote_caller, slug, content, title):
    put(deps, remote_caller, slug, content)
    assert deps.pages.get("t1", slug).title == title


def test_status_is_created_then_unchanged_then_updated(deps, remote_caller, clock):
    assert put(deps, remote_caller, "notes/a", "One.")["status"] == "created"
    clock.advance(minutes=1)
    assert put(deps, remote_caller, "notes/a", "One.")["status"] == "unchanged"
    assert deps.pages.get("t1", "notes/a").updated_at.minute == 30  # an unchanged put writes nothing
    assert put(deps, remote_caller, "notes/a", "Two.")["status"] == "updated"
    page = deps.pages.get("t1", "notes/a")
    assert page.updated_at > page.created_at


def test_an_invalid_slug_is_rejected_with_the_slugified_slug_in_the_fix(deps, remote_caller):
    with pytest.raises(VerbError) as err:
        put(deps, remote_caller, "People/Alice Example", "Body.", title="Alice")
    assert err.value.code == "invalid_params"
    assert err.value.fix.mcp == {
        "tool": "put_page",
        "arguments": {"slug": "people/alice-example", "content": "Body.", "title": "Alice"},
    }
    assert deps.pages.get("t1", "people/alice-example") is None


def test_bad_yaml_frontmatter_is_invalid_params_without_a_run_fix(deps, remote_caller):
    """Dropping the frontmatter would lose its title, aliases and visibility (a private page would
    become world-visible): no corrected call keeps the writer's meaning, so the fix has no step."""
    with pytest.raises(VerbError) as err:
        put(deps, remote_caller, "notes/bad", "---\ntitle: [unclosed\nvisibility: private\n---\nBody text.")
    assert err.value.code == "invalid_params"
    fix = err.value.fix
    assert fix is not None and fix.mcp is None and not fix.argv and fix.amend is None
    assert "line" in err.value.message  # says where the YAML breaks
    assert deps.pages.get("t1", "notes/bad") is None


def test_an_oversized_body_is_invalid_params(deps, remote_caller):
    with pytest.raises(VerbError) as err:
        put(deps, remote_caller, "notes/huge", "x" * (PAGE_BODY_MAX_BYTES + 1))
    assert err.value.code == "invalid_params"
    assert deps.pages.get("t1", "notes/huge") is None
    assert put(deps, remote_caller, "notes/fits", "x" * PAGE_BODY_MAX_BYTES)["status"] == "created"


@pytest.mark.parametrize(
    "kw",
    [{"visibility": "secret"}, {"timeline": [{"date": "next tuesday", "text": "x"}]}],
)
def test_bad_visibility_or_timeline_dates_are_invalid_params(deps, remote_caller, kw):
    with pytest.raises(VerbError) as err:
        put(deps, remote_caller, "notes/x", "Body.", **kw)
    assert err.value.code == "invalid_params"
    assert err.value.fix.mcp["tool"] == "put_page"


def test_put_page_writes_through_to_the_search_index_and_replaces_old_chunks(deps, remote_caller):
    put(deps, remote_caller, "notes/plan", "The zebra migration plan.")
    assert "notes/plan" in chunk_slugs(deps, "t1", "zebra")
    put(deps, remote_caller, "notes/plan", "Now about giraffes only.")
    assert "notes/plan" not in chunk_slugs(deps, "t1", "zebra")
    assert "notes/plan" in chunk_slugs(deps, "t1", "giraffes")


def test_put_and_delete_are_audited(deps, remote_caller):
    put(deps, remote_caller, "notes/audited", "Body.")
    delete(deps, remote_caller, "notes/audited")
    events = deps.audit.for_subject("t1", "notes/audited")
    assert [(e.action, e.actor) for e in events] == [("put_page", "agent-a"), ("delete_page", "agent-a")]


def test_get_page_returns_every_field_and_content_round_trips(deps, remote_caller, clock):
    put(deps, remote_caller, "people/alice-example", ALICE)
    body = get(deps, remote_caller, "people/alice-example")
    assert body["slug"] == "people/alice-example" and body["title"] == "Alice Example"
    assert body["type"] == "person" and body["aliases"] == ["Ali", "Alice E."]
    assert body["summary"] == "Runs payments." and body["visibility"] == "world"
    assert {"type": "works_at", "target": "companies/acme-example", "context": "since 2026"} in body["links"]
    assert body["timeline"] == [{"date": "2026-06-01", "text": "Joined Acme"}]
    assert body["created_at"] == body["updated_at"] == "2026-06-11T09:30:00.000Z"
    assert body["protocol_version"] == 1
    clock.advance(minutes=1)
    assert put(deps, remote_caller, "people/alice-example", body["content"])["status"] == "unchanged"


def test_remote_callers_may_write_a_private_page_but_never_read_it(deps, remote_caller, local_caller):
    assert put(deps, remote_caller, "people/secret", "Hidden.", visibility="private")["status"] == "created"
    with pytest.raises(VerbError) as private_err:
        get(deps, remote_caller, "people/secret")
    with pytest.raises(VerbError) as missing_err:
        get(deps, remote_caller, "people/never-written")
    assert private_err.value.code == missing_err.value.code == "not_found"
    assert get(deps, local_caller, "people/secret")["content"].endswith("Hidden.")
    assert "people/secret" not in chunk_slugs(deps, "t1", "hidden", world_only=True)


def test_private_blocks_are_stripped_from_get_page_for_remote_callers(deps, remote_caller, local_caller):
    put(
        deps,
        remote_caller,
        "people/bob",
        "Bob sells.\n<!-- private -->Bob's salary is 1M.<!-- /private -->\n",
    )
    assert "salary" not in get(deps, remote_caller, "people/bob")["content"]
    assert "salary" in get(deps, local_caller, "people/bob")["content"]


def test_another_tenant_sees_a_page_as_missing(deps, remote_caller, other_tenant_caller):
    put(deps, remote_caller, "notes/mine", "Mine.")
    with pytest.raises(VerbError) as err:
        get(deps, other_tenant_caller, "notes/mine")
    assert err.value.code == "not_found"
    with pytest.raises(VerbError):
        delete(deps, other_tenant_caller, "notes/mine")
    assert deps.pages.get("t1", "notes/mine") is not None


def test_list_pages_pages_by_slug_with_an_opaque_cursor_and_type_filter(deps, remote_caller, local_caller):
    for slug in ["a/one", "a/two", "b/three", "c/four"]:
        put(deps, remote_caller, slug, "Body.", type="person" if slug.startswith("a/") else "note")
    put(deps, local_caller, "a/private", "Hidden.", visibility="private")
    first = listing(deps, remote_caller, limit=2)
    assert [p["slug"] for p in first["pages"]] == ["a/one", "a/two"]
    second = listing(deps, remote_caller, limit=2, cursor=first["next_cursor"])
    assert [p["slug"] for p in second["pages"]] == ["b/three", "c/four"]
    assert second["next_cursor"] is None
    assert set(first["pages"][0]) == {"slug", "title", "type", "updated_at"}
    assert [p["slug"] for p in listing(deps, remote_caller, type="person")["pages"]] == ["a/one", "a/two"]
    assert "a/private" in [p["slug"] for p in listing(deps, local_caller)["pages"]]


@pytest.mark.parametrize(("limit", "nearest"), [(0, 1), (-5, 1), (500, 200)])
def test_list_pages_refuses_a_limit_outside_1_to_200_with_the_nearest_bound(deps, remote_caller, limit, nearest):
    with pytest.raises(VerbError) as err:
        listing(deps, remote_caller, limit=limit)
    assert err.value.code == "invalid_params"
    assert err.value.fix.mcp == {"tool": "list_pages", "arguments": {"limit": nearest}}


def test_delete_page_removes_the_page_and_its_chunks(deps, remote_caller):
    put(deps, remote_caller, "notes/walrus", "Walrus facts.")
    assert delete(deps, remote_caller, "notes/walrus") == {
        "slug": "notes/walrus",
        "deleted": True,
        "search_state": "current",
        "protocol_version": 1,
    }
    assert deps.pages.get("t1", "notes/walrus") is None
    assert "notes/walrus" not in chunk_slugs(deps, "t1", "walrus")
    with pytest.raises(VerbError) as err:
        delete(deps, remote_caller, "notes/walrus")
    assert err.value.code == "not_found"


def test_remote_callers_cannot_delete_a_private_page(deps, remote_caller, local_caller):
    put(deps, local_caller, "notes/private", "Mine.", visibility="private")
    with pytest.raises(VerbError) as err:
        delete(deps, remote_caller, "notes/private")
    assert err.value.code == "not_found"
    assert delete(deps, local_caller, "notes/private")["deleted"] is True


def test_tool_specs_register_surface_scope_and_write_flags():
    from fleetmem.memory.registry import REGISTRY

    expected = {
        "put_page": ("full", "write", True),
        "delete_page": ("full", "write", True),
        "get_page": ("full", "read", False),
        "list_pages": ("full", "read", False),
    }
    for name, (surface, scope, writes) in expected.items():
        spec = REGISTRY[name]
        assert (spec.surface, spec.scope, spec.writes) == (surface, scope, writes)
    assert REGISTRY["put_page"].idempotency is True
    assert "idempotency_key" in REGISTRY["put_page"].input_schema()["properties"]


def test_a_remote_write_over_a_private_page_is_refused_whatever_it_holds(deps, remote_caller, local_caller):
    """The same text as the private page is refused like any other (never `unchanged`, which would
    confirm the page's content), and the page stays as its owner wrote it."""
    put(deps, local_caller, "people/private-one", "Same body.", visibility="private")
    with pytest.raises(VerbError) as info:
        put(deps, remote_caller, "people/private-one", "Same body.", visibility="private")
    assert info.value.detail == {"field": "slug", "reason": "slug_taken"}
    again = put(deps, local_caller, "people/private-one", "Same body.", visibility="private")
    assert again["status"] == "unchanged"


def test_search_state_is_pending_when_an_asynchronous_indexer_owns_the_index(deps, remote_caller):
    deps.search.write_through = False
    assert put(deps, remote_caller, "notes/async", "Body.")["search_state"] == "pending"
    assert delete(deps, remote_caller, "notes/async")["search_state"] == "pending"


# -- expected_updated_at: refuse to overwrite a newer version ---------------------------------


def _refusal(deps, caller, slug, content, expected):
    with pytest.raises(VerbError) as info:
        put(deps, caller, slug, content, expected_updated_at=expected)
    err = info.value
    assert err.code == "invalid_params" and err.klass == "caller" and not err.retryable
    assert err.detail["reason"] == "stale_version" and err.detail["field"] == "expected_updated_at"
    assert "get_page" in err.fix.why and err.fix.mcp is None
    return err


def test_put_page_with_a_stale_expected_updated_at_is_refused_and_the_page_kept(deps, remote_caller, clock):
    put(deps, remote_caller, "topics/guarded", "first")
    loaded = get(deps, remote_caller, "topics/guarded")["updated_at"]
    clock.advance(minutes=1)
    put(deps, remote_caller, "topics/guarded", "someone else's", expected_updated_at=loaded)
    now_at = get(deps, remote_caller, "topics/guarded")["updated_at"]
    clock.advance(minutes=1)
    err = _refusal(deps, remote_caller, "topics/guarded", "mine", loaded)
    assert err.detail["stored_updated_at"] == now_at and now_at in err.suggestion
    assert get(deps, remote_caller, "topics/guarded")["content"].endswith("someone else's")
    assert put(deps, remote_caller, "topics/guarded", "merged", expected_updated_at=now_at)["status"] == "updated"


def test_put_page_expecting_no_page_is_refused_over_an_existing_one(deps, remote_caller):
    assert put(deps, remote_caller, "topics/new", "one", expected_updated_at="")["status"] == "created"
    err = _refusal(deps, remote_caller, "topics/new", "two", "")
    assert err.detail["stored_updated_at"] == get(deps, remote_caller, "topics/new")["updated_at"]
    assert get(deps, remote_caller, "topics/new")["content"].endswith("one")


def test_put_page_expecting_a_time_is_refused_for_a_missing_page(deps, remote_caller):
    err = _refusal(deps, remote_caller, "topics/gone", "x", "2026-01-01T00:00:00.000Z")
    assert err.detail["stored_updated_at"] is None
    assert get_missing(deps, remote_caller, "topics/gone")


def test_put_page_refuses_an_expected_updated_at_that_is_not_a_time(deps, remote_caller):
    with pytest.raises(VerbError) as info:
        put(deps, remote_caller, "topics/x", "x", expected_updated_at="yesterday")
    assert info.value.code == "invalid_params" and info.value.detail["reason"] == "not_a_time"


def test_put_page_without_expected_updated_at_still_overwrites(deps, remote_caller, clock):
    put(deps, remote_caller, "topics/plain", "one")
    clock.advance(minutes=1)
    assert put(deps, remote_caller, "topics/plain", "two")["status"] == "updated"


def test_concurrent_put_pages_from_the_same_version_let_exactly_one_win(deps, remote_caller, clock):
    import threading

    put(deps, remote_caller, "topics/raced", "base")
    loaded = get(deps, remote_caller, "topics/raced")["updated_at"]
    clock.advance(minutes=1)
    start = threading.Barrier(8)
    outcomes: list[str] = []
    lock = threading.Lock()

    def save(n: int) -> None:
        start.wait()
        try:
            put(deps, remote_caller, "topics/raced", f"writer {n}", expected_updated_at=loaded)
            result = f"won {n}"
        except VerbError as exc:
            result = exc.detail["reason"]
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=save, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [o for o in outcomes if o.startswith("won")]
    assert len(won) == 1 and outcomes.count("stale_version") == 7, outcomes
    assert get(deps, remote_caller, "topics/raced")["content"].endswith(f"writer {won[0].split()[1]}")


def get_missing(deps, caller, slug):
    with pytest.raises(VerbError) as info:
        get(deps, caller, slug)
    return info.value.code == "not_found"
