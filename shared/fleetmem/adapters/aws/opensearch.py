"""SearchIndex on OpenSearch (managed domain or Serverless) through opensearch-py.

- One index per embedding model: `<prefix>-docs-<model>-<dim>-v<N>`, so vectors of different
  models are never compared and a model change is a new index plus a re-index.
- Keyword (`multi_match`, BM25) and vector (`knn` with an efficient tenant/visibility/kind filter)
  go out in ONE `_msearch`; the domain fuses the two arms with RRF. A failing vector arm becomes
  `SearchHits.vector_error`, the keyword arm is kept.
- Writes come from the stream indexer, not the request path: `write_through = False` (D11).
- Every request body is built by a pure function (checked as golden JSON in tests/aws/golden/).

Vector scores: the lucene engine reports cosinesimil as `(1 + cos) / 2`; hits are converted back
to cosine so the domain's thresholds (e.g. high_vector_match ≥ 0.80) mean the same on every backend.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from fleetmem.errors import PortError, Unavailable
from fleetmem.memory.vectors import unpack
from fleetmem.models import SearchDoc, SearchHit, SearchHits, SearchQuery
from fleetmem.timefmt import iso

INDEX_VERSION = 1
ANALYZER = "fleetmem_text"
_SOURCE_FIELDS = ["tenant", "doc_id", "kind", "slug", "title", "text", "visibility", "fact_id", "updated_at"]


def model_slug(model_id: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", model_id.lower()).strip("-") or "none"


def index_name(prefix: str, model_id: str, dim: int, version: int = INDEX_VERSION) -> str:
    return f"{prefix}-docs-{model_slug(model_id)}-{dim}-v{version}"


def os_doc_id(tenant: str, doc_id: str) -> str:
    """Document `_id`: doc ids repeat across tenants, so the tenant is part of it."""
    return f"{tenant}|{doc_id}"


# ---------------------------------------------------------------------------------------------
# pure request builders


def index_body(dim: int) -> dict[str, Any]:
    """Settings + mapping of the docs index (HNSW, cosine, lucene engine)."""
    return {
        "settings": {
            "index": {"knn": True, "number_of_shards": 1},
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


def keyword_body(query: SearchQuery) -> dict[str, Any]:
    # title and text scores summed, title x3 (`most_fields`), as the local FTS5 arm's bm25(3.0, 1.0):
    # with the better of the two (`best_fields`) a name in the title outweighs the content words of
    # the text, and every fact of a named person tied (README, "Search quality")
    return {
        "size": query.k,
        "_source": _SOURCE_FIELDS,
        "query": {
            "bool": {
                "must": [
                    {
                        "multi_match": {
                            "query": query.text,
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


def msearch_body(index: str, query: SearchQuery, vector: Sequence[float] | None) -> list[dict[str, Any]]:
    """Header/body pairs: keyword first, then the vector arm when a vector is given."""
    lines: list[dict[str, Any]] = [{"index": index}, keyword_body(query)]
    if vector is not None:
        lines += [{"index": index}, knn_body(query, vector)]
    return lines


def doc_source(doc: SearchDoc, *, model_id: str) -> dict[str, Any]:
    src: dict[str, Any] = {
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
    index: str, *, upserts: Sequence[SearchDoc] = (), deletes: Sequence[tuple[str, str]] = (), model_id: str
) -> list[dict[str, Any]]:
    """`index` actions (idempotent: same `_id` on re-delivery) and `delete` actions."""
    lines: list[dict[str, Any]] = []
    for doc in upserts:
        lines += [
            {"index": {"_index": index, "_id": os_doc_id(doc.tenant, doc.doc_id)}},
            doc_source(doc, model_id=model_id),
        ]
    for tenant, doc_id in deletes:
        lines.append({"delete": {"_index": index, "_id": os_doc_id(tenant, doc_id)}})
    return lines


def delete_page_body(tenant: str, slug: str) -> dict[str, Any]:
    return {
        "query": {
            "bool": {
                "filter": [
                    {"term": {"tenant": tenant}},
                    {"term": {"kind": "chunk"}},
                    {"term": {"slug": slug}},
                ]
            }
        }
    }


# ---------------------------------------------------------------------------------------------
# response parsing


def parse_hits(response: dict[str, Any], *, vector_arm: bool = False) -> tuple[SearchHit, ...]:
    out = []
    for hit in response.get("hits", {}).get("hits", []):
        src = hit.get("_source", {})
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


def _missing_index(response: dict[str, Any]) -> bool:
    err = response.get("error")
    return isinstance(err, dict) and err.get("type") == "index_not_found_exception"


def parse_msearch(
    response: dict[str, Any], *, vector_asked: bool, vector_problem: str | None = None
) -> SearchHits:
    """Turn an `_msearch` response into SearchHits. A keyword-arm failure raises Unavailable;
    a vector-arm failure is reported in `vector_error`."""
    responses = response.get("responses", [])
    if not responses:
        raise Unavailable("search returned no responses", reason="search_error")
    kw = responses[0]
    if _missing_index(kw):  # nothing indexed yet: an empty brain, not an outage
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


def build_client(endpoint: str, *, service: str = "es", region: str = "", session: Any = None) -> Any:
    """An opensearch-py client. `service` is "es" (managed domain) or "aoss" (Serverless), both
    SigV4-signed with the boto3 credential chain; "none" talks to an unsigned endpoint (a local
    engine)."""
    from opensearchpy import AWSV4SignerAuth, OpenSearch, RequestsHttpConnection

    kw: dict[str, Any] = {"hosts": [endpoint], "timeout": 10, "max_retries": 2, "retry_on_timeout": True}
    if service in {"es", "aoss"}:
        import boto3

        sess = session or boto3.session.Session(region_name=region or None)
        creds = sess.get_credentials()
        kw["http_auth"] = AWSV4SignerAuth(creds, region or sess.region_name, service)
        kw["connection_class"] = RequestsHttpConnection
        kw["use_ssl"] = endpoint.startswith("https")
        kw["verify_certs"] = True
    return OpenSearch(**kw)


class OpenSearchIndex:
    """SearchIndex over one versioned index. The client is built lazily (or injected)."""

    write_through = False

    def __init__(
        self,
        endpoint: str,
        *,
        model_id: str,
        dim: int,
        prefix: str = "fleetmem",
        service: str = "es",
        region: str = "",
        client: Any = None,
        session: Any = None,
        refresh: bool = False,
        write_through: bool = False,
    ) -> None:
        self.endpoint = endpoint
        self.model_id = model_id
        self.dim = dim
        self.service = service
        self.index = index_name(prefix, model_id, dim)
        self._region = region
        self._session = session
        self._client = client
        self._ready = False
        # Serverless has no explicit refresh; a managed domain refreshes on its interval anyway.
        self._refresh = (refresh or write_through) and service != "aoss"
        # Without a stream indexer (local engines) the domain indexes synchronously instead.
        self.write_through = write_through

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = build_client(
                self.endpoint, service=self.service, region=self._region, session=self._session
            )
        return self._client

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from opensearchpy.exceptions import ConnectionError as OsConnectionError
        from opensearchpy.exceptions import OpenSearchException, TransportError

        try:
            return fn(*args, **kwargs)
        except PortError:
            raise
        except OsConnectionError:
            raise Unavailable(
                "search index cannot be reached", retry_after_seconds=5, reason="connection"
            ) from None
        except TransportError as exc:
            status = exc.status_code if isinstance(exc.status_code, int) else 0
            if status == 429:
                raise Unavailable(
                    "search index is throttling requests", retry_after_seconds=2, reason="throttled"
                ) from None
            raise Unavailable(
                f"search index request failed (status {status or 'unknown'})",
                retry_after_seconds=5 if status >= 500 else None,
                reason="search_error",
            ) from None
        except OpenSearchException:
            raise Unavailable("search index request failed", reason="search_error") from None

    def ensure_index(self) -> None:
        """Create the index when missing (idempotent; once per process)."""
        if self._ready:
            return
        from opensearchpy.exceptions import RequestError

        if not self._call(self.client.indices.exists, index=self.index):
            try:
                self._call(self.client.indices.create, index=self.index, body=index_body(self.dim))
            except Unavailable:
                if not self._call(self.client.indices.exists, index=self.index):  # lost a creation race?
                    raise
            except RequestError:  # pragma: no cover - translated by _call
                pass
        self._ready = True

    def _bulk(self, lines: list[dict[str, Any]]) -> None:
        if not lines:
            return
        self.ensure_index()
        kw: dict[str, Any] = {"body": lines}
        if self._refresh:
            kw["refresh"] = "wait_for"
        out = self._call(self.client.bulk, **kw)
        if out.get("errors"):
            for entry in out.get("items", []):
                ((action, result),) = entry.items()
                status = int(result.get("status", 500))
                if status >= 300 and not (action == "delete" and status == 404):
                    raise Unavailable(
                        f"search index rejected a {action} (status {status})",
                        retry_after_seconds=2 if status in (429, 503) else None,
                        reason="search_error",
                    )

    def upsert(self, docs: Sequence[SearchDoc]) -> None:
        self._bulk(bulk_body(self.index, upserts=docs, model_id=self.model_id))

    def delete(self, tenant: str, doc_ids: Sequence[str]) -> None:
        self._bulk(bulk_body(self.index, deletes=[(tenant, d) for d in doc_ids], model_id=self.model_id))

    def delete_page(self, tenant: str, slug: str) -> None:
        from opensearchpy.exceptions import NotFoundError

        kw: dict[str, Any] = {"index": self.index, "body": delete_page_body(tenant, slug)}
        if self._refresh:
            kw["refresh"] = True
        try:
            self.client.delete_by_query(**kw)
        except NotFoundError:
            return  # no index yet: nothing to delete
        except Exception as exc:
            self._call(_raise, exc)

    def search(self, query: SearchQuery) -> SearchHits:
        vector: list[float] | None = None
        problem: str | None = None
        if query.vector is not None:
            if query.vector_model and query.vector_model != self.model_id:
                problem = "query vector comes from a different model than the index"
            else:
                vector = unpack(query.vector)
                if len(vector) != self.dim:
                    problem, vector = "query vector has the wrong dimension for the index", None
        if not query.text.strip() and vector is None:
            return SearchHits(keyword=(), vector=None, vector_error=problem)
        body = msearch_body(self.index, query, vector)
        if not query.text.strip():
            # vector only: keep the keyword slot with an empty match so the parser stays positional
            body[1] = {**body[1], "query": {"bool": {"must_not": [{"match_all": {}}]}}}
        out = self._call(self.client.msearch, body=body)
        return parse_msearch(out, vector_asked=query.vector is not None, vector_problem=problem)


def _raise(exc: BaseException) -> None:
    raise exc
