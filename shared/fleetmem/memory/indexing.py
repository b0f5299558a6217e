"""What goes into the search index, built the same way by both backends (the local write-through
path and the AWS stream indexer both call these).

Public API:
- `docs_for_page(page: Page) -> list[SearchDoc]`: heading-aware chunks of the page body (no
  vectors). Each doc's `text` is a header block (the title; chunk 0 also the aliases and summary),
  a blank line, then the chunk. Private content (`pagefmt.strip_private`) never reaches a world
  doc: a world page whose body has private parts gets world chunks of the stripped body
  (`chunk:<slug>#<n>`) plus private chunks of the full body (`chunk:<slug>#p<n>`). A private page
  yields private chunks only. Timeline entries form a trailing "Timeline" section.
- `doc_for_fact(fact: Fact) -> SearchDoc`: `fact:<fact_id>`, kind "fact", slug/title = entity slug
  ("" when none), carrying the fact's stored vector when it has one.
- `chunk_display(text: str) -> str`: the chunk without its header block (what recall shows).
- `fact_doc_id(fact_id) -> str`, `chunk_prefix(slug) -> str`.
- `embed_docs(deps, docs) -> (docs, problem | None)`: fills `vector`/`vector_model` with the
  configured embedder for docs that lack a vector of that model (batches of 32). No embedder, or
  the embedder raising `Unavailable`, returns the docs unchanged plus the reason; never raises
  for that.
- `index_fact(deps, fact) -> bool` / `unindex_facts(deps, tenant, fact_ids) -> bool`: write-through
  helpers; True when the index now reflects the change (False when `write_through` is off, the
  asynchronous indexer then owns it, or the index refused the write).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fleetmem.errors import PortError, Unavailable
from fleetmem.memory.pagefmt import strip_private
from fleetmem.memory.vectors import pack
from fleetmem.models import Fact, Page, SearchDoc
from fleetmem.ports import Deps

CHUNK_CHARS = 1000  # ~250 MiniLM word pieces: the model truncates at 256
EMBED_BATCH = 32
_HEADING = re.compile(r"^#{1,6}[ \t]+\S")
_FENCE = ("```", "~~~")


def fact_doc_id(fact_id: str) -> str:
    return f"fact:{fact_id}"


def chunk_prefix(slug: str) -> str:
    return f"chunk:{slug}#"


def chunk_display(text: str) -> str:
    _, sep, rest = text.partition("\n\n")
    return rest if sep else text


def _sections(body: str) -> list[str]:
    """Split at headings (outside code fences); each section keeps its heading line."""
    sections: list[list[str]] = [[]]
    in_fence = False
    for line in body.splitlines():
        if line.lstrip().startswith(_FENCE):
            in_fence = not in_fence
        if not in_fence and _HEADING.match(line) and any(s.strip() for s in sections[-1]):
            sections.append([])
        sections[-1].append(line)
    return ["\n".join(s).strip() for s in sections if "\n".join(s).strip()]


def _split_long(section: str, limit: int = CHUNK_CHARS) -> list[str]:
    if len(section) <= limit:
        return [section]
    lines = section.splitlines()
    heading = lines[0] if _HEADING.match(lines[0]) else ""
    paragraphs = re.split(r"\n\s*\n", section)
    out: list[str] = []
    current = ""
    for para in paragraphs:
        # One huge paragraph: cut at a space near the limit. Cut by position, never re-copying the
        # rest of the paragraph, so the work stays linear in its length.
        start, end = 0, len(para)
        while end - start > limit:
            cut = para.rfind(" ", start, start + limit)
            cut = cut if cut - start > limit // 2 else start + limit
            if current:
                out.append(current)
                current = ""
            out.append(para[start:cut].strip())
            start = cut
            while start < end and para[start].isspace():
                start += 1
            end = len(para.rstrip())
        para = para[start:end] if start else para
        candidate = f"{current}\n\n{para}" if current else para
        if len(candidate) > limit and current:
            out.append(current)
            current = para
        else:
            current = candidate
    if current:
        out.append(current)
    # A continuation keeps its section heading so the chunk reads on its own.
    return [c if (i == 0 or not heading or c.startswith(heading)) else f"{heading}\n{c}" for i, c in enumerate(out)]


def _chunks(body: str) -> list[str]:
    return [c for s in _sections(body) for c in _split_long(s) if c.strip()]


def _page_chunks(page: Page, body: str, visibility: str, id_mark: str) -> list[SearchDoc]:
    pieces = _chunks(body)
    if page.timeline:
        lines = "\n".join(f"- {t.date}: {t.text}" for t in page.timeline)
        pieces.extend(_split_long(f"## Timeline\n{lines}"))
    if not pieces:
        pieces = [page.summary or page.title]
    docs = []
    for n, piece in enumerate(pieces):
        header = [page.title]
        if n == 0:
            if page.aliases:
                header.append("aka: " + ", ".join(page.aliases))
            if page.summary and page.summary not in piece:
                header.append(page.summary)
        docs.append(
            SearchDoc(
                tenant=page.tenant,
                doc_id=f"{chunk_prefix(page.slug)}{id_mark}{n}",
                kind="chunk",
                slug=page.slug,
                title=page.title,
                text="\n".join(header) + "\n\n" + piece,
                visibility=visibility,  # type: ignore[arg-type]
                updated_at=page.updated_at,
            )
        )
    return docs


def docs_for_page(page: Page) -> list[SearchDoc]:
    if page.visibility == "private":
        return _page_chunks(page, page.body, "private", "p")
    public = strip_private(page.body)
    docs = _page_chunks(page, public, "world", "")
    if public != page.body:
        docs.extend(_page_chunks(page, page.body, "private", "p"))
    return docs


def doc_for_fact(fact: Fact) -> SearchDoc:
    return SearchDoc(
        tenant=fact.tenant,
        doc_id=fact_doc_id(fact.fact_id),
        kind="fact",
        slug=fact.entity_slug or "",
        title=fact.entity_slug or "",
        text=fact.text,
        visibility=fact.visibility,
        fact_id=fact.fact_id,
        updated_at=fact.created_at,
        vector=fact.vector,
        vector_model=fact.vector_model,
    )


def embed_docs(deps: Deps, docs: Sequence[SearchDoc]) -> tuple[list[SearchDoc], str | None]:
    embedder = deps.embedder
    if embedder is None:
        return list(docs), deps.diagnostics.embedder_problem or "no embedding model is configured"
    out = list(docs)
    todo = [i for i, d in enumerate(out) if not (d.vector and d.vector_model == embedder.model_id)]
    for start in range(0, len(todo), EMBED_BATCH):
        batch = todo[start : start + EMBED_BATCH]
        try:
            vectors = embedder.embed([out[i].text for i in batch])
        except Unavailable as exc:
            return out, f"embedding model unavailable ({exc.reason or 'provider error'})"
        for i, vec in zip(batch, vectors, strict=True):
            out[i] = out[i].model_copy(update={"vector": pack(vec), "vector_model": embedder.model_id})
    return out, None


def index_fact(deps: Deps, fact: Fact) -> bool:
    if not deps.search.write_through:
        return False
    doc = doc_for_fact(fact)
    if doc.vector is None:
        docs, _ = embed_docs(deps, [doc])
        doc = docs[0]
    try:
        deps.search.upsert([doc])
    except PortError:
        return False
    return True


def unindex_facts(deps: Deps, tenant: str, fact_ids: Sequence[str]) -> bool:
    if not deps.search.write_through:
        return False
    try:
        deps.search.delete(tenant, [fact_doc_id(f) for f in fact_ids])
    except PortError:
        return False
    return True
