"""Root fixtures shared by every test package: a fixed clock, in-memory local stores, Deps and callers."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from fleetmem.adapters.local import LocalStores, open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.models import Caller
from fleetmem.pack_transfer import PackFiles
from fleetmem.ports import Deps, Diagnostics

START = datetime(2026, 6, 11, 9, 30, 0, tzinfo=UTC)

#: The xdist groups that run longest, handed out first (scripts/test: --dist loadgroup
#: --no-loadscope-reorder): the local stack's tests take one worker from the start while the other
#: works through the console's and then everything else, so no long group starts near the end
#: with the other worker left idle.
FIRST_GROUPS = ("stack", "console")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        mark = item.get_closest_marker("xdist_group")
        name = (mark.args[0] if mark.args else mark.kwargs.get("name")) if mark else None
        return FIRST_GROUPS.index(name) if name in FIRST_GROUPS else len(FIRST_GROUPS)

    items.sort(key=rank)  # stable: each group, and everything after them, keeps its order


@pytest.fixture(scope="session")
def opensearch_url(request: pytest.FixtureRequest) -> str:
    """A real single-node OpenSearch 2.19.1 with the k-NN plugin, one per test run
    (tests/aws/engines.py: started on 127.0.0.1, stopped at the end; under CI=true a missing
    engine fails instead of skipping). Tests isolate themselves by index prefix."""
    from tests.aws import engines

    return engines.opensearch_endpoint(request.config)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture
def stores() -> Iterator[LocalStores]:
    s = open_local(":memory:")
    try:
        yield s
    finally:
        s.close()


def _deps(stores: LocalStores, clock: FixedClock, **kw: object) -> Deps:
    return Deps.over(
        stores,
        clock=clock,
        ids=SortableIds(),
        llm=None,
        packs=PackFiles(),  # as wiring gives every backend
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def deps(stores: LocalStores, clock: FixedClock) -> Deps:
    return _deps(stores, clock, embedder=HashEmbedder())


@pytest.fixture
def deps_keyword_only(stores: LocalStores, clock: FixedClock) -> Deps:
    problem = Diagnostics(embedder_problem="no embedder configured (tests)")
    return _deps(stores, clock, embedder=None, diagnostics=problem)


@pytest.fixture
def remote_caller() -> Caller:
    return Caller(tenant="t1", client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)


@pytest.fixture
def local_caller() -> Caller:
    return Caller(tenant="t1", client_id="local", scopes=frozenset({"read", "write", "admin"}), remote=False)


@pytest.fixture
def admin_caller() -> Caller:
    return Caller(tenant="t1", client_id="admin-a", scopes=frozenset({"read", "write", "admin"}), remote=True)


@pytest.fixture
def other_tenant_caller() -> Caller:
    return Caller(tenant="t2", client_id="agent-b", scopes=frozenset({"read", "write"}), remote=True)
