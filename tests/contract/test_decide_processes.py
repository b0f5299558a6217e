"""D20: `remember` decides once per entity across processes.

Several processes, each with its own stores over one backend — a SQLite data directory shared by
real processes, or one set of tables on DynamoDB Local (a real engine on 127.0.0.1) — remember
updates of one attribute of one entity at the same moment, from many threads each. However the
writes interleave, the entity ends with exactly one active fact for the attribute and one
unbroken supersession chain: one first value, every later fact superseding exactly the one
before it, no fact superseded twice. Nothing is mocked; the embedder is the deterministic
HashEmbedder, under which every two of these facts are an update of the same attribute.
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.aws import engines
from tests.contract import decide_workers
from tests.contract.decide_workers import ENTITY, TENANT

from fleetmem.models import Fact


@pytest.fixture(params=["sqlite", "dynamodb-local"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    if request.param == "sqlite":
        from fleetmem.adapters.local import open_local

        data_dir = tmp_path / "data"
        open_local(data_dir).close()  # the schema exists before the children race to open it
        yield {"kind": "sqlite", "data_dir": str(data_dir)}
        return
    endpoint = engines.dynamodb_local_endpoint(request.config)
    prefix = engines.fresh_prefix()
    engines.tables_for(endpoint, prefix)
    yield {"kind": "dynamodb", "endpoint": endpoint, "prefix": prefix}


def _run(backend: dict[str, str], tmp_path: Path, ports_per_worker: list[list[int]]) -> list[dict[str, Any]]:
    """One spawned process per entry, all starting their calls together; every call's result."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(ports_per_worker))
    outs = [tmp_path / f"worker-{w}.json" for w in range(len(ports_per_worker))]
    procs = [
        ctx.Process(target=decide_workers.remember_ports, args=(backend, w, ports, barrier, str(outs[w])))
        for w, ports in enumerate(ports_per_worker)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    return [r for out in outs for r in json.loads(out.read_text())]


def _entity_facts(backend: dict[str, str]) -> list[Fact]:
    stores = decide_workers.open_backend(backend)
    try:
        now = datetime.now(UTC) + timedelta(minutes=1)
        return stores.fact_listing.by_entity(TENANT, ENTITY, now=now, active_only=False, world_only=False, limit=1000)
    finally:
        stores.close()


def _assert_one_chain(facts: list[Fact], results: list[dict[str, Any]]) -> None:
    assert [r for r in results if "error" in r] == []
    # every call stored its own fact (all values differ: none is a duplicate)
    assert sorted(r["id"] for r in results) == sorted(f.fact_id for f in facts)
    assert len(facts) == len(results)
    by_id = {f.fact_id: f for f in facts}
    active = [f for f in facts if f.expired_at is None and f.superseded_by is None]
    assert len(active) == 1, f"{len(active)} active facts for one attribute"
    firsts = [f for f in facts if f.supersedes is None]
    assert len(firsts) == 1, f"{len(firsts)} facts were stored as the attribute's first value"
    replaced = [f.supersedes for f in facts if f.supersedes is not None]
    assert len(replaced) == len(set(replaced)), "a fact was superseded twice"
    for f in facts:
        if f.supersedes is not None:
            old = by_id[f.supersedes]
            assert old.superseded_by == f.fact_id and old.expired_at is not None
    # walking the chain from the first value reaches every fact and ends at the active one
    chain = [firsts[0]]
    while chain[-1].superseded_by is not None:
        chain.append(by_id[chain[-1].superseded_by])
    assert len(chain) == len(facts) and chain[-1] is active[0]
    statuses = sorted(r["status"] for r in results)
    assert statuses == ["inserted"] + ["superseded"] * (len(results) - 1)


def test_four_processes_updating_one_attribute_leave_one_active_fact_and_one_chain(backend, tmp_path):
    workers, calls = 4, 25
    ports = [[8000 + 100 * w + i for i in range(calls)] for w in range(workers)]
    results = _run(backend, tmp_path, ports)
    assert len(results) == workers * calls
    _assert_one_chain(_entity_facts(backend), results)


def test_processes_racing_on_the_first_value_store_it_once(backend, tmp_path):
    # the entity has no fact yet: every process sees an empty pool, and only one may insert
    workers = 4
    results = _run(backend, tmp_path, [[9000 + w] for w in range(workers)])
    assert len(results) == workers
    _assert_one_chain(_entity_facts(backend), results)
