"""A synthetic corpus shaped like the reference implementation's entity-card perf test.

N pages (half people, half companies), ~1 alias and ~1 typed link per page, 2 facts per page, and
50 "target" entities with 20 extra facts each (the entities the benchmark asks about), the first
8 of them hubs that every 6th page also links to (~400 backlinks each at 20K pages). Everything
is written through the store ports (`pages.put`, `facts.put`, `search.upsert` in batches), never
through one dispatch per page and never with raw SQL, so the seeded rows are exactly what the
verbs would have written — only faster.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetmem.memory.indexing import doc_for_fact, docs_for_page, embed_docs
from fleetmem.models import Fact, Link, Page, TimelineEntry
from fleetmem.ports import Deps

TARGETS = 50
FACTS_PER_TARGET = 20
FACTS_PER_PAGE = 2
HUBS = 8
HUB_EVERY = 6
BATCH = 500
#: Bumped whenever the corpus shape changes, so a reused data directory is seeded anew.
CORPUS_VERSION = 2

WORDS = (
    "pricing roadmap hiring churn onboarding security audit migration launch budget forecast partnership "
    "latency outage retention renewal contract pilot feedback compliance research design analytics infra "
    "billing support expansion procurement training offsite strategy review quarterly platform mobile"
).split()


@dataclass(frozen=True)
class Corpus:
    tenant: str
    pages: int
    targets: list[str]  # slugs of the target entities
    target_titles: list[str]
    seconds: float


def slug_for(i: int) -> str:
    return f"people/person-{i:06d}" if i % 2 == 0 else f"companies/company-{i:06d}"


def title_for(i: int) -> str:
    return f"Person {i:06d}" if i % 2 == 0 else f"Company {i:06d}"


def hub_link(i: int, pages: int) -> tuple[Link, ...]:
    """Every HUB_EVERY-th non-target page also links to one of the HUBS first targets."""
    if i < TARGETS or i % HUB_EVERY or pages <= HUBS:
        return ()
    return (Link(type="works_with", target=slug_for((i // HUB_EVERY) % HUBS), context=None),)


def _body(rng: random.Random, i: int) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(24))
    return f"# {title_for(i)}\n\n{title_for(i)} works on {words}.\n"


def _page(rng: random.Random, i: int, pages: int, *, tenant: str, now: datetime, updated: datetime) -> Page:
    """Page `i` of a corpus of `pages`: one alias, a link to another page (and a hub), a kickoff
    timeline entry on the targets."""
    slug = slug_for(i)
    return Page(
        tenant=tenant,
        slug=slug,
        title=title_for(i),
        type="person" if i % 2 == 0 else "company",
        aliases=(f"alias-{i:06d}",),
        summary=None,
        body=_body(rng, i),
        links=(
            Link(type="works_with", target=slug_for((i * 7919 + 1) % pages), context=None),
            *hub_link(i, pages),
        ),
        timeline=(TimelineEntry(date=(now - timedelta(days=5)).date().isoformat(), text="kickoff"),)
        if i < TARGETS
        else (),
        created_at=updated,
        updated_at=updated,
        author="bench",
    )


def seed_corpus(
    deps: Deps,
    *,
    tenant: str,
    pages: int,
    now: datetime,
    progress: Callable[[int, int], None] | None = None,
    index_facts: bool = True,
    embed: bool = False,
) -> Corpus:
    """Write the corpus into `deps`' stores. Page timestamps lie 400..30 days before `now`, so a
    benchmark's own writes are the only recent changes (delta measures O(changes)). With `embed`,
    every indexed doc gets its vector from `deps.embedder` (in batches, as an import would)."""
    rng = random.Random(pages)  # deterministic per size
    started = time.perf_counter()
    old = now - timedelta(days=400)
    span = timedelta(days=370).total_seconds()
    docs: list = []

    def flush(force: bool = False) -> None:
        if docs and (force or len(docs) >= BATCH):
            deps.search.upsert(embed_docs(deps, docs)[0] if embed else list(docs))
            docs.clear()

    def fact(i: int, k: int, slug: str, created: datetime) -> Fact:
        seq = deps.facts.next_seq(tenant)
        f = Fact(
            tenant=tenant,
            fact_id=f"f_bench{i:07d}{k:03d}",
            seq=seq,
            text=f"{title_for(i)} fact {k}: {rng.choice(WORDS)} {rng.choice(WORDS)} is on track",
            kind="commitment" if k == 0 and i < TARGETS else "fact",
            entity_slug=slug,
            provenance="bench corpus",
            client_id="bench",
            created_at=created,
        )
        deps.facts.put(f)
        if index_facts:
            docs.append(doc_for_fact(f))
        return f

    for i in range(pages):
        slug = slug_for(i)
        updated = old + timedelta(seconds=span * i / max(pages, 1))
        page = _page(rng, i, pages, tenant=tenant, now=now, updated=updated)
        deps.pages.put(page)
        docs.extend(docs_for_page(page))
        extra = FACTS_PER_TARGET if i < TARGETS else 0
        for k in range(FACTS_PER_PAGE + extra):
            fact(i, k, slug, updated + timedelta(seconds=k))
        flush()
        if progress and (i + 1) % 1000 == 0:
            progress(i + 1, pages)
    flush(force=True)
    if progress and pages % 1000:
        progress(pages, pages)
    return Corpus(
        tenant=tenant,
        pages=pages,
        targets=[slug_for(i) for i in range(min(TARGETS, pages))],
        target_titles=[title_for(i) for i in range(min(TARGETS, pages))],
        seconds=time.perf_counter() - started,
    )
