"""What `entity{names}` reads for its rows, on both page stores (SQLite and DynamoDB Local): the
hit pages as lead sources (`PageStore.leads`, no links, timeline or frontmatter), the same values
`PageStore.many` holds; and on SQLite the bare-token and suffix read as statements whose text does
not depend on the names asked (so each is prepared once per connection)."""

from __future__ import annotations

import dataclasses
import re
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.memory.entity_names import page_lead
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.ports.pages import PageLeadSource
from fleetmem.transport.dispatch import dispatch

NOW = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)
AWS_KEY = "AKIAZ7Q2M4N8P1R5T9V3"


@pytest.fixture(scope="module")
def brain_local_embedder() -> None:
    return None  # SQLite without an embedder


def _caller(tenant: str, *, remote: bool) -> Caller:
    return Caller(tenant=tenant, client_id="agent-a", scopes=frozenset({"read", "write"}), remote=remote)


@pytest.fixture
def agent() -> Caller:
    return _caller("t-" + uuid.uuid4().hex[:10], remote=True)


def ok(deps: Deps, caller: Caller, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = dispatch(tool, arguments, caller, deps, transport="mcp")
    assert not result.is_error, result.body
    return dict(result.body)


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


def _seed(deps: Deps, agent: Caller) -> None:
    local = _caller(agent.tenant, remote=False)
    pages = {
        "people/zoë-müller": "---\ntitle: Zoë Müller\ntype: person\naliases: [Zo, ZOË M]\n---\n"
        f"# Zoë\n| role | cto |\nZoë runs [[companies/acme]]. Her old key was {AWS_KEY}.\n"
        "<!-- private -->Zoë is job hunting.<!-- /private -->\n## Private\nhidden\n",
        "companies/acme": "---\ntitle: Acme\ntype: company\nowner: ops\n---\nMakes widgets.\n\n"
        "## Timeline\n- 2026-01-02: founded\n",
        "notes/plain": "Just a note with no frontmatter.",
    }
    for slug, content in pages.items():
        ok(deps, agent, "put_page", {"slug": slug, "content": content})
    ok(
        deps,
        local,
        "put_page",
        {"slug": "people/quiet", "content": "---\ntitle: Quiet\nvisibility: private\n---\nShh."},
    )


def test_leads_hold_what_many_holds_in_the_order_asked(brain: Deps, agent: Caller) -> None:
    _seed(brain, agent)
    slugs = ["people/quiet", "nowhere/none", "companies/acme", "people/zoë-müller", "notes/plain", "companies/acme"]
    leads = brain.pages.leads(agent.tenant, slugs)
    assert leads == [PageLeadSource.of(p) for p in brain.pages.many(agent.tenant, slugs)]
    assert [s.slug for s in leads] == ["people/quiet", "companies/acme", "people/zoë-müller", "notes/plain"]
    zoe = leads[2]
    assert (zoe.title, zoe.type, zoe.visibility, len(zoe.aliases)) == ("Zoë Müller", "person", "world", 2)
    assert "job hunting" in zoe.body  # the store gives the body as written; the row strips it
    assert leads[0].visibility == "private" and brain.pages.leads(agent.tenant, []) == []


def test_a_batch_reads_its_hit_pages_as_leads_not_whole_pages(brain: Deps, agent: Caller) -> None:
    _seed(brain, agent)
    pages = _Counting(brain.pages, "many", "leads")
    counted = dataclasses.replace(brain, pages=pages)  # type: ignore[arg-type]
    body = ok(counted, agent, "entity", {"names": ["zo", "Acme", "notes/plain", "Quiet", "Nobody Here"]})
    assert pages.calls == {"many": 0, "leads": 1}
    rows = {r["name"]: r for r in body["results"]}
    for name, slug in (("zo", "people/zoë-müller"), ("Acme", "companies/acme"), ("notes/plain", "notes/plain")):
        page = brain.pages.get(agent.tenant, slug)
        assert page is not None and rows[name]["slug"] == slug
        assert rows[name]["lead"] == page_lead(page.body) and rows[name]["title"] == page.title
    assert rows["zo"]["aka"] == ["zo", "zoë m"] and rows["zo"]["type"] == "person"
    assert rows["zo"]["lead"].startswith("Zoë runs [[companies/acme]]. Her old key was <REDACTED:aws_access_key>.")
    assert "job hunting" not in rows["zo"]["lead"]
    assert rows["Quiet"] == {"name": "Quiet", "found": False}  # a private page stays hidden from a remote caller
    assert (body["found"], body["missing"]) == (3, 2)


def _template(sql: str) -> str:
    """An executed statement (the trace shows it with its values bound) with its values as `?`."""
    return re.sub(r"\b\d+\b", "?", re.sub(r"'(?:[^']|'')*'", "?", sql))


def test_sqlite_bare_reads_are_statements_of_fixed_text_with_the_answers_of_one_name_reads() -> None:
    """Two batches of different sizes and mixes run the same few statement texts (traced as
    executed), and each suffix and prefix gets what `lookup(suffix=…)`, `heads([p])` and
    `list(after=p, limit=2)` give one name, also when the prefix's own page is private."""
    from fleetmem.adapters.local import open_local

    with open_local(":memory:") as stores:
        deps = Deps.over(stores, clock=FixedClock(NOW), ids=SortableIds(), embedder=None, llm=None)
        agent = _caller("t-bare", remote=True)
        local = _caller("t-bare", remote=False)
        for slug in ("people/ann", "people/ann-lee", "people/ann-ross", "people/anna", "people/bo", "team/x/ann-lee"):
            ok(deps, local, "put_page", {"slug": slug, "content": f"---\ntitle: {slug}\n---\nx"})
        ok(deps, local, "put_page", {"slug": "people/cy", "content": "---\nvisibility: private\n---\nx"})
        ok(deps, local, "put_page", {"slug": "people/cy-dee", "content": "x"})
        ran: list[str] = []
        stores.db.read(lambda c: c.set_trace_callback(ran.append))
        texts: list[set[str]] = []
        asks = [
            (["ann-lee", "x/ann-lee"], ["people/ann", "people/cy", "companies/ann"]),
            (["ann-lee", "bo", "zz", "ross"], ["people/ann", "people/bo", "people/cy", "people/zz", "companies/q"]),
        ]
        for suffixes, prefixes in asks:
            for world_only in (True, False):
                ran.clear()
                got = stores.pages.bare_candidates(
                    "t-bare", suffixes=suffixes, prefixes=prefixes, world_only=world_only, limit=10
                )
                texts.append({_template(s) for s in ran if s.startswith("SELECT")})
                for s in suffixes:
                    alone = stores.pages.lookup(
                        "t-bare", aliases=[], titles=[], slugs=[], suffix=s, world_only=world_only, limit=10
                    )
                    assert got.suffix[s] == alone, s
                for p in prefixes:
                    own = [h for h in stores.pages.heads("t-bare", [p]) if not world_only or h.visibility == "world"]
                    after = stores.page_listing.list("t-bare", world_only=world_only, limit=2, after=p)
                    assert got.prefix[p] == own + after, (p, world_only)
        assert got.prefix["people/cy"][0].slug == "people/cy"  # trusted: the private page is its own
        # the second batch (other sizes, another mix) ran only statement texts the first one ran
        assert texts[2] <= texts[0] and texts[3] <= texts[1] and len(texts[0]) <= 3
        # the entity verb answers a batch as it answers each name alone
        names = ["ann", "cy", "ann-lee", "bo", "ross"]
        body = ok(deps, agent, "entity", {"names": names})
        for name, row in zip(names, body["results"], strict=True):
            single = ok(deps, agent, "entity", {"name": name})
            assert row["found"] == single["found"], name
            assert row.get("slug") == (single["card"]["entity"]["slug"] if single["found"] else None), name


@pytest.mark.parametrize(
    "raw",
    [
        "Alice Example",
        "ALICE\texample",
        "people/Alice Example",
        "zed0-quill",
        "!!!///???",
        "a/b",
        "ACME, Inc.",
        "Zoë Müller",
        "İlker Işık",
        "JÜRGEN STRASSE",
        "Ka\u200dren",
        "Сергей",
        "北京办公室",
        "ﬁne",
        "x\u0301y",
    ],
)
def test_a_names_keys_are_folded_once_to_the_values_the_one_by_one_folds_give(raw: str) -> None:
    from fleetmem.memory.entities import _bare_tokens, _keys_of
    from fleetmem.memory.slugs import alias_keys, ascii_slug, slugify, title_keys

    keys = _keys_of(raw)
    assert keys.aliases == set(alias_keys(raw)) and keys.titles == set(title_keys(raw))
    assert keys.slugs == {s for s in (raw, slugify(raw), ascii_slug(raw)) if s}
    assert (keys.slug, keys.tokens) == (slugify(raw), _bare_tokens(raw))
