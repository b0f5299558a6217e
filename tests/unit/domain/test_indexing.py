"""What goes into the search index: heading-aware page chunks, fact docs, and embedding."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from tests.unit.domain.delta_backends import BACKENDS

import fleetmem.memory.verbs  # noqa: F401  (registers every tool for dispatch)
from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.errors import Unavailable
from fleetmem.memory.indexing import chunk_display, doc_for_fact, docs_for_page, embed_docs
from fleetmem.memory.vectors import unpack
from fleetmem.models import Caller, Fact, Page, TimelineEntry
from fleetmem.ports import Deps
from fleetmem.timefmt import to_ms
from fleetmem.transport.dispatch import dispatch

T0 = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)


def _page(body: str, **kw) -> Page:
    base = dict(tenant="t1", slug="companies/acme", title="Acme Corp", body=body, created_at=T0, updated_at=T0)
    base.update(kw)
    return Page(**base)


def test_each_heading_starts_a_chunk_and_every_chunk_carries_the_title():
    docs = docs_for_page(_page("Intro line.\n\n## Pricing\nWe pay per seat.\n\n## Team\nAlice leads."))
    assert [d.doc_id for d in docs] == [
        "chunk:companies/acme#0",
        "chunk:companies/acme#1",
        "chunk:companies/acme#2",
    ]
    assert all(d.text.startswith("Acme Corp") for d in docs)
    assert chunk_display(docs[1].text) == "## Pricing\nWe pay per seat."
    assert all(d.kind == "chunk" and d.slug == "companies/acme" and d.vector is None for d in docs)


def test_aliases_and_summary_ride_the_first_chunk_header_only():
    docs = docs_for_page(_page("Body.\n\n## More\nText.", aliases=("acme inc",), summary="A payments firm."))
    assert "aka: acme inc" in docs[0].text and "A payments firm." in docs[0].text
    assert "aka:" not in docs[1].text
    assert chunk_display(docs[0].text) == "Body."


def test_long_sections_are_split_and_continuations_keep_their_heading():
    para = ("word " * 150).strip()
    docs = docs_for_page(_page(f"## Notes\n{para}\n\n{para}\n\n{para}"))
    assert len(docs) >= 3
    assert all(chunk_display(d.text).startswith("## Notes") for d in docs)
    assert all(len(chunk_display(d.text)) <= 1000 + len("## Notes\n") for d in docs)


def test_private_parts_of_a_world_page_only_reach_private_chunks():
    body = "Public fact.\n\n<!-- private -->salary 200k<!-- /private -->\n\n## Secret (private)\ncode word"
    docs = docs_for_page(_page(body))
    world = [d for d in docs if d.visibility == "world"]
    private = [d for d in docs if d.visibility == "private"]
    assert world and private
    assert not any("salary" in d.text or "code word" in d.text for d in world)
    assert any("salary" in d.text for d in private)
    assert all("#p" in d.doc_id for d in private)


def test_a_private_page_yields_only_private_chunks():
    docs = docs_for_page(_page("Hidden plans.", visibility="private"))
    assert docs and all(d.visibility == "private" for d in docs)


def test_timeline_entries_are_searchable_and_an_empty_body_still_gets_a_chunk():
    docs = docs_for_page(_page("", timeline=(TimelineEntry(date="2026-06-01", text="Signed the deal"),)))
    assert any("Signed the deal" in d.text for d in docs)
    assert docs_for_page(_page("", summary="Just a summary."))[0].text.endswith("Just a summary.")


def test_fact_docs_use_the_fact_id_entity_and_stored_vector():
    fact = Fact(
        tenant="t1",
        fact_id="f_1",
        seq=1,
        text="Alice likes tea",
        entity_slug="people/alice",
        provenance="chat",
        client_id="a",
        created_at=T0,
        vector=b"\x00\x00\x80?",
        vector_model="m",
    )
    doc = doc_for_fact(fact)
    assert (doc.doc_id, doc.kind, doc.slug, doc.fact_id, doc.text) == (
        "fact:f_1",
        "fact",
        "people/alice",
        "f_1",
        "Alice likes tea",
    )
    assert doc.vector == fact.vector and doc.vector_model == "m"


def test_embed_docs_fills_vectors_with_the_configured_model(deps):
    docs, problem = embed_docs(deps, docs_for_page(_page("Hello.\n\n## B\nWorld.")))
    assert problem is None
    assert all(d.vector_model == deps.embedder.model_id for d in docs)
    assert len(unpack(docs[0].vector)) == deps.embedder.dim


def test_embed_docs_without_an_embedder_returns_the_docs_and_the_reason(deps_keyword_only):
    docs, problem = embed_docs(deps_keyword_only, docs_for_page(_page("Hello.")))
    assert problem == deps_keyword_only.diagnostics.embedder_problem
    assert all(d.vector is None for d in docs)


def test_embed_docs_reports_an_unavailable_embedder_instead_of_raising(deps):
    class Down:
        """An embedder whose provider is down (stands in for a throttled Bedrock)."""

        model_id, dim = "down", 4

        def embed(self, texts):
            raise Unavailable("throttled", reason="throttled")

    deps.embedder = Down()
    docs, problem = embed_docs(deps, docs_for_page(_page("Hello.")))
    assert problem and "throttled" in problem
    assert all(d.vector is None for d in docs)


# --- a frontmatter summary is searchable like the body (both backends) -------------------------------

STRONG = {"alias_hit", "exact_title_match", "high_vector_match", "keyword_exact"}


@pytest.fixture(params=BACKENDS)
def search_deps(request: pytest.FixtureRequest) -> Iterator[Deps]:
    clock = FixedClock(to_ms(datetime.now(UTC)))
    if request.param == "sqlite":
        stores = open_local(":memory:")
        try:
            yield Deps.over(stores, clock=clock, ids=SortableIds(), embedder=HashEmbedder(), llm=None)
        finally:
            stores.close()
        return
    from tests.aws import engines

    endpoint = engines.dynamodb_local_endpoint(request.config)
    # the OpenSearch node, written through and refreshed as the local engines do
    with engines.aws_deps(request.config, endpoint, embedder=HashEmbedder(), clock=clock, write_through=True) as d:
        yield d


def test_a_word_only_in_the_frontmatter_summary_is_a_keyword_hit(search_deps):
    tenant = "t-" + uuid.uuid4().hex[:12]  # a fresh tenant per test (shared tables)
    caller = Caller(tenant=tenant, client_id="a", scopes=frozenset({"read", "write"}), remote=True)
    runbook = (
        "---\ntitle: Payments runbook\ntype: note\nsummary: How we handle chargebacks and disputes\n---\n"
        "# Steps\nOpen the ledger, check the balance, and call the bank.\n"
    )
    for slug, content in [("notes/payments-runbook", runbook)] + [
        (f"notes/other-{i}", f"---\ntitle: Other {i}\n---\nThe ledger and the bank balance {i}.\n") for i in range(3)
    ]:
        r = dispatch("put_page", {"slug": slug, "content": content}, caller, search_deps)
        assert not r.is_error and r.body["search_state"] == "current", r.body
    for query in ("chargebacks", "disputes chargebacks", "chargebacks ledger"):
        r = dispatch("recall", {"query": query}, caller, search_deps)
        hits = {x["slug"]: x for x in r.body["results"]}
        assert "notes/payments-runbook" in hits, (query, r.body)
        assert hits["notes/payments-runbook"]["evidence"] in STRONG, (query, hits)
        assert hits["notes/payments-runbook"]["create_safety"] in ("exists", "probable")
    # the shown chunk is still the body; the other pages do not mention the word anywhere
    r = dispatch("recall", {"query": "chargebacks"}, caller, search_deps)
    assert r.body["results"][0]["chunk"].startswith("# Steps")
    assert all(x["evidence"] == "weak_semantic" for x in r.body["results"][1:])
