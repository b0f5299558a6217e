"""Round-trip budgets of the verbs on the AWS adapter set.

Each verb runs through the one `dispatch` over `open_aws` on moto (server mode) with the
OpenSearch index on the real OpenSearch node; botocore `before-call` hooks and a wrapper on the OpenSearch transport
count every API call, and calls issued together by one adapter fan-out count as one sequential
round trip. The measurements are written to tests/aws/roundtrips.json, from which
`python tests/aws/render_roundtrips.py` renders the table in docs/table-design.md.

Budgets (sequential round trips): entity ≤ 3, recall ≤ 2 (DynamoDB and OpenSearch in parallel),
remember ≤ 2 plus one embedding call, delta ≤ 3 (+1 on a wake that numbers pending changes, D21:
the first wake below comes right after the remember case's write), forget ≤ 2. The domain meets them by gathering
independent port calls into one concurrent round (`Deps.gather`) and by writing audit rows in the
same transaction as the fact they describe. An entity `names` batch (D35) may take 5: one lookup
round, one round of the suffix and bare-token reads of the names nothing matched exactly, one
round of pages and the misses' keyword reads.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
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

OUT = Path(__file__).parent / "roundtrips.json"
CALLER = Caller(tenant="t1", client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)
ALICE = "people/alice-example"

#: (case id, tool, arguments, budget of sequential round trips, embedding calls allowed)
CASES: list[tuple[str, str, dict[str, Any], int, int]] = [
    ("entity (alias hit)", "entity", {"name": "Ally"}, 3, 0),
    ("entity (miss)", "entity", {"name": "Nobody Known"}, 3, 0),
    # D35: a card with linking pages groups them from its link Query (the link rows carry their page's head)
    ("entity (referenced)", "entity", {"name": "Acme"}, 3, 0),
    # D35: a batch is one lookup round, one round of the suffix/token reads of the names nothing matched, one page round
    ("entity (names)", "entity", {"names": ["Ally", "Acme", "companies/acme", "Nobody Known"]}, 5, 0),
    ("recall (query)", "recall", {"query": "green tea"}, 2, 1),
    # a query asking two questions also searches each one: same budget, still one embedding call
    ("recall (query of two questions)", "recall", {"query": "What does Alice drink, and who sells tea?"}, 2, 1),
    # a question naming someone also searches its topic without the name: the same again
    ("recall (question naming someone)", "recall", {"query": "What does Alice drink?"}, 2, 1),
    # D24: the listed facts' content_origin (their trust stamps) is one more read of their items
    ("recall (entity)", "recall", {"entity": ALICE}, 3, 0),
    ("recall (recent)", "recall", {}, 3, 0),
    # D22: every write stores its receipt, after the write when the server made its request id
    (
        "remember",
        "remember",
        {"fact": "Alice moved to Lisbon", "provenance": "chat", "entity": ALICE},
        3,
        1,
    ),
    # D21: the remember case's fact is still pending, so this wake numbers it (one transaction)
    ("delta (first wake)", "delta", {"session_id": "s-new"}, 4, 0),
    ("delta (next wake)", "delta", {"session_id": "s-old"}, 3, 0),
    ("delta (since)", "delta", {"since": "2026-01-01T00:00:00Z"}, 3, 0),
    # D33: a cursor holds both exact positions, so no position is derived from a time: one round
    ("delta (cursor)", "delta", {"cursor": "<cursor>"}, 1, 0),
    ("forget", "forget", {"id": "<fact>", "reason": "wrong"}, 3, 0),
]


@pytest.fixture(scope="module")
def measured(request: pytest.FixtureRequest, opensearch_url: str) -> dict[str, dict[str, Any]]:
    """Runs every case once, in order, on a freshly seeded brain, and writes roundtrips.json (each
    pytest-xdist worker that gets a case measures them all, so the file is always complete)."""
    endpoint = engines.moto_endpoint(request.config)
    stores = engines.open_stores(endpoint, engines.fresh_prefix())
    embedder = HashEmbedder(dim=16)
    search = OpenSearchIndex(
        opensearch_url, model_id=embedder.model_id, dim=embedder.dim, service="none", prefix=engines.fresh_prefix()
    )
    try:
        deps = Deps.over(
            stores,
            search=search,
            clock=FixedClock(datetime(2026, 6, 11, 9, 30, tzinfo=UTC)),
            ids=SortableIds(),
            embedder=embedder,
            policy=Policy(parallel=parallel),
        )
        seed = [
            (
                "put_page",
                {
                    "slug": ALICE,
                    "content": "---\ntitle: Alice Example\naliases: [Ally]\n---\n"
                    "Alice drinks green tea. Works with [[companies/acme]].\n",
                },
            ),
            ("put_page", {"slug": "companies/acme", "content": "---\ntitle: Acme\n---\nAcme sells tea.\n"}),
            ("remember", {"fact": "Alice prefers oolong", "provenance": "chat", "entity": ALICE}),
            (
                "remember",
                {
                    "fact": "Alice will send the report",
                    "provenance": "chat",
                    "entity": ALICE,
                    "kind": "commitment",
                },
            ),
            ("delta", {"session_id": "s-old"}),
        ]
        fact_id = cursor = ""
        for tool, args in seed:
            result = dispatch(tool, args, CALLER, deps)
            assert not result.is_error, result.body
            fact_id = result.body.get("id", fact_id) if tool == "remember" else fact_id
            cursor = result.body["next_cursor"]["cursor"] if tool == "delta" else cursor
        search.ensure_index()
        search.client.indices.refresh(index=search.index)
        recorder = Recorder()
        attach(recorder, stores.aws.dynamodb, search, embedder)
        out: dict[str, dict[str, Any]] = {}
        for case_id, tool, args, budget, embeds in CASES:
            marks = {"<fact>": fact_id, "<cursor>": cursor}
            arguments = {k: marks.get(v, v) if isinstance(v, str) else v for k, v in args.items()}
            recorder.reset()
            result = dispatch(tool, arguments, CALLER, deps)
            assert not result.is_error, (case_id, result.body)
            out[case_id] = {"tool": tool, "budget": budget, "embedding_budget": embeds, **recorder.summary()}
    finally:
        search.client.indices.delete(index=search.index, ignore_unavailable=True)
        search.client.close()
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    return out


@pytest.mark.parametrize("case_id", [case[0] for case in CASES])
def test_the_verb_stays_within_its_round_trip_budget(measured, case_id):
    m = measured[case_id]
    assert m["embedding_calls"] <= m["embedding_budget"]
    assert m["sequential_round_trips"] <= m["budget"]


@pytest.mark.parametrize("case_id", [case[0] for case in CASES if case[1] == "recall" and "query" in case[2]])
def test_a_recall_query_sends_one_msearch_per_arm_whatever_it_asks(measured, case_id):
    """The facts arm and the pages arm each send one `_msearch`: a question's parts and its topic
    ride in it beside the whole query (`SearchIndex.search_many`), they add no request."""
    searches = [op for op in measured[case_id]["operations"] if op.startswith("opensearch:POST _msearch")]
    assert len(searches) == 2, measured[case_id]["operations"]
