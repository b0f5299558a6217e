"""The search index rebuilt from DynamoDB on the local stack (docs/operate.md, "Rebuild the search
index" and "Restore a stage"): `fleetmem admin reindex --backend aws` against the stack's tables and
its real OpenSearch node, while the stack's functions keep writing through the gateway, the stream
indexer into the alias. Nothing is mocked (the Bedrock stand-in serves MiniLM, tests/stack/stack.py).

The restore rehearsal follows the runbook from its second step: DynamoDB Local has no point-in-time
recovery, so the stage's own tables stand for the restored ones. `fleetmem admin copy-tables`
copies them into a new stage's empty tables, `fleetmem admin reindex` builds that stage's search
index under a fresh index prefix on the same node, a second stack serves the copies, and the
conformance suite runs against it.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleetmem.adapters.aws.opensearch import OpenSearchIndex
from fleetmem.adapters.aws.reindex import fact_docs
from fleetmem.adapters.aws.tables import create_tables
from fleetmem.memory.indexing import docs_for_page
from tests.aws import engines
from tests.cli import conftest as cli_conftest
from tests.cli.conftest import Fleetmem

from .conftest import mint
from .stack import GROUPS, LOCAL_EMBEDDING_DIM, LOCAL_EMBEDDING_MODEL, Stack
from .test_stack_pack import conformance_failures

pytestmark = pytest.mark.slow

fm = cli_conftest.fm  # the CLI runner (`--backend aws` on the stack's tables: no data directory)
WORDS = ("harbour", "lighthouse", "ferry", "quay", "tide", "pier")


def call(stack: Stack, token: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    out = httpx.post(f"{stack.base_url}/v1/{tool}", json=args, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert out.status_code == 200, out.text
    return dict(out.json())


def seed(stack: Stack, token: str, tag: str, facts: int = 12, pages: int = 4) -> list[str]:
    """Tens of items: facts on a few entities and pages; returns the fact ids."""
    ids = []
    for n in range(facts):
        word = WORDS[n % len(WORDS)]
        fact = f"The {word} {tag} note {n}: boats leave at {n + 6} o'clock"
        ids.append(
            call(stack, token, "remember", {"fact": fact, "provenance": "seed", "entity": f"places/{word}"})["id"]
        )
    for word in WORDS[:pages]:
        body = f"# The {word}\n\nThe {word} of {tag} opens at dawn.\n\n## History\n\nBuilt long ago near the {word}."
        call(stack, token, "put_page", {"slug": f"places/{word}", "content": body, "title": f"The {word}"})
    return ids


def search_of(stack: Stack, prefix: str = "") -> OpenSearchIndex:
    return OpenSearchIndex(
        stack.search_url,
        model_id=LOCAL_EMBEDDING_MODEL,
        dim=LOCAL_EMBEDDING_DIM,
        prefix=prefix or stack.index_prefix,
        service="none",
    )


def expected_docs(ddb: str, table_prefix: str, tenant: str) -> set[str]:
    """The doc ids the stream indexer builds for the tenant's items in DynamoDB."""
    stores = engines.open_stores(ddb, table_prefix)
    facts, pages, after = [], [], None
    while True:
        batch, after = stores.facts.scan(tenant, after=after, limit=100)
        facts += batch
        if after is None:
            break
    while True:
        more, after = stores.pages.scan(tenant, after=after, limit=100)
        pages += more
        if after is None:
            break
    return {d.doc_id for d in fact_docs(facts)[0]} | {d.doc_id for p in pages for d in docs_for_page(p)}


def indexed(search: OpenSearchIndex, tenant: str) -> set[str]:
    search.client.indices.refresh(index=search.alias)
    body = {"size": 5000, "_source": ["doc_id"], "query": {"term": {"tenant": tenant}}}
    return {h["_source"]["doc_id"] for h in search.client.search(index=search.alias, body=body)["hits"]["hits"]}


def recall_ids(stack: Stack, token: str, query: str) -> list[str]:
    """The facts recall finds, all of them (the limit is above the tenant's fact count)."""
    return sorted(f["fact_id"] for f in call(stack, token, "recall", {"query": query, "limit": 50})["facts"])


def reindex(fm: Fleetmem, env: dict[str, str], state: Path, *flags: str) -> dict[str, Any]:
    run = fm("admin", "reindex", "--backend", "aws", "--state", str(state), "--json", *flags, data_dir=False, env=env)
    assert run.code == 0, run.stderr
    assert "reindex: copy:" in run.stderr and "%" in run.stderr  # progress on stderr
    return dict(run.json())


def test_a_rebuild_under_concurrent_writes_misses_nothing_and_swaps_the_alias(
    stack: Stack, fm: Fleetmem, tmp_path: Path
) -> None:
    tenant = f"rx-{uuid.uuid4().hex[:6]}"
    token = mint(stack, ["read", "write", "admin"], tenant=tenant)
    seeded = seed(stack, token, "before")
    search = search_of(stack)
    (old,) = search.alias_targets()

    written: list[tuple[str, str]] = []
    stop = threading.Event()
    failures: list[str] = []

    def writer() -> None:  # new facts, a forget, page rewrites and a page delete, until the rebuild ends
        n = 0
        try:
            while not stop.is_set() or n < 6:
                word = f"marker{uuid.uuid4().hex[:8]}"
                fid = call(stack, token, "remember", {"fact": f"Concurrent {word} {n}", "provenance": "writer"})["id"]
                written.append((word, fid))
                if n < len(seeded) and n % 3 == 0:
                    call(stack, token, "forget", {"id": seeded[n], "reason": "rebuild test"})
                if n % 4 == 1:
                    call(
                        stack, token, "put_page", {"slug": "places/harbour", "content": f"# Harbour\n\nRewritten {n}."}
                    )
                if n == 2:
                    call(stack, token, "delete_page", {"slug": "places/quay"})
                n += 1
        except Exception as exc:  # reported below: the test fails with it
            failures.append(repr(exc))

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        doc = reindex(fm, stack.admin_env(), tmp_path / "state.json", "--rate", "20")
    finally:
        stop.set()
        thread.join(timeout=300)
    assert failures == []
    stack.drain()

    assert search.alias_targets() == [doc["index"]] and doc["index"] != old
    assert doc["previous"] == [old] and search.client.indices.exists(index=old)  # kept: no --drop-old
    want = expected_docs(stack.ddb, stack.prefix, tenant)
    assert len(want) > 20 and indexed(search, tenant) == want  # 0 missing, nothing stale
    for word, fid in written[:: max(1, len(written) // 5)]:  # found by the word only its fact holds
        assert fid in recall_ids(stack, token, word), word
    assert seeded[0] not in recall_ids(stack, token, "harbour before note 0")  # forgotten during the rebuild


def test_restore_rehearsal_copied_tables_reindexed_pass_conformance(
    request: pytest.FixtureRequest, stack: Stack, fm: Fleetmem, tmp_path: Path
) -> None:
    tenant = f"restore-{uuid.uuid4().hex[:6]}"
    token = mint(stack, ["read", "write"], tenant=tenant)
    seed(stack, token, "restored", facts=6, pages=2)  # the copy holds every tenant's items
    queries = ("harbour", "ferry", "lighthouse dawn")
    before = {q: recall_ids(stack, token, q) for q in queries}

    # the restored stage: new, empty tables (as a deploy of a new stage creates them), the stage's
    # items copied in by the runbook's command
    restored, fresh = f"{stack.prefix}-r", f"fmrestore{uuid.uuid4().hex[:6]}"
    create_tables(engines.dynamodb_client(stack.ddb), restored)
    env = {**stack.admin_env(), "FLEETMEM_TABLE_PREFIX": restored, "FLEETMEM_OPENSEARCH_INDEX_PREFIX": fresh}
    run = fm("admin", "copy-tables", "--from", stack.prefix, "--json", data_dir=False, env=env)
    assert run.code == 0, run.stderr
    assert run.json()["copied"]["facts"] > 12
    again = fm("admin", "copy-tables", "--from", stack.prefix, "--json", data_dir=False, env=env)
    assert again.code == 2 and "not empty" in again.stdout + again.stderr  # never merged into a stage holding data
    doc = reindex(fm, env, tmp_path / "restore.json")
    search = search_of(stack, fresh)
    assert search.alias_targets() == [doc["index"]]
    assert indexed(search, tenant) == expected_docs(stack.ddb, restored, tenant)

    serving = tuple(g for g in GROUPS if g not in {"heartbeat", "signing_rotation"})  # what calls reach
    second = Stack(config=request.config, prefix=restored, index_prefix=fresh, groups=serving).start()
    try:
        again = mint(second, ["read", "write"], tenant=tenant)
        assert {q: recall_ids(second, again, q) for q in queries} == before
        assert conformance_failures(second.mcp_url, mint(second, ["read", "write", "admin"], tenant=tenant)) == []
    finally:
        second.stop()
        search.client.indices.delete(index=f"{fresh}-docs-*", ignore_unavailable=True)
        engines.drop_tables(stack.ddb, restored)
