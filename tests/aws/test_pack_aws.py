"""Memory packs into and out of the AWS stores (moto server and DynamoDB Local for the tables, the
run's OpenSearch node for the index): laptop -> pack -> AWS -> pack -> a fresh laptop keeps every
page, fact (state, lineage, seq) and audit event, and a second import into AWS writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.clock import SystemClock
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.pack import PackFilter, PackReader
from fleetmem.pack_transfer import export_pack, import_pack
from fleetmem.ports import Deps
from tests.aws import engines
from tests.cli import conftest as cli_conftest
from tests.cli.conftest import Fleetmem
from tests.cli.test_pack import seed, state

pytestmark = pytest.mark.slow

fm = cli_conftest.fm  # the CLI tests' runner over a new local memory (the laptop)


def everything(deps: Deps, tenant: str = "default") -> dict[str, Any]:
    """What a pack carries, read through the stores' scans (audit in subject order: a table Scan
    returns subjects in key order, not in the order written)."""

    def scan(store: Any, drop: set[str]) -> list[dict[str, Any]]:
        out, after = [], None
        while True:
            batch, after = store.scan(tenant, after=after, limit=3)
            out += [item.model_dump(mode="json", exclude=drop) for item in batch]
            if after is None:
                return out

    audit = scan(deps.audit, {"tenant"})
    return {
        "pages": scan(deps.pages, {"tenant"}),
        "facts": scan(deps.facts, {"tenant", "vector", "vector_model"}),
        "audit": sorted(audit, key=lambda e: (e["subject"], e["at"], e["action"])),
    }


def sorted_audit(s: dict[str, Any]) -> dict[str, Any]:
    return {**s, "audit": sorted(s["audit"], key=lambda e: (e["subject"], e["at"], e["action"]))}


def local_deps(stores: Any) -> Deps:
    return Deps.over(stores, clock=SystemClock(), ids=SortableIds(), embedder=HashEmbedder())


@pytest.mark.parametrize("engine", ["moto", pytest.param("dynamodb-local", marks=pytest.mark.dynamodb_local)])
def test_laptop_to_aws_and_back_keeps_everything(
    engine: str, fm: Fleetmem, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    seed(fm)
    laptop = sorted_audit(state(fm.data_dir))
    first, second = tmp_path / "laptop.fmpack", tmp_path / "aws.fmpack"
    with open_local(fm.data_dir) as stores:
        export_pack(first, local_deps(stores), tenant="default", filter=PackFilter())
    endpoint = (
        engines.moto_endpoint(request.config) if engine == "moto" else engines.dynamodb_local_endpoint(request.config)
    )
    embedder = HashEmbedder()
    with engines.aws_deps(request.config, endpoint, embedder=embedder, clock=SystemClock()) as aws:
        with PackReader(first) as reader:
            reader.verify()
            report = import_pack(reader, aws, tenant="default")
        assert report.written["facts.jsonl"] == len(laptop["facts"])
        assert sorted_audit(everything(aws)) == laptop
        with PackReader(first) as reader:  # again: nothing to write
            reader.verify()
            again = import_pack(reader, aws, tenant="default")
        assert set(again.written.values()) == {0} and not again.kept
        assert aws.facts.next_seq("default") > max(f["seq"] for f in laptop["facts"])
        export_pack(second, aws, tenant="default", filter=PackFilter())
    fresh = tmp_path / "fresh"
    with open_local(fresh) as stores, PackReader(second) as reader:
        reader.verify()
        import_pack(reader, local_deps(stores), tenant="default")
    assert sorted_audit(state(fresh)) == laptop  # ids, seqs, states, lineage and timestamps as they were
