"""A brain moved laptop -> pack -> the local stack -> pack -> a fresh laptop (docs/portability.md).

The laptop is `fleetmem` over a local data directory (hash embedder); the stack is the deployed
shape (DynamoDB Local, the stream indexer into the real OpenSearch node, every function under the
runtime emulator, MiniLM behind the Bedrock shape). The pack is imported into and exported from the
stack's own tables by `fleetmem import --pack --backend aws` and `fleetmem export --backend aws`.
Nothing is mocked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetmem.conformance import run as run_conformance
from tests.cli import conftest as cli_conftest
from tests.cli.conftest import Fleetmem
from tests.cli.test_pack import seed, state
from tests.mcp.served import Served, server_env

from .conftest import mint

pytestmark = pytest.mark.slow

fm = cli_conftest.fm  # the CLI tests' runner over a new local memory: the laptop
TENANT = "pack-rt"
ENTITIES = ("people/alice-example", "companies/acme-example")
QUERIES = ("alice tea", "acme deadline", "research")


def by_subject(s: dict[str, Any]) -> dict[str, Any]:
    """A table Scan returns the audit trail subject by subject, not in the order written."""
    return {**s, "audit": sorted(s["audit"], key=lambda e: (e["subject"], e["at"], e["action"]))}


def laptop_recall(fm: Fleetmem, data_dir: Path, **args: str) -> list[tuple[str, str | None]]:
    flags = [x for k, v in args.items() for x in (f"--{k.replace('_', '-')}", v)]
    run = fm(
        "recall", *flags, "--include-expired", "--tenant", TENANT, "--json", "--data-dir", str(data_dir), data_dir=False
    )
    assert run.code in (0, 12), run.stderr
    return sorted((f["fact_id"], f.get("status")) for f in run.json()["facts"])


def stack_recall(base_url: str, token: str, **args: str) -> list[tuple[str, str | None]]:
    out = httpx.post(
        f"{base_url}/v1/recall",
        json={**args, "include_expired": True},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert out.status_code == 200, out.text
    return sorted((f["fact_id"], f.get("status")) for f in out.json()["facts"])


def test_laptop_to_stack_and_back_keeps_the_brain(stack: Any, fm: Fleetmem, tmp_path: Path) -> None:
    seed(fm, TENANT)
    laptop = by_subject(state(fm.data_dir, TENANT))
    first, second = tmp_path / "laptop.fmpack", tmp_path / "stack.fmpack"
    assert fm("export", str(first), "--tenant", TENANT).code == 0

    on_stack = {"data_dir": False, "env": stack.client_env()}  # `--backend aws` on the stack's tables
    run = fm("import", "--pack", str(first), "--backend", "aws", "--tenant", TENANT, "--json", **on_stack)
    assert run.code == 0, run.stderr
    assert run.json()["written"]["pages.jsonl"] == len(laptop["pages"]) and not run.json()["kept"]
    again = fm("import", "--pack", str(first), "--backend", "aws", "--tenant", TENANT, "--json", **on_stack)
    assert again.code == 0 and set(again.json()["written"].values()) == {0}
    stack.drain()  # the stream indexer puts the imported items into OpenSearch

    token = mint(stack, ["read", "write"], tenant=TENANT)
    for entity in ENTITIES:  # the same facts, in the same states, on both sides (world facts: a remote caller)
        assert stack_recall(stack.base_url, token, entity=entity) == laptop_recall(fm, fm.data_dir, entity=entity)
    for query in QUERIES:
        found = stack_recall(stack.base_url, token, query=query)
        assert found and found == laptop_recall(fm, fm.data_dir, query=query), query

    assert fm("export", str(second), "--backend", "aws", "--tenant", TENANT, **on_stack).code == 0
    fresh = tmp_path / "fresh" / "data"  # the data directory `Served` serves
    run = fm("import", "--pack", str(second), "--tenant", TENANT, "--data-dir", str(fresh), data_dir=False)
    assert run.code == 0, run.stderr
    assert by_subject(state(fresh, TENANT)) == laptop
    for entity in ENTITIES:
        assert laptop_recall(fm, fresh, entity=entity) == laptop_recall(fm, fm.data_dir, entity=entity)

    # both sides pass the protocol suite with the moved brain in them: the stack, and
    # `fleetmem serve` over the fresh laptop's data directory
    assert conformance_failures(stack.mcp_url, mint(stack, ["read", "write", "admin"], tenant=TENANT)) == []
    minted = fm(
        "token", "create", "--client", "conformance", "--scopes", "read,write,admin", "--tenant", TENANT,
        "--data-dir", str(fresh), data_dir=False,
    )  # fmt: skip
    assert minted.code == 0, minted.stderr
    laptop_server = Served(tmp_path / "fresh", server_env(), token=minted.stdout.strip()).start()
    try:
        assert conformance_failures(f"{laptop_server.url}/mcp", laptop_server.token) == []
    finally:
        laptop_server.stop()


def conformance_failures(mcp_url: str, token: str) -> list[str]:
    """The ids of the conformance cases that failed (the suite ran: it reports passed cases too), in
    the current protocol era (test_stack_e2e runs both eras through every function)."""
    report_doc = run_conformance(mcp_url, token, json=True, eras=("auto",), surface="full", log=lambda _line: None)
    assert any(c["status"] == "passed" for c in report_doc["cases"]), report_doc
    return [c["id"] for c in report_doc["cases"] if c["status"] == "failed"]
