"""Search-quality parity of the two adapter sets: the quality harness (shared/fleetmem/bench/quality.py,
`scripts/bench quality`) runs on the local SQLite set and on the AWS set — DynamoDB Local plus the
real OpenSearch node with k-NN (lucene HNSW, BM25 with the fleetmem analyzer) — with the same local
MiniLM embedder, and prints both tables.

A benchmark, not part of the suite (it takes minutes: every write is indexed with a refresh, and
312 questions are asked twice per set), so the file name is outside pytest's `test_*.py` pattern.
Run it with `scripts/bench quality --aws`, or directly:
    .venv/bin/python -m pytest tests/aws/bench_quality_parity.py -s -n 0

The two sets rank differently by design (SQLite FTS5 bm25 over per-tenant partition tokens with
stopwords dropped from the query, exact cosine; OpenSearch BM25 over the whole index, approximate
HNSW), so the numbers are not expected to be equal: the README's "Search quality" section reports
both tables and explains the gaps. What must hold on both sets is checked here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.aws import engines

pytestmark = [pytest.mark.slow, pytest.mark.live_opensearch, pytest.mark.dynamodb_local]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    from fleetmem.adapters.local.embedder import load_local_embedder
    from fleetmem.config import Settings

    path = Settings.from_env().model_dir
    embedder, problem = load_local_embedder(path)
    if embedder is None:
        engines.missing(f"the local MiniLM embedder ({problem})", "fleetmem embedder build")
    return path


def test_hybrid_quality_on_opensearch_matches_the_local_backend(
    request: pytest.FixtureRequest, opensearch_url: str, model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleetmem.adapters.aws import open_aws
    from fleetmem.bench.quality import run_quality
    from fleetmem.config import Settings

    ddb = engines.dynamodb_local_endpoint(request.config)
    prefix = engines.fresh_prefix()

    def aws_stores(_tmp: Path, embedder: Any) -> Any:
        engines.tables_for(ddb, prefix)
        settings = Settings(
            backend="aws",
            region="us-east-1",
            table_prefix=prefix,
            opensearch_endpoint=opensearch_url,
            opensearch_service="none",
            opensearch_index_prefix=prefix,
            opensearch_write_through=True,  # no stream indexer here: index on write
        )
        return open_aws(
            settings,
            session=engines.session(),
            dynamodb_endpoint=ddb,
            search_model_id=embedder.model_id,
            search_dim=embedder.dim,
        )

    local = run_quality(model_dir, out=lambda _t: None)
    aws = run_quality(model_dir, out=lambda _t: None, open_stores=aws_stores)
    with capsys.disabled():
        print("\n\nlocal (SQLite FTS5 + exact cosine)\n" + local["table"])
        print("\naws (DynamoDB Local + OpenSearch 2.19.1 k-NN lucene)\n" + aws["table"] + "\n")
    assert aws["questions"] == local["questions"] > 0
    for result in (local, aws):
        hybrid, keyword = result["modes"]["hybrid"], result["modes"]["keyword-only"]
        for qtype in ("fact/lexical", "page/lexical"):
            assert hybrid[qtype]["recall@5"] == 1.0, (qtype, hybrid[qtype])
        for qtype in ("fact/paraphrase", "page/paraphrase"):
            # the vector arm ran (a degraded hybrid raises inside run_quality) and it helps
            assert hybrid[qtype]["recall@5"] >= keyword[qtype]["recall@5"], (qtype, hybrid[qtype], keyword[qtype])
            assert hybrid[qtype]["recall@5"] >= 0.75, (qtype, hybrid[qtype])
