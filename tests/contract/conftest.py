"""Fixtures of the port contract suites: one parametrized fixture per port over the registered backends."""

from __future__ import annotations

import dataclasses
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))  # `tests.contract.backends` must be one module for every importer

from tests.contract.backends import backend, backends_for  # noqa: E402
from tests.unit.domain.delta_backends import BACKENDS, open_deps  # noqa: E402

NOW = datetime(2026, 6, 11, 9, 30, 0, tzinfo=UTC)


def _open(request: pytest.FixtureRequest) -> Iterator[Any]:
    with backend(request.param).factory(request) as obj:
        yield obj


@pytest.fixture(params=backends_for("facts"))
def facts_backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from _open(request)


@pytest.fixture(params=backends_for("pages"))
def pages_backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from _open(request)


@pytest.fixture(params=backends_for("cursors"))
def cursors_backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from _open(request)


@pytest.fixture(params=backends_for("clients"))
def clients_backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from _open(request)


@pytest.fixture(params=backends_for("idempotency"))
def idempotency_backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from _open(request)


@pytest.fixture(params=backends_for("audit"))
def audit_backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from _open(request)


@pytest.fixture(params=backends_for("search"))
def search_backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    yield from _open(request)


@pytest.fixture
def facts(facts_backend: Any) -> Any:
    return facts_backend.facts


@pytest.fixture
def pages(pages_backend: Any) -> Any:
    return pages_backend.pages


@pytest.fixture
def cursors(cursors_backend: Any) -> Any:
    return cursors_backend.cursors


@pytest.fixture
def clients(clients_backend: Any) -> Any:
    return clients_backend.clients


@pytest.fixture
def idempotency(idempotency_backend: Any) -> Any:
    return idempotency_backend.idempotency


@pytest.fixture
def audit(audit_backend: Any) -> Any:
    return audit_backend.audit


@pytest.fixture
def search(search_backend: Any) -> Any:
    return search_backend.search


@pytest.fixture
def settle(search_backend: Any) -> Callable[[], None]:
    """Make preceding index writes visible (a no-op for write-through backends)."""
    return getattr(search_backend, "settle", lambda: None)


@pytest.fixture
def tenant() -> str:
    """A fresh tenant per test, so backends shared across a session never see each other's rows."""
    return "t-" + uuid.uuid4().hex[:12]


@pytest.fixture
def other_tenant() -> str:
    return "u-" + uuid.uuid4().hex[:12]


@pytest.fixture
def now() -> datetime:
    return NOW


@pytest.fixture
def fact_decisions(facts_backend: Any) -> Any:
    return facts_backend.fact_decisions


@pytest.fixture
def fact_feed(facts_backend: Any) -> Any:
    return facts_backend.fact_feed


@pytest.fixture
def fact_listing(facts_backend: Any) -> Any:
    return facts_backend.fact_listing


@pytest.fixture
def page_feed(pages_backend: Any) -> Any:
    return pages_backend.page_feed


@pytest.fixture
def page_listing(pages_backend: Any) -> Any:
    return pages_backend.page_listing


# ------------------------------------------------------------------------------------------------
# `bdeps`: whole Deps on each backend of tests/unit/domain/delta_backends.py, for the suites that run
# verbs end to end. A module changes what it needs by overriding `bdeps_clock` or `bdeps_swap`.


@pytest.fixture
def bdeps_clock() -> Any:
    from fleetmem.adapters.local.clock import FixedClock
    from fleetmem.timefmt import to_ms

    return FixedClock(to_ms(datetime.now(UTC)))  # DynamoDB Local runs TTLs on the wall clock


@pytest.fixture
def bdeps_swap() -> dict[str, Any]:
    """Deps fields replaced on every backend (default: the 8-dimension hash embedder)."""
    from fleetmem.adapters.local.hash_embedder import HashEmbedder

    return {"embedder": HashEmbedder(dim=8)}


@pytest.fixture(params=BACKENDS)
def bdeps(request: pytest.FixtureRequest, bdeps_clock: Any, bdeps_swap: dict[str, Any]) -> Iterator[Any]:
    """Deps with a fresh tenant per test (`test_tenant`; the tables are shared) and `backend`."""
    with open_deps(request.param, request, bdeps_clock) as d:
        d = dataclasses.replace(d, **bdeps_swap) if bdeps_swap else d
        d.test_tenant = "t-" + uuid.uuid4().hex[:12]
        d.backend = request.param
        yield d


# `brain`: one Deps per module on each backend (SQLite in memory; DynamoDB Local with the OpenSearch
# node), fixed at NOW, for suites that seed a brain once and read it in many tests (each test uses
# its own tenant). A module overrides `brain_embedder` (both backends) or `brain_local_embedder`
# (SQLite's alone).


@pytest.fixture(scope="module")
def brain_embedder() -> Any:
    from fleetmem.adapters.local.hash_embedder import HashEmbedder

    return HashEmbedder(dim=64)


@pytest.fixture(scope="module")
def brain_local_embedder(brain_embedder: Any) -> Any:
    return brain_embedder


@pytest.fixture(scope="module", params=["sqlite", pytest.param("dynamodb-local", marks=pytest.mark.dynamodb_local)])
def brain(request: pytest.FixtureRequest, brain_embedder: Any, brain_local_embedder: Any) -> Iterator[Any]:
    from fleetmem.adapters.local.clock import FixedClock
    from fleetmem.adapters.local.ids import SortableIds
    from fleetmem.ports import Deps

    clock = FixedClock(NOW)
    if request.param == "sqlite":
        from fleetmem.adapters.local import open_local

        stores = open_local(":memory:")
        try:
            yield Deps.over(stores, clock=clock, ids=SortableIds(), embedder=brain_local_embedder, llm=None)
        finally:
            stores.close()
        return
    from tests.aws import engines

    endpoint = engines.dynamodb_local_endpoint(request.config)
    with engines.aws_deps(request.config, endpoint, embedder=brain_embedder, clock=clock) as deps:
        yield deps
