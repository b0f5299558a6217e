"""The OpenSearch request bodies and answers, as pure functions (checked as golden JSON in
tests/aws/golden/): index names, aliases and mappings, document keys, the keyword and k-NN arms of
one `_msearch`, bulk writes, lookups and deletes, and the parsing of what comes back. The index that
sends them is `fleetmem.adapters.aws.opensearch`."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fleetmem.errors import Unavailable
from fleetmem.memory.vectors import unpack
from fleetmem.models import SearchDoc, SearchHit, SearchHits, SearchQuery
from fleetmem.timefmt import iso

INDEX_VERSION = 2  # 2: the `doc_key` field
ANALYZER = "fleetmem_text"
#: most `_id`s a lookup reads in one search (the default `index.max_result_window`); a page has a
#: few hundred chunks at most, so a batch that finds more is retried rather than half-handled
LOOKUP_MAX = 10_000
FLAVOURS = ("domain", "serverless")
_SOURCE_FIELDS = ["tenant", "doc_id", "kind", "slug", "title", "text", "visibility", "fact_id", "updated_at"]


def model_slug(model_id: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", model_id.lower()).strip("-") or "none"


def index_name(prefix: str, model_id: str, dim: int, version: int = INDEX_VERSION) -> str:
    return f"{prefix}-docs-{model_slug(model_id)}-{dim}-v{version}"


def doc_key(tenant: str, doc_id: str) -> str:
    """A document's identity in the index (`doc_key` field; the `_id` on a managed domain): doc
    ids repeat across tenants, so the tenant is part of it."""
    return f"{tenant}|{doc_id}"


#: OpenSearch refuses a document `_id` longer than this many UTF-8 bytes
ID_MAX_BYTES = 512


def domain_id(key: str) -> str:
    """The `_id` of the doc with this `doc_key` on a managed domain: the key itself, or (over the
    limit) "h:" + its SHA-256, which never equals a key (every key holds a "|")."""
    if len(key.encode("utf-8")) <= ID_MAX_BYTES:
        return key
    return "h:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------
# pure request builders


def alias_name(prefix: str, model_id: str, dim: int, version: int = INDEX_VERSION) -> str:
    """The alias functions read and write through."""
    return f"{index_name(prefix, model_id, dim, version)}-live"


def rebuild_name(alias: str, stamp: str) -> str:
    """The concrete index a rebuild started at `stamp` fills (beside the first, `index_name`)."""
    return f"{alias.removesuffix('-live')}-{stamp}"


def index_body(dim: int, *, replicas: int | None = None, alias: str | None = None) -> dict[str, Any]:
    """Settings + mapping of the docs index (HNSW, cosine, lucene engine); `replicas` (omitted:
    the service's default, as Serverless requires) and the `alias` it is created behind."""
    index: dict[str, Any] = {"knn": True, "number_of_shards": 1}
    if replicas is not None:
        index["number_of_replicas"] = replicas
    body = _index_body(dim, index)
    if alias:
        body["aliases"] = {alias: {}}
    return body


def swap_actions(alias: str, target: str, current: Sequence[str], *, drop_old: bool) -> list[dict[str, Any]]:
    """The `_aliases` actions that point `alias` at `target` alone, in one atomic step. `current`:
    the concrete indexes it points at now; `drop_old`: they are deleted in the same step (else they
    are kept, out of the alias)."""
    actions: list[dict[str, Any]] = []
    for old in current:
        if old == target:
            continue
        actions.append({"remove_index": {"index": old}} if drop_old else {"remove": {"index": old, "alias": alias}})
    actions.append({"add": {"index": target, "alias": alias}})
    return actions


def _index_body(dim: int, index: dict[str, Any]) -> dict[str, Any]:
    return {
        "settings": {
            "index": index,
            "analysis": {
                # punctuation becomes a word break before tokenizing: the standard tokenizer keeps
                # "title:espresso" or "a.b" as one token, the embedded FTS engine splits them
                "char_filter": {
                    "fleetmem_punct": {
                        "type": "pattern_replace",
                        "pattern": "[^\\p{L}\\p{N}]+",
                        "replacement": " ",
                    },
                },
                "analyzer": {
                    ANALYZER: {
                        "type": "custom",
                        "char_filter": ["fleetmem_punct"],
                        "tokenizer": "standard",
                        "filter": ["lowercase", "asciifolding"],
                    }
                },
            },
        },
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "doc_key": {"type": "keyword"},
                "tenant": {"type": "keyword"},
                "doc_id": {"type": "keyword"},
                "kind": {"type": "keyword"},
                "slug": {"type": "keyword"},
                "visibility": {"type": "keyword"},
                "fact_id": {"type": "keyword"},
                "title": {"type": "text", "analyzer": ANALYZER, "fields": {"raw": {"type": "keyword"}}},
                "text": {"type": "text", "analyzer": ANALYZER},
                "updated_at": {"type": "date"},
                "vector": {
                    "type": "knn_vector",
                    "dimension": dim,
                    "method": {
                        "name": "hnsw",
                        "space_type": "cosinesimil",
                        "engine": "lucene",
                        "parameters": {"m": 16, "ef_construction": 128},
                    },
                },
            },
        },
    }


def filter_clauses(query: SearchQuery) -> list[dict[str, Any]]:
    clauses: list[dict[str, Any]] = [
        {"term": {"tenant": query.tenant}},
        {"terms": {"kind": list(query.kinds)}},
    ]
    if query.world_only:
        clauses.append({"term": {"visibility": "world"}})
    return clauses


#: The most words (an ideograph or kana counts as one, as the standard tokenizer splits them) a
#: keyword query keeps: each word is a clause per field, and OpenSearch refuses a query of more than
#: 1,024 clauses (`too_many_clauses`), which no retry mends. A longer query keeps its first
#: MAX_QUERY_WORDS distinct words (the local arm keeps its first 32 content words).
MAX_QUERY_WORDS = 200
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_QUERY_WORD = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+")


def query_text(text: str) -> str:
    """`text` as the keyword arm asks it: whole while it has at most MAX_QUERY_WORDS words, else its
    first MAX_QUERY_WORDS distinct words, case-folded."""
    words = _QUERY_WORD.findall(text)
    if len(words) <= MAX_QUERY_WORDS:
        return text
    return " ".join(list(dict.fromkeys(w.casefold() for w in words))[:MAX_QUERY_WORDS])


def keyword_body(query: SearchQuery) -> dict[str, Any]:
    # title and text scores summed, title x3 (`most_fields`), as the local FTS5 arm's bm25(3.0, 1.0):
    # with the better of the two (`best_fields`) a name in the title outweighs the content words of
    # the text, and every fact of a named person tied (docs/search-quality.md)
    return {
        "size": query.k,
        "_source": _SOURCE_FIELDS,
        "query": {
            "bool": {
                "must": [
                    {
                        "multi_match": {
                            "query": query_text(query.text),
                            "fields": ["title^3", "text"],
                            "type": "most_fields",
                        }
                    }
                ],
                "filter": filter_clauses(query),
            }
        },
    }


def knn_body(query: SearchQuery, vector: Sequence[float]) -> dict[str, Any]:
    # the filter sits inside the knn clause: an efficient (pre-)filter, not a post-filter that
    # would leave fewer than k hits for small tenants
    return {
        "size": query.k,
        "_source": _SOURCE_FIELDS,
        "query": {
            "knn": {
                "vector": {
                    "vector": [float(x) for x in vector],
                    "k": query.k,
                    "filter": {"bool": {"filter": filter_clauses(query)}},
                }
            }
        },
    }


def msearch_body(query: SearchQuery, vector: Sequence[float] | None) -> list[dict[str, Any]]:
    """Header/body pairs: keyword first, then the vector arm when a vector is given. A query with
    no text keeps the keyword slot, matching nothing, so the answers stay positional. The headers
    are empty: the index is named in the path (`POST /<alias>/_msearch`), the only `_msearch` the
    readers' access policy allows (infra/constructs/search.py)."""
    keyword = keyword_body(query)
    if not query.text.strip():
        keyword = {**keyword, "query": {"bool": {"must_not": [{"match_all": {}}]}}}
    lines: list[dict[str, Any]] = [{}, keyword]
    if vector is not None:
        lines += [{}, knn_body(query, vector)]
    return lines


def doc_source(doc: SearchDoc, *, model_id: str) -> dict[str, Any]:
    src: dict[str, Any] = {
        "doc_key": doc_key(doc.tenant, doc.doc_id),
        "tenant": doc.tenant,
        "doc_id": doc.doc_id,
        "kind": doc.kind,
        "slug": doc.slug,
        "title": doc.title,
        "text": doc.text,
        "visibility": doc.visibility,
        "fact_id": doc.fact_id,
        "updated_at": iso(doc.updated_at),
    }
    # a vector of another model is never stored here: it would be compared with foreign vectors
    if doc.vector is not None and doc.vector_model == model_id:
        src["vector"] = unpack(doc.vector)
    return src


def bulk_body(
    index: str,
    *,
    upserts: Sequence[SearchDoc] = (),
    deletes: Sequence[tuple[str, str]] = (),
    model_id: str,
    found: Mapping[str, Sequence[str]] | None = None,
) -> list[dict[str, Any]]:
    """`index` and `delete` actions for one batch.

    `found is None` (managed domain): `_id` = `doc_key`, so a re-delivery overwrites the same doc.
    Otherwise (serverless) `found` maps each `doc_key` to the `_id`s a lookup returned: an upsert
    re-indexes the first one (or sends no `_id` for a new doc) and deletes the others; a delete
    removes them all. No `_id` the node did not hand out is ever sent."""
    lines: list[dict[str, Any]] = []
    for doc in upserts:
        key = doc_key(doc.tenant, doc.doc_id)
        header: dict[str, Any] = {"_index": index}
        if found is None:
            header["_id"] = domain_id(key)
        else:
            ids = list(found.get(key, ()))
            if ids:
                header["_id"] = ids[0]
            lines += [{"delete": {"_index": index, "_id": extra}} for extra in ids[1:]]
        lines += [{"index": header}, doc_source(doc, model_id=model_id)]
    for tenant, doc_id in deletes:
        key = doc_key(tenant, doc_id)
        for _id in [domain_id(key)] if found is None else found.get(key, ()):
            lines.append({"delete": {"_index": index, "_id": _id}})
    return lines


def lookup_body(keys: Sequence[str]) -> dict[str, Any]:
    """Every doc (duplicates included) whose `doc_key` is one of `keys`."""
    return {
        "size": LOOKUP_MAX,
        "_source": ["doc_key"],
        "track_total_hits": True,
        "query": {"bool": {"filter": [{"terms": {"doc_key": sorted(set(keys))}}]}},
    }


def delete_page_body(tenant: str, slug: str) -> dict[str, Any]:
    """Every chunk doc of one page (a search; its hits are deleted by `_id`)."""
    return {
        "size": LOOKUP_MAX,
        "_source": ["doc_key"],
        "track_total_hits": True,
        "query": {
            "bool": {
                "filter": [
                    {"term": {"tenant": tenant}},
                    {"term": {"kind": "chunk"}},
                    {"term": {"slug": slug}},
                ]
            }
        },
    }


def tenant_docs_body(tenant: str) -> dict[str, Any]:
    """Every document of one tenant (`fleetmem tenant delete`: counted, then deleted)."""
    return {"query": {"bool": {"filter": [{"term": {"tenant": tenant}}]}}}


def refused_keys(
    lines: Sequence[dict[str, Any]], items: Sequence[dict[str, Any]], owner: Mapping[str, str]
) -> set[str]:
    """The `doc_key`s whose `_bulk` actions the node refused (status >= 300; a delete's 404 is
    fine): an `index` action's key is in its source line, a delete's is `owner[_id]`."""
    refused: set[str] = set()
    pos = 0
    for entry in items:
        ((action, result),) = entry.items()
        if action == "index":
            key, pos = str(lines[pos + 1].get("doc_key", "")), pos + 2
        else:
            key, pos = owner.get(str(lines[pos].get("delete", {}).get("_id", "")), ""), pos + 1
        status = int(result.get("status", 500))
        if status >= 300 and not (action == "delete" and status == 404) and key:
            refused.add(key)
    return refused


def parse_lookup(response: dict[str, Any]) -> dict[str, list[str]]:
    """doc_key -> the `_id`s holding it, from a lookup or page search. Raises Unavailable when the
    search matched more than it returned (the batch is retried; the deletes already done stay)."""
    hits = response.get("hits", {})
    rows = hits.get("hits", [])
    total = hits.get("total", {})
    if isinstance(total, dict) and int(total.get("value", 0)) > len(rows):
        raise Unavailable(
            "search index holds more matching documents than one lookup reads",
            retry_after_seconds=2,
            reason="search_error",
        )
    found: dict[str, list[str]] = {}
    for hit in rows:
        found.setdefault(str(hit.get("_source", {}).get("doc_key", "")), []).append(str(hit["_id"]))
    return found


# ---------------------------------------------------------------------------------------------
# response parsing


def parse_hits(response: dict[str, Any], *, vector_arm: bool = False) -> tuple[SearchHit, ...]:
    """Hits in rank order, each doc once: a duplicate (a serverless write race) keeps its best
    rank. The arms filter on one tenant, so `doc_id` identifies the doc."""
    out = []
    seen: set[str] = set()
    for hit in response.get("hits", {}).get("hits", []):
        src = hit.get("_source", {})
        if src.get("doc_id", "") in seen:
            continue
        seen.add(src.get("doc_id", ""))
        score = float(hit.get("_score") or 0.0)
        if vector_arm:
            score = 2.0 * score - 1.0
        out.append(
            SearchHit(
                doc_id=src.get("doc_id", ""),
                kind=src.get("kind", "chunk"),
                slug=src.get("slug", ""),
                title=src.get("title", ""),
                text=src.get("text", ""),
                fact_id=src.get("fact_id"),
                score=score,
            )
        )
    return tuple(out)


def _arm_error(response: dict[str, Any]) -> str | None:
    err = response.get("error")
    if not err:
        return None
    if isinstance(err, dict):
        kind = err.get("type") or (err.get("root_cause") or [{}])[0].get("type") or "error"
    else:
        kind = "error"
    return f"vector search failed ({kind}, status {response.get('status', 'unknown')})"


def missing_index(response: dict[str, Any]) -> bool:
    err = response.get("error")
    return isinstance(err, dict) and err.get("type") == "index_not_found_exception"


def parse_msearch(response: dict[str, Any], *, vector_asked: bool, vector_problem: str | None = None) -> SearchHits:
    """Turn an `_msearch` response into SearchHits. A keyword-arm failure raises Unavailable;
    a vector-arm failure is reported in `vector_error`."""
    responses = response.get("responses", [])
    if not responses:
        raise Unavailable("search returned no responses", reason="search_error")
    kw = responses[0]
    if missing_index(kw):  # nothing indexed yet: an empty brain, not an outage
        return SearchHits(
            keyword=(),
            vector=() if vector_asked and not vector_problem else None,
            vector_error=vector_problem,
        )
    if kw.get("error"):
        raise Unavailable("keyword search failed", retry_after_seconds=2, reason="search_error")
    keyword = parse_hits(kw)
    if vector_problem is not None:
        return SearchHits(keyword=keyword, vector=None, vector_error=vector_problem)
    if not vector_asked:
        return SearchHits(keyword=keyword)
    if len(responses) < 2:
        return SearchHits(keyword=keyword, vector=None, vector_error="vector search returned no response")
    vr = responses[1]
    problem = _arm_error(vr)
    if problem:
        return SearchHits(keyword=keyword, vector=None, vector_error=problem)
    return SearchHits(keyword=keyword, vector=parse_hits(vr, vector_arm=True))


# ---------------------------------------------------------------------------------------------
# the adapter
