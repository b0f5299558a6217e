"""The hybrid search arm shared by recall (pages and, per D13, facts) and synthesize's retrieval.

Public API:
- `hybrid_search(deps, tenant, text, *, kinds=("chunk",), world_only=True, k=50, ranking="shipped")
  -> SearchResult`:
  embeds `text` with the configured embedder (one call), asks the SearchIndex for its keyword and
  vector arms, and fuses them with the shipped ranking (`ranking.shipped`: RRF k=60 with
  content-word, entity and date awareness, hits that are questions scored down,
  `ranking.questions_down`, and lines said again and again scored down, `ranking.repeats_down`;
  `ranking=` picks another of `ranking.RANKINGS` for the benchmark).
  A query that asks several questions at once (`ranking.parts`) also searches each part
  (the vectors come from the query's one embedding call) and interleaves the rankings
  (`ranking.cover`) so each part's best hit reaches the top; the query's and the parts' searches
  go out in one `SearchIndex.search_many` call (on OpenSearch one `_msearch`). A question that
  names someone (`ranking.topic`: "Which hobbies have Maya and Leo taken up?") also searches its
  topic without the names, in the same call; the topic's hits titled by the people named (`ranking.named`; statements
  before questions, `ranking.statements_first`) lead a list question's hits (`ranking.lists`; its
  topic is searched `ranking.LIST_DEPTH` times deeper), the whole query's follow, and join any other
  question's cover after its first round. In the fused list a hit that says word for word what a
  hit above it says (but for the dates) goes after the others (`ranking.distinct`). No embedder, an embedder raising
  `Unavailable`, or a failing vector arm -> keyword-only, with `degraded` holding the reason
  (never an error).
  Pass `embedded=query_vector(deps, text, tenant=tenant)` to reuse one embedding across several
  searches.
- `query_vector(deps, text, *, tenant) -> Embedded`: the one embedding call a search needs (the
  query and, when it asks several questions, each of them, and its topic, in one batch). A
  successful answer is kept in a bounded in-process LRU (QUERY_VECTORS entries per embedder
  object, queries up to QUERY_VECTOR_MAX_CHARS characters) keyed by (tenant, model id, the exact
  query text): the same query asked again costs no model call. The embedders are deterministic, so
  a kept vector is the one a fresh call gives; the tenant is in the key so one tenant's hit never
  tells (by its speed) what another tenant asked; a failure is not kept.
- `SearchResult`: `hits` (fused, best first, each a `Fused`), `degraded: str | None`,
  `query_tokens`.
- `Fused`: `hit` (the SearchHit), `score` (fused), `keyword_rank` / `vector_rank` (1-based or None),
  `cosine` (vector-arm score or None).
- `best_per_page(hits) -> list[Fused]`: first (best) chunk per page slug, order kept.
- `tokens(text) -> list[str]`: the case-folded word tokens used for lexical evidence.
- `evidence_for(query, fused, *, alias_hit_slugs, query_tokens) -> str`: the recall
  evidence enum (docs/protocol.md, recall), strongest first:
  `alias_hit` — the normalized query equals a normalized alias of the page;
  `exact_title_match` — the query equals the title or appears in it as a whole-word phrase
  (case-insensitive);
  `high_vector_match` — the page's best chunk has cosine >= 0.80 with the query;
  `keyword_exact` — the keyword arm found the chunk AND every query token appears as a whole word
  in the title or the chunk's indexed text: its header (title, aliases and the frontmatter
  `summary`, `indexing.docs_for_page`) and its body (a lexical hit covering the whole query is the
  "strong score"; raw BM25 magnitudes differ between backends, so they are not compared);
  `weak_semantic` — anything else.
- `alias_slugs(deps, tenant, query, *, world_only) -> set[str]`: pages that carry the query as
  an alias (one PageStore.lookup).
"""

from __future__ import annotations

import re
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import NamedTuple

from fleetmem.errors import Unavailable
from fleetmem.memory.ranking import (
    LIST_DEPTH,
    SHIPPED,
    cover,
    distinct,
    fuse,
    lists,
    named,
    searches,
    statements_first,
)
from fleetmem.memory.slugs import alias_keys, normalize_alias
from fleetmem.memory.vectors import pack
from fleetmem.models import SearchHit, SearchQuery
from fleetmem.ports import Deps
from fleetmem.protocol import HIGH_VECTOR_MATCH

_TOKEN = re.compile(r"\w+", re.UNICODE)


class Embedded(NamedTuple):
    """A query's embedding (packed vector or None), why it is missing (None when present), and the
    embeddings of the questions it asks (`ranking.parts`; empty for a query of one part)."""

    vector: bytes | None
    problem: str | None
    parts: tuple[bytes, ...] = ()


def tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.casefold()) if t]


@dataclass(frozen=True)
class Fused:
    hit: SearchHit
    score: float
    keyword_rank: int | None = None
    vector_rank: int | None = None
    cosine: float | None = None


@dataclass
class SearchResult:
    hits: list[Fused] = field(default_factory=list)
    degraded: str | None = None
    query_tokens: list[str] = field(default_factory=list)


#: Query embeddings kept per embedder (`query_vector`): agents ask the same question again, and an
#: embedding is a model call (~5 ms for the local MiniLM, a network round trip for Bedrock).
QUERY_VECTORS = 512
#: Queries longer than this are embedded every time (they are rarely asked twice and would fill it).
QUERY_VECTOR_MAX_CHARS = 2000


class _QueryVectors:
    """A bounded LRU of successful `Embedded` answers, keyed by (tenant, model id, query text)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, str, str], Embedded] = OrderedDict()

    def get(self, key: tuple[str, str, str]) -> Embedded | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def put(self, key: tuple[str, str, str], value: Embedded) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > QUERY_VECTORS:
                self._items.popitem(last=False)


#: One cache per embedder object, gone with it: a store opened with another embedder never reads
#: vectors another one made, whatever its model id says.
_query_vectors: weakref.WeakKeyDictionary[object, _QueryVectors] = weakref.WeakKeyDictionary()
_query_vectors_lock = threading.Lock()


def _cache_of(embedder: object) -> _QueryVectors | None:
    with _query_vectors_lock:
        try:
            cache = _query_vectors.get(embedder)
            if cache is None:
                cache = _query_vectors[embedder] = _QueryVectors()
        except TypeError:  # an embedder that cannot be weakly referenced is not cached
            return None
    return cache


def query_vector(deps: Deps, text: str, *, tenant: str) -> Embedded:
    if deps.embedder is None:
        return Embedded(None, deps.diagnostics.embedder_problem or "no embedding model is configured")
    cache = _cache_of(deps.embedder) if len(text) <= QUERY_VECTOR_MAX_CHARS else None
    key = (tenant, str(deps.embedder.model_id), text)
    if cache is not None and (hit := cache.get(key)) is not None:
        return hit
    extra, _ = searches(text)
    try:  # the query, its parts and its topic in one call
        vecs = deps.embedder.embed([text, *extra])
    except Unavailable as exc:  # a failure is never cached: the next call asks the model again
        return Embedded(None, f"embedding model unavailable ({exc.reason or 'provider error'})")
    embedded = Embedded(pack(vecs[0]), None, tuple(pack(v) for v in vecs[1:]))
    if cache is not None:
        cache.put(key, embedded)
    return embedded


def hybrid_search(
    deps: Deps,
    tenant: str,
    text: str,
    *,
    kinds: tuple[str, ...] = ("chunk",),
    world_only: bool = True,
    k: int = 50,
    embedded: Embedded | None = None,
    ranking: str = SHIPPED,
) -> SearchResult:
    vector, degraded, part_vectors = embedded if embedded is not None else query_vector(deps, text, tenant=tenant)
    asking: list[tuple[str, bytes | None]] = [(text, vector)]
    extra, about = searches(text) if ranking == SHIPPED else ([], None)
    if extra:  # each part and the topic are searched too, with their vectors when the query has one
        asking += list(zip(extra, part_vectors or [None] * len(extra), strict=True))
    listing = about is not None and lists(text)
    depths = [k] * len(asking)
    if listing:  # a list question wants every piece: its topic (searched last) reaches deeper
        depths[-1] = k * LIST_DEPTH
    found = _arms(
        deps, [_query(deps, tenant, t, v, kinds, world_only, d) for (t, v), d in zip(asking, depths, strict=True)]
    )
    by_id: dict[str, SearchHit] = {}
    kw_rank: dict[str, int] = {}
    vec_rank: dict[str, int] = {}
    cos: dict[str, float] = {}
    rankings = []
    for (asked, _), (keyword, vector_hits, problem) in zip(asking, found, strict=True):
        degraded = degraded or problem
        for rank, h in enumerate(keyword, start=1):
            by_id.setdefault(h.doc_id, h)
            kw_rank.setdefault(h.doc_id, rank)
        for rank, h in enumerate(vector_hits, start=1):
            by_id.setdefault(h.doc_id, h)
            vec_rank.setdefault(h.doc_id, rank)
            cos.setdefault(h.doc_id, h.score)
        rankings.append(fuse(ranking, asked, keyword, vector_hits))
    topical: list[tuple[str, float]] = []
    if about is not None:
        # The topic's hits, kept to the entities the query names (statements before questions).
        titles = {d: h.title for d, h in by_id.items()}
        topical = statements_first(named(text, rankings.pop(), titles), {d: h.text for d, h in by_id.items()})
        if topical and listing:
            # A list question: they lead; the whole query's hits (the named people's small talk first) follow.
            rankings[0], topical = cover([topical + rankings[0]]), []
    # Any other question naming someone: they join the cover after the first round.
    fused = cover(rankings, topical) if len(rankings) > 1 or topical else rankings[0]
    if ranking == SHIPPED:  # a line said again adds no piece: its copies go after the rest
        fused = distinct(fused, by_id)
    return SearchResult(
        hits=[Fused(by_id[d], s, kw_rank.get(d), vec_rank.get(d), cos.get(d)) for d, s in fused],
        degraded=degraded,
        query_tokens=tokens(text),
    )


def _query(
    deps: Deps, tenant: str, text: str, vector: bytes | None, kinds: tuple[str, ...], world_only: bool, k: int
) -> SearchQuery:
    return SearchQuery(
        tenant=tenant,
        text=text,
        vector=vector,
        vector_model=deps.embedder.model_id if (vector is not None and deps.embedder) else None,
        kinds=kinds,  # type: ignore[arg-type]
        world_only=world_only,
        k=k,
    )


#: One query's answer: keyword hits, vector hits, and why the vector arm is missing (or None).
Arms = tuple[list[SearchHit], list[SearchHit], str | None]


def _arms(deps: Deps, queries: list[SearchQuery]) -> list[Arms]:
    """One SearchIndex call for every query: the `Arms` of each."""
    out: list[Arms] = []
    for query, found in zip(queries, deps.search.search_many(queries), strict=True):
        if query.vector is None:
            out.append((list(found.keyword), [], None))
        elif found.vector is None:
            out.append((list(found.keyword), [], found.vector_error or "the vector search arm did not run"))
        else:
            out.append((list(found.keyword), list(found.vector), None))
    return out


def best_per_page(hits: list[Fused]) -> list[Fused]:
    seen: set[str] = set()
    out = []
    for f in hits:
        if f.hit.slug in seen:
            continue
        seen.add(f.hit.slug)
        out.append(f)
    return out


def alias_slugs(deps: Deps, tenant: str, query: str, *, world_only: bool) -> set[str]:
    aliases = alias_keys(query)
    if not aliases:
        return set()
    matches = deps.pages.lookup(
        tenant,
        aliases=aliases,
        titles=[],  # only alias hits are kept
        slugs=[],
        suffix="",
        world_only=world_only,
        limit=20,
    )
    return {m.page.slug for m in matches if m.via == "alias"}


def _phrase_in(phrase: str, text: str) -> bool:
    phrase, text = normalize_alias(phrase), normalize_alias(text)
    if not phrase:
        return False
    return phrase == text or re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text) is not None


def evidence_for(
    query: str,
    fused: Fused,
    *,
    alias_hit_slugs: set[str],
    query_tokens: list[str],
) -> str:
    hit = fused.hit
    if hit.slug in alias_hit_slugs:
        return "alias_hit"
    if _phrase_in(query, hit.title):
        return "exact_title_match"
    if fused.cosine is not None and fused.cosine >= HIGH_VECTOR_MATCH:
        return "high_vector_match"
    if fused.keyword_rank is not None and query_tokens:
        words = set(tokens(hit.title)) | set(tokens(hit.text))  # the header counts: it was matched
        if all(t in words for t in query_tokens):
            return "keyword_exact"
    return "weak_semantic"
