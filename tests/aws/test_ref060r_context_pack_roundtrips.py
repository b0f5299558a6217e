"""What D32's core block costs context_pack on the AWS adapter set, counted the way
tests/aws/test_roundtrips.py counts (botocore hooks on moto in server mode; calls issued together
by one fan-out are one sequential round trip): finding the core pages is one GetItem of the
tenant's core item, run beside the entity and fact reads, so it adds no sequential round trip; the
pages themselves are one BatchGetItem, only when the core item lists some."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from fleetmem.adapters.aws.dynamo import parallel
from fleetmem.adapters.aws.opensearch import OpenSearchIndex
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.models import Caller
from fleetmem.ports import Deps, Policy
from fleetmem.transport.dispatch import dispatch
from tests.aws import engines
from tests.aws.roundtrips import Recorder, attach

CALLER = Caller(tenant="t1", client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)
ALICE = "people/alice-example"


@pytest.fixture(scope="module")
def brain(request: pytest.FixtureRequest, opensearch_url: str) -> Any:
    endpoint = engines.moto_endpoint(request.config)
    stores = engines.open_stores(endpoint, engines.fresh_prefix())
    embedder = HashEmbedder(dim=16)
    search = OpenSearchIndex(
        opensearch_url, model_id=embedder.model_id, dim=embedder.dim, service="none", prefix=engines.fresh_prefix()
    )
    deps = Deps.over(
        stores,
        search=search,
        clock=FixedClock(datetime(2026, 6, 11, 9, 30, tzinfo=UTC)),
        ids=SortableIds(),
        embedder=embedder,
        policy=Policy(parallel=parallel),
    )
    recorder = Recorder()
    attach(recorder, stores.aws.dynamodb, search, embedder)
    try:
        yield deps, recorder
    finally:
        search.client.indices.delete(index=search.index, ignore_unavailable=True)
        search.client.close()


def measure(deps: Deps, recorder: Recorder, args: dict[str, Any], *, core_chars: int) -> dict[str, Any]:
    d = dataclasses.replace(deps, policy=dataclasses.replace(deps.policy, core_chars=core_chars))
    recorder.reset()
    result = dispatch("context_pack", args, CALLER, d)
    assert not result.is_error, result.body
    return {**recorder.summary(), "body": result.body}


def ops(m: dict[str, Any]) -> list[str]:
    return [op.split(" [")[0] for op in m["operations"]]


def test_the_core_read_adds_no_sequential_round_trip(brain):
    deps, recorder = brain
    seed = [
        ("put_page", {"slug": ALICE, "content": "---\ntitle: Alice Example\n---\nAlice drinks green tea.\n"}),
        ("remember", {"fact": "Alice prefers oolong", "provenance": "chat", "entity": ALICE}),
    ]
    for tool, args in seed:
        assert not dispatch(tool, args, CALLER, deps).is_error
    for args in ({"entities": ALICE}, {}):
        off = measure(deps, recorder, args, core_chars=0)
        on = measure(deps, recorder, args, core_chars=4000)
        # no core pages: one GetItem more, beside the other reads; no page read
        assert "core" not in on["body"]
        assert sorted(ops(on)) == sorted([*ops(off), "dynamodb:GetItem"])
        assert on["sequential_round_trips"] == off["sequential_round_trips"]

    assert not dispatch(
        "put_page", {"slug": "me/profile", "content": "---\ncore: true\n---\nAnswer briefly.\n"}, CALLER, deps
    ).is_error
    off = measure(deps, recorder, {"entities": ALICE}, core_chars=0)
    on = measure(deps, recorder, {"entities": ALICE}, core_chars=4000)
    assert on["body"]["core"]["pages"] == ["me/profile"]
    # core pages: the GetItem and one BatchGetItem of the pages, still beside the entity reads
    assert sorted(ops(on)) == sorted([*ops(off), "dynamodb:GetItem", "dynamodb:BatchGetItem"])
    assert on["sequential_round_trips"] == off["sequential_round_trips"]
