"""Transport fixtures: a test-only probe tool (registered for one test, then removed) and a
store snapshot for "nothing was written" assertions."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from fleetmem.adapters.local import LocalStores
from fleetmem.errors import Notice, Outcome
from fleetmem.memory.receipts import ReceiptFields
from fleetmem.memory.registry import REGISTRY, ToolSpec, register
from tests.result_contract import validate_every_dispatch


class ProbeParams(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(description="Required text.")
    limit: int = Field(50, description="How many (default 50)")
    note: str | None = None


class ProbeResult(ReceiptFields):  # a keyed write's answer carries its receipt (D22)
    model_config = ConfigDict(extra="forbid")

    name: str
    limit: int
    correlation_seen: str
    n: int
    protocol_version: int
    idempotent_replay: bool | None = None


@dataclass
class Probe:
    """Controls what the probe tool does when run."""

    raises: BaseException | None = None
    notices: list[Notice] = field(default_factory=list)
    calls: list[ProbeParams] = field(default_factory=list)


def _make_probe(name: str, *, writes: bool, scope: str, surface: str, idempotency: bool) -> tuple[ToolSpec, Probe]:
    probe = Probe()

    def run(deps: Any, caller: Any, params: ProbeParams, ctx: Any) -> Outcome:
        probe.calls.append(params)
        if probe.raises is not None:
            raise probe.raises
        return Outcome(
            {
                "name": params.name,
                "limit": params.limit,
                "correlation_seen": ctx.correlation_id,
                "n": len(probe.calls),
                "protocol_version": 1,
            },
            list(probe.notices),
        )

    spec = ToolSpec(
        name=name,
        description="test-only probe",
        params=ProbeParams,
        result=ProbeResult,
        run=run,
        scope=scope,
        surface=surface,
        writes=writes,
        idempotency=idempotency,
    )  # type: ignore[arg-type]
    return spec, probe


@pytest.fixture
def make_probe() -> Iterator[Callable[..., Probe]]:
    added: list[str] = []

    def make(
        name: str = "zz_probe",
        *,
        writes: bool = False,
        scope: str = "read",
        surface: str = "verbs",
        idempotency: bool = False,
    ) -> Probe:
        spec, probe = _make_probe(name, writes=writes, scope=scope, surface=surface, idempotency=idempotency)
        register(spec)
        added.append(name)
        return probe

    yield make
    for name in added:
        REGISTRY.pop(name, None)


def snapshot(stores: LocalStores) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, sorted: equal snapshots mean nothing was written."""

    def run(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        out = {}
        for t in tables:
            try:
                rows = conn.execute(f'SELECT * FROM "{t}"').fetchall()
            except sqlite3.Error:
                continue  # FTS shadow/config tables that cannot be read directly
            out[t] = sorted((tuple(r) for r in rows), key=repr)
        return out

    return stores.db.read(run)


@pytest.fixture(autouse=True)
def responses_match_their_result_models(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every successful dispatch in these tests must match its tool's result model."""
    checks = validate_every_dispatch(monkeypatch)
    yield
    checks.assert_clean()
