"""Backends the port contract suites run against.

A backend is a name plus a factory. The factory takes the pytest `request` (so it can pull
session-scoped server fixtures with `request.getfixturevalue(...)`) and returns a context manager
that yields an object holding some of the port attributes

    facts, pages, cursors, clients, idempotency, audit, search

Each port's suite is parametrized over exactly the backends that declare that port in `ports`:
a backend without a port is simply not collected for it (no silent skips). The yielded object may
also offer, optionally:

- `settle()`: make preceding writes visible to reads (e.g. refresh an asynchronous search index);
  the suites call it after writing and before reading search results;
- `sessions_per_client`: the cursor store's eviction limit when the backend was built with a
  smaller one than `fleetmem.protocol.SESSIONS_PER_CLIENT` (keeps the eviction test cheap);
- `vector_search = False`: the engine has no vector search; the SearchIndex suite then asserts
  the documented degradation (`vector` None, `vector_error` set, keyword arm intact) instead.

Import this module as `tests.contract.backends` (tests/contract/conftest.py puts the repository
root on sys.path), so every importer shares one registry.

Registering another backend (this is what tests/contract/backends_aws.py does at import):

    from tests.contract.backends import register_backend

    @contextmanager
    def _moto(request):
        server = request.getfixturevalue("moto_server")
        yield open_aws(...)

    register_backend("moto", _moto, ports={"facts", "pages", "cursors"}, marks=(pytest.mark.slow,))

`marks` are applied to every parametrized case of that backend (e.g. `pytest.mark.dynamodb_local`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

PORTS = frozenset({"facts", "pages", "cursors", "clients", "idempotency", "audit", "search"})

Factory = Callable[[pytest.FixtureRequest], AbstractContextManager[Any]]


@dataclass(frozen=True)
class Backend:
    name: str
    factory: Factory
    ports: frozenset[str]
    marks: tuple[Any, ...] = field(default=())


_REGISTRY: dict[str, Backend] = {}


def register_backend(name: str, factory: Factory, *, ports: Iterable[str] = PORTS, marks: Iterable[Any] = ()) -> None:
    """Add (or replace) a backend. `ports` names the port attributes the factory's object has."""
    wanted = frozenset(ports)
    unknown = wanted - PORTS
    if unknown:
        raise ValueError(f"unknown ports: {sorted(unknown)}")
    _REGISTRY[name] = Backend(name, factory, wanted, tuple(marks))


def backends_for(port: str) -> list[Any]:
    """pytest params (id = backend name) for every backend that provides `port`."""
    return [pytest.param(b.name, id=b.name, marks=list(b.marks)) for b in _REGISTRY.values() if port in b.ports]


def backend(name: str) -> Backend:
    return _REGISTRY[name]


@contextmanager
def _sqlite(request: pytest.FixtureRequest):
    from fleetmem.adapters.local import open_local

    stores = open_local(":memory:")
    try:
        yield stores
    finally:
        stores.close()


@contextmanager
def _sqlite_file(request: pytest.FixtureRequest):
    """The same store on a real file (WAL, per-thread connections) instead of ":memory:"."""
    from fleetmem.adapters.local import open_local

    stores = open_local(request.getfixturevalue("tmp_path") / "data")
    try:
        yield stores
    finally:
        stores.close()


register_backend("sqlite", _sqlite)
register_backend("sqlite-file", _sqlite_file, ports={"facts", "pages", "cursors", "search"})


def _load_optional(module: str) -> None:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise  # the module exists but one of its own imports is missing: surface it


_load_optional("tests.contract.backends_aws")
