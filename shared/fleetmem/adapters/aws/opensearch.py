"""SearchIndex on OpenSearch (managed domain or Serverless) through opensearch-py.

- One index per embedding model: `<prefix>-docs-<model>-<dim>-v<N>`, so vectors of different
  models are never compared and a model change is a new index plus a re-index. Functions read and
  write through the alias `<that name>-live` (`alias_name`), which points at one concrete index:
  the first write creates `<prefix>-docs-<model>-<dim>-v<N>` with the alias on it (an index of
  that name created before aliases gets the alias added: adopted, data kept). `fleetmem admin
  reindex` (adapters/aws/reindex.py) fills a new concrete index `<that name>-<UTC stamp>` and
  moves the alias in one `_aliases` call (`swap_alias`), so searches never see a half-built index.
- Index replicas come from `FLEETMEM_OPENSEARCH_REPLICAS` (0 by default: a one-node domain has
  nowhere to put a replica and would stay yellow).
- Keyword (`multi_match`, BM25) and vector (`knn` with an efficient tenant/visibility/kind filter)
  go out in ONE `_msearch`; the domain fuses the two arms with RRF. A failing vector arm becomes
  `SearchHits.vector_error`, the keyword arm is kept.
- Writes come from the stream indexer, not the request path: `write_through = False` (D11).
- A query on the request path gets one attempt of `SEARCH_TIMEOUT_S` (adapters/aws/deadlines.py)
  and a `SearchBreaker`: a paused or unreachable node costs a recall 3 s, then nothing while the
  breaker is open, and the caller gets `unavailable` + Retry-After instead of a function timeout.
- Every document carries `doc_key` (`tenant|doc_id`, a keyword). Two flavours write differently:
  `domain` (a managed domain) uses `doc_key` as the document `_id` (`domain_id`: its SHA-256 when
  the key is over OpenSearch's 512-byte `_id` limit, as a 200-character slug in a multibyte
  script can make it), so a re-delivered write overwrites in one `_bulk`; `serverless` (a
  VECTORSEARCH collection, which generates every `_id` and has no `_delete_by_query`) first looks
  the batch's keys up (one terms search), then
  re-indexes with the `_id` it found, or without one for a new doc, and deletes by found `_id`.
  Duplicates a race leaves there (two deliveries that both found nothing) are folded on the next
  lookup of that key, and search answers carry each doc once. Page deletes on both flavours find
  the page's docs by query and delete them by `_id`.
- Every request body is built by a pure function in `opensearch_bodies` (checked as golden JSON in
  tests/aws/golden/).

Vector scores: the lucene engine reports cosinesimil as `(1 + cos) / 2`; hits are converted back
to cosine so the domain's thresholds (e.g. high_vector_match ≥ 0.80) mean the same on every backend.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from fleetmem.adapters.aws.opensearch_bodies import (
    FLAVOURS,
    LOOKUP_MAX,
    alias_name,
    bulk_body,
    delete_page_body,
    doc_key,
    domain_id,
    index_body,
    index_name,
    lookup_body,
    missing_index,
    msearch_body,
    parse_lookup,
    parse_msearch,
    refused_keys,
    swap_actions,
    tenant_docs_body,
)
from fleetmem.adapters.aws.opensearch_client import SearchBreaker, build_client
from fleetmem.errors import PortError, Unavailable
from fleetmem.memory.indexing import chunk_prefix
from fleetmem.memory.vectors import unpack
from fleetmem.models import SearchDoc, SearchHits, SearchQuery, page_docs_problem

#: the attribute each client of an index is kept in -> its purpose (`sdk_clients.SDK_CLIENTS`)
_CLIENT_PURPOSES = {"_client": "index", "_search_client": "search"}


class OpenSearchIndex:
    """SearchIndex over one versioned index. The clients are built lazily (or one is injected):
    writes (the stream indexer) use the patient one, queries on the request path one with a
    `SEARCH_TIMEOUT_S` deadline and no retry, behind a `SearchBreaker`."""

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
        flavour: str = "",
        replicas: int = 0,
        target: str = "",
    ) -> None:
        """`target`: write to this concrete index instead of the alias (a rebuild's new index,
        created by the caller); `replicas`: index replicas when this process creates the index."""
        flavour = flavour or ("serverless" if service == "aoss" else "domain")
        if flavour not in FLAVOURS:
            raise ValueError(f"unknown OpenSearch flavour {flavour!r}: use one of {', '.join(FLAVOURS)}")
        self.flavour = flavour
        self.endpoint = endpoint
        self.model_id = model_id
        self.dim = dim
        self.service = service
        #: the first concrete index of this model (`target`: the index this instance writes to)
        self.index = target or index_name(prefix, model_id, dim)
        #: what every read and write names: the alias (or `target`)
        self.alias = target or alias_name(prefix, model_id, dim)
        self.replicas = replicas
        #: every docs index of this prefix, whatever its model (tenant deletion reaches them all)
        self.indexes = f"{prefix}-docs-*"
        self._region = region
        self._session = session
        self._client = client
        self._search_client = client
        self.breaker = SearchBreaker()
        self._ready = bool(target)
        self._no_alias_until = 0.0  # until then, searches name the first index (no alias yet)
        # Serverless has no explicit refresh; a managed domain refreshes on its interval anyway.
        self._refresh = (refresh or write_through) and flavour == "domain"
        # doc_key -> `_id`s this process wrote, which a search may not see yet (a write becomes
        # searchable only at the next refresh); merged into every serverless lookup and every page
        # delete, so a delete right after an insert still finds it
        self._written: dict[str, set[str]] = {}
        self._owner: dict[str, str] = {}  # `_id` -> doc_key of the same writes
        # Without a stream indexer (local engines) the domain indexes synchronously instead.
        self.write_through = write_through

    def health_problem(self) -> str | None:
        """`SearchHealth`: why this process's searches fail fast now (the breaker is open), or None."""
        left = self.breaker.open_for()
        if left <= 0:
            return None
        return (
            f"the search index is not answering, so searches fail fast for {math.ceil(left)} more second(s) "
            "(circuit open); facts and pages are read from DynamoDB as usual"
        )

    @property
    def client(self) -> Any:
        return self._built("_client")

    @property
    def search_client(self) -> Any:
        """The request path's client: one attempt of at most `SEARCH_TIMEOUT_S` seconds."""
        return self._built("_search_client")

    def _built(self, attr: str) -> Any:
        """The client kept in `attr`: one given to the constructor, else built on first use with the
        SDK client policy of its purpose (`_CLIENT_PURPOSES`)."""
        if getattr(self, attr) is None:
            built = build_client(
                self.endpoint,
                service=self.service,
                region=self._region,
                session=self._session,
                purpose=_CLIENT_PURPOSES[attr],
            )
            setattr(self, attr, built)
        return getattr(self, attr)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from opensearchpy.exceptions import ConnectionError as OsConnectionError
        from opensearchpy.exceptions import ConnectionTimeout, OpenSearchException, TransportError

        try:
            return fn(*args, **kwargs)
        except PortError:
            raise
        except ConnectionTimeout:
            raise Unavailable("search index did not answer in time", retry_after_seconds=5, reason="timeout") from None
        except OsConnectionError:
            raise Unavailable("search index cannot be reached", retry_after_seconds=5, reason="connection") from None
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
        """Make sure the alias exists (idempotent; once per process): create the first concrete
        index with the alias on it in one request, or (an index of that name created before
        aliases) add the alias to it."""
        if self._ready:
            return
        if not self._call(self.client.indices.exists, index=self.alias):
            if self._call(self.client.indices.exists, index=self.index):
                self._call(self.client.indices.put_alias, index=self.index, name=self.alias)  # adopted
            else:
                try:
                    self.create_index(self.index, alias=self.alias)
                except Unavailable:
                    if not self._call(self.client.indices.exists, index=self.alias):  # lost a creation race?
                        raise
        self._ready = True

    def create_index(self, name: str, *, alias: str | None = None) -> None:
        """Create the concrete docs index `name` (behind `alias` when given)."""
        replicas = None if self.flavour == "serverless" else self.replicas
        self._call(self.client.indices.create, index=name, body=index_body(self.dim, replicas=replicas, alias=alias))

    def _msearch(self, body: list[dict[str, Any]]) -> Any:
        """`POST /<alias>/_msearch` (the index in the path, never `/_msearch` at the domain's
        root: readers may call only their index's endpoints). A stage whose index predates aliases
        has none until its indexer's next write adds it (the read path may not): until then the
        first index answers, and the alias is looked for again at most once a minute."""
        legacy = self.alias != self.index and time.monotonic() < self._no_alias_until
        out = self._call(self.search_client.msearch, index=self.index if legacy else self.alias, body=body)
        if legacy or self.alias == self.index or not missing_index((out.get("responses") or [{}])[0]):
            return out
        self._no_alias_until = time.monotonic() + 60
        return self._call(self.search_client.msearch, index=self.index, body=body)

    def alias_targets(self) -> list[str]:
        """The concrete indexes the alias points at ([] when it does not exist)."""
        if not self._call(self.client.indices.exists_alias, name=self.alias):
            return []
        return sorted(self._call(self.client.indices.get_alias, name=self.alias))

    def swap_alias(self, target: str, *, drop_old: bool = False) -> list[str]:
        """Point the alias at `target` alone, atomically; returns the concrete indexes it left
        (deleted with `drop_old`, else kept out of the alias)."""
        current = self.alias_targets()
        actions = swap_actions(self.alias, target, current, drop_old=drop_old)
        self._call(self.client.indices.update_aliases, body={"actions": actions})
        return [c for c in current if c != target]

    def _send(self, lines: list[dict[str, Any]], *, create: bool = True) -> dict[str, Any]:
        """One `_bulk` call; `create=False` for deletes naming their own existing index."""
        if create:
            self.ensure_index()
        # `POST /<alias>/_bulk`: the indexer's policy allows `_bulk` under the docs indices only;
        # an action naming its own `_index` (a concrete index of the prefix) still goes there.
        kw: dict[str, Any] = {"index": self.alias, "body": lines}
        if self._refresh:
            kw["refresh"] = "true"  # visible to the next request now, not at the next interval
        out: dict[str, Any] = self._call(self.client.bulk, **kw)
        self._remember(lines, out.get("items", []))
        return out

    def _bulk(self, lines: list[dict[str, Any]], *, create: bool = True) -> None:
        """Send `_bulk` actions; raises Unavailable on the first action the node refused."""
        if not lines:
            return
        out = self._send(lines, create=create)
        items = out.get("items", [])
        if out.get("errors"):
            for entry in items:
                ((action, result),) = entry.items()
                status = int(result.get("status", 500))
                if status >= 300 and not (action == "delete" and status == 404):
                    raise Unavailable(
                        f"search index rejected a {action} (status {status})",
                        retry_after_seconds=2 if status in (429, 503) else None,
                        reason="search_error",
                    )

    def _remember(self, lines: list[dict[str, Any]], items: list[dict[str, Any]]) -> None:
        """Track the `_id`s the node gave this process's writes; forget the deleted ones."""
        if len(self._owner) > LOOKUP_MAX:
            self._written.clear()  # bounded; entries that old are searchable by now
            self._owner.clear()
        pos = 0
        for entry in items:
            ((action, result),) = entry.items()
            _id = str(result.get("_id", ""))
            if action == "index":
                key, pos = str(lines[pos + 1].get("doc_key", "")), pos + 2
                if int(result.get("status", 500)) < 300:
                    self._written.setdefault(key, set()).add(_id)
                    self._owner[_id] = key
            else:
                pos += 1
                self._written.get(self._owner.pop(_id, ""), set()).discard(_id)

    def _lookup(self, keys: Sequence[str]) -> dict[str, list[str]] | None:
        """Serverless: doc_key -> `_id`s for `keys` (None on a managed domain: `_id` is the key)."""
        if self.flavour == "domain":
            return None
        if not keys:
            return {}
        found = self._find(lookup_body(keys))
        for key in keys:
            extra = self._written.get(key, set()) - set(found.get(key, ()))
            if extra:
                found[key] = [*found.get(key, ()), *sorted(extra)]
        return found

    def _find(self, body: dict[str, Any]) -> dict[str, list[str]]:
        self.ensure_index()
        return parse_lookup(self._call(self.client.search, index=self.alias, body=body))

    def upsert(self, docs: Sequence[SearchDoc]) -> None:
        found = self._lookup([doc_key(d.tenant, d.doc_id) for d in docs])
        self._bulk(bulk_body(self.alias, upserts=docs, model_id=self.model_id, found=found))

    def delete(self, tenant: str, doc_ids: Sequence[str]) -> None:
        found = self._lookup([doc_key(tenant, d) for d in doc_ids])
        deletes = [(tenant, d) for d in doc_ids]
        self._bulk(bulk_body(self.alias, deletes=deletes, model_id=self.model_id, found=found))

    def write(self, upserts: Sequence[SearchDoc], deletes: Sequence[tuple[str, str]]) -> set[str]:
        """Upserts and deletes (tenant, doc_id) of many tenants in ONE `_bulk` (the stream
        indexer's batch; each document named once). Returns the `doc_key`s of the actions the
        node refused (a delete of a missing doc is not refused); raises Unavailable when the call
        itself fails."""
        keys = [doc_key(d.tenant, d.doc_id) for d in upserts] + [doc_key(t, d) for t, d in deletes]
        found = self._lookup(keys)
        lines = bulk_body(self.alias, upserts=upserts, deletes=deletes, model_id=self.model_id, found=found)
        if not lines:
            return set()
        out = self._send(lines)
        if not out.get("errors"):
            return set()
        owner = {domain_id(k): k for k in keys} if found is None else {i: k for k, ids in found.items() for i in ids}
        return refused_keys(lines, out.get("items", []), owner)

    def delete_page(self, tenant: str, slug: str) -> None:
        self.replace_page(tenant, slug, ())

    def replace_page(self, tenant: str, slug: str, docs: Sequence[SearchDoc]) -> None:
        """Write the new chunks, then find the page's other chunk docs and delete them by `_id`.
        The index has no transactions, so that order keeps the page findable throughout (no
        `_delete_by_query`: Serverless has none, and one path serves both flavours)."""
        problem = page_docs_problem(tenant, slug, docs)
        if problem:
            raise ValueError(problem)
        if docs:
            self.upsert(docs)
        keep = {doc_key(tenant, d.doc_id) for d in docs}
        found = self._find(delete_page_body(tenant, slug))
        prefix = doc_key(tenant, chunk_prefix(slug))
        for key, ids in self._written.items():
            if key.startswith(prefix) and ids:
                found.setdefault(key, []).extend(sorted(ids - set(found.get(key, ()))))
        stale = [_id for key, ids in found.items() if key not in keep for _id in ids]
        self._bulk([{"delete": {"_index": self.alias, "_id": _id}} for _id in stale])

    # -- deleting a tenant (fleetmem tenant delete --backend aws) --------------------------------

    def tenant_doc_count(self, tenant: str) -> int:
        """The tenant's documents in every docs index of the prefix (0 when there is none)."""
        body = {**tenant_docs_body(tenant), "size": 0, "track_total_hits": True}
        out = self._call(self.client.search, index=self.indexes, body=body, allow_no_indices=True)
        total = out.get("hits", {}).get("total", {})
        return int(total.get("value", 0) if isinstance(total, dict) else total or 0)

    def delete_tenant(self, tenant: str) -> int:
        """Delete the tenant's documents from every docs index of the prefix; returns how many.
        A managed domain runs one `_delete_by_query` and refreshes; Serverless (which has none)
        finds them by the same query and deletes them by `_id`, until a search finds no other."""
        if self.flavour == "domain":
            out = self._call(
                self.client.delete_by_query,
                index=self.indexes,
                body=tenant_docs_body(tenant),
                conflicts="proceed",
                refresh=True,
                allow_no_indices=True,
            )
            return int(out.get("deleted", 0))
        done: set[tuple[str, str]] = set()
        while True:
            body = {**tenant_docs_body(tenant), "size": LOOKUP_MAX, "_source": False}
            out = self._call(self.client.search, index=self.indexes, body=body, allow_no_indices=True)
            found = [(str(h["_index"]), str(h["_id"])) for h in out.get("hits", {}).get("hits", [])]
            fresh = [hit for hit in found if hit not in done]
            if not fresh:  # deleted documents stay visible until the collection refreshes
                return len(done)
            self._bulk([{"delete": {"_index": index, "_id": _id}} for index, _id in fresh], create=False)
            done.update(fresh)

    def search(self, query: SearchQuery) -> SearchHits:
        return self.search_many([query])[0]

    def search_many(self, queries: Sequence[SearchQuery]) -> list[SearchHits]:
        """Both arms of every query in ONE `_msearch` (keyword, then k-NN when the query has a
        usable vector); the answers are split back per query. A query with neither text nor a
        usable vector is answered without a request."""
        asked = [self._vector_of(q) for q in queries]
        body: list[dict[str, Any]] = []
        spans: list[tuple[int, int] | None] = []  # each query's answers: (first, count)
        for query, (vector, _) in zip(queries, asked, strict=True):
            if not query.text.strip() and vector is None:
                spans.append(None)
                continue
            lines = msearch_body(query, vector)
            spans.append((len(body) // 2, len(lines) // 2))
            body += lines
        answers: list[dict[str, Any]] = []
        if body:
            self.breaker.check()
            try:
                out = self._msearch(body)
            except Unavailable as exc:
                self.breaker.record(exc)
                raise
            self.breaker.record(None)
            answers = out.get("responses", [])
        found = []
        for query, (_, problem), span in zip(queries, asked, spans, strict=True):
            if span is None:
                found.append(SearchHits(keyword=(), vector=None, vector_error=problem))
                continue
            first, count = span
            found.append(
                parse_msearch(
                    {"responses": answers[first : first + count]},
                    vector_asked=query.vector is not None,
                    vector_problem=problem,
                )
            )
        return found

    def _vector_of(self, query: SearchQuery) -> tuple[list[float] | None, str | None]:
        """The query's vector when this index can compare it, else None and why (None when no
        vector was given)."""
        if query.vector is None:
            return None, None
        if query.vector_model and query.vector_model != self.model_id:
            return None, "query vector comes from a different model than the index"
        vector = unpack(query.vector)
        if len(vector) != self.dim:
            return None, "query vector has the wrong dimension for the index"
        return vector, None
