"""Deps over each adapter set the delta integrity tests run on: SQLite (an in-memory store, and a
file store for the threaded test) and the AWS set (DynamoDB Local + the OpenSearch engine of
tests/contract/backends_aws.py, the real OpenSearch node). The AWS set needs no Bedrock: the tests use the
HashEmbedder or none, and no LLM.

Clocks on the AWS set must be near the real time: DynamoDB Local runs the cursors table's TTL
(`ttl` = touched_at + 7 days) against the wall clock, so a cursor touched at a fixed date in the
past is deleted by the engine at a random moment.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.ports import Deps

_ROOT = Path(__file__).resolve().parents[3]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

_PREFIXES: dict[str, str] = {}

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("dynamodb-local", id="dynamodb-local", marks=pytest.mark.dynamodb_local),
]


@contextmanager
def open_deps(name: str, request: pytest.FixtureRequest, clock: Any, *, file: bool = False) -> Iterator[Deps]:
    if name == "sqlite":
        stores = open_local(request.getfixturevalue("tmp_path") / "data" if file else ":memory:")
        try:
            yield Deps.over(stores, clock=clock, ids=SortableIds(), llm=None, embedder=None)
        finally:
            stores.close()
        return
    from tests.aws import engines

    from fleetmem.adapters.aws.opensearch import OpenSearchIndex

    endpoint = engines.dynamodb_local_endpoint(request.config)
    # one set of tables per session (as the contract suites do); tests use their own tenants
    prefix = _PREFIXES.setdefault(endpoint, engines.fresh_prefix())
    stores = engines.open_stores(endpoint, prefix)
    search = OpenSearchIndex(
        request.getfixturevalue("opensearch_url"),
        model_id="delta-test-8",
        dim=8,
        prefix="fmd" + uuid.uuid4().hex[:8],
        service="none",
    )
    try:
        yield Deps.over(stores, search=search, clock=clock, ids=SortableIds(), llm=None, embedder=None)
    finally:
        search.client.indices.delete(index=search.index, ignore_unavailable=True)
        search.client.close()
