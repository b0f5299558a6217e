"""AWS backends of the port contract suites: the DynamoDB stores on moto (server mode) and on
DynamoDB Local, and the OpenSearch index on a real single-node OpenSearch 2.19.1 with the k-NN
plugin (assembled from Maven Central by scripts/lib/opensearch.sh). All engines run on 127.0.0.1
and are started by tests/aws/engines.py once per session.

Tables are created once per engine per session; every contract test uses a fresh tenant, so the
tests never see each other's rows.

The "opensearch" backend runs the whole SearchIndex suite, vector arm included (k-NN `lucene`
engine, no native library needed); "opensearch-serverless" runs it again on the same node with the
adapter in its `serverless` flavour, through tests/aws/serverless.py's transport (no custom `_id`,
no `_delete_by_query`, or the test fails). With OPENSEARCH_URL set, the "opensearch-live" backend runs it
once more against that endpoint (a domain or collection of yours).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from tests.aws import engines
from tests.contract.backends import register_backend

DDB_PORTS = {"facts", "pages", "cursors", "clients", "idempotency", "audit"}
#: the model the contract suites' search docs claim their vectors come from (builders.unit, dim 8)
SEARCH_MODEL_ID = "contract-test-8"
SEARCH_DIM = 8
EVICTION_LIMIT = 5

_prefixes: dict[str, str] = {}


def _prefix(engine: str) -> str:
    return _prefixes.setdefault(engine, engines.fresh_prefix())


class _Stores:
    def __init__(self, stores: Any) -> None:
        self._stores = stores
        self.sessions_per_client = EVICTION_LIMIT

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stores, name)


def _ddb(engine: str):
    @contextmanager
    def factory(request: pytest.FixtureRequest) -> Iterator[Any]:
        if engine == "moto":
            endpoint = engines.moto_endpoint(request.config)
        else:
            endpoint = engines.dynamodb_local_endpoint(request.config)
        stores = engines.open_stores(endpoint, _prefix(engine))
        stores.cursors.max_sessions = EVICTION_LIMIT
        yield _Stores(stores)

    return factory


class _Search:
    """An OpenSearchIndex plus `settle()` (refresh) for the suites."""

    def __init__(self, url: str, *, vector_search: bool, service: str = "none", serverless: bool = False) -> None:
        from tests.aws.serverless import serverless_index

        from fleetmem.adapters.aws.opensearch import OpenSearchIndex

        kw: dict[str, Any] = {"model_id": SEARCH_MODEL_ID, "dim": SEARCH_DIM, "prefix": "fmc" + uuid.uuid4().hex[:8]}
        if serverless:
            self.search = serverless_index(url, **kw)[0]
        else:
            self.search = OpenSearchIndex(url, service=service, **kw)
        self.vector_search = vector_search

    def settle(self) -> None:
        self.search.ensure_index()
        self.search.client.indices.refresh(index=self.search.index)

    def close(self) -> None:
        try:
            self.search.client.indices.delete(index=self.search.index, ignore_unavailable=True)
        finally:
            self.search.client.close()


def _opensearch(serverless: bool):
    @contextmanager
    def factory(request: pytest.FixtureRequest) -> Iterator[Any]:
        s = _Search(engines.opensearch_endpoint(request.config), vector_search=True, serverless=serverless)
        try:
            yield s
        finally:
            s.close()

    return factory


@contextmanager
def _live(request: pytest.FixtureRequest) -> Iterator[Any]:
    url = os.environ["OPENSEARCH_URL"]
    s = _Search(url, vector_search=True, service=os.environ.get("OPENSEARCH_SERVICE", "none"))
    try:
        yield s
    finally:
        s.close()


register_backend("moto", _ddb("moto"), ports=DDB_PORTS)
register_backend("dynamodb-local", _ddb("dynamodb-local"), ports=DDB_PORTS, marks=(pytest.mark.dynamodb_local,))
register_backend("opensearch", _opensearch(serverless=False), ports={"search"})
register_backend("opensearch-serverless", _opensearch(serverless=True), ports={"search"})
if os.environ.get("OPENSEARCH_URL"):
    # registered only with an endpoint; tests/aws/test_live_opensearch.py reports the skip once
    register_backend("opensearch-live", _live, ports={"search"}, marks=(pytest.mark.live_opensearch,))
