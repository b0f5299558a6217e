"""Search-quality parity of the two adapter sets: the quality harnesses run on the local SQLite set
and on the AWS set — DynamoDB Local plus the real OpenSearch node with k-NN (lucene HNSW, BM25 with
the fleetmem analyzer) — with the same local MiniLM embedder, and print both tables.

- the default (paraphrase) set, `shared/fleetmem/bench/quality.py`: `scripts/bench quality --aws`;
- the conversational-memory set, `shared/fleetmem/bench/conversations.py` (tests/data/
  conversations.json, five rankings side by side, tuning and held-out halves):
  `scripts/bench quality --aws --set conversations`;
- the long-history set (tests/data/long_conversations.json, all held out):
  `scripts/bench quality --aws --set long-conversations`.

A benchmark, not part of the suite (it takes minutes: every write is indexed with a refresh, and
every question is asked on both sets), so the file name is outside pytest's `test_*.py` pattern.
Run it directly with, e.g.:
    .venv/bin/python -m pytest tests/aws/bench_quality_parity.py -s -n 0 -k conversations
`-k experiment` runs the experiments behind the parity explanation in docs/search-quality.md (a set on OpenSearch
with the local keyword arm's stopwords dropped from the query, and/or the fields combined as before,
the better of title and text instead of their sum).

The two sets rank differently by design (SQLite FTS5 bm25 over per-tenant partition tokens with
stopwords dropped from the query, exact cosine; OpenSearch BM25 over the whole index with
stopwords kept, approximate HNSW), so the numbers are not expected to be equal: docs/search-quality.md
reports both tables and explains the gaps. What must hold on both sets is checked here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.aws import engines

pytestmark = [pytest.mark.slow, pytest.mark.live_opensearch, pytest.mark.dynamodb_local]

REFRESH_INTERVAL = "100ms"


@pytest.fixture(scope="module")
def embedder() -> Any:
    from fleetmem.adapters.local.embedder import load_local_embedder
    from fleetmem.config import Settings

    loaded, problem = load_local_embedder(Settings.from_env().model_dir)
    if loaded is None:
        engines.missing(f"the local MiniLM embedder ({problem})", "fleetmem embedder build")
    return loaded


@pytest.fixture(scope="module")
def model_dir(embedder: Any) -> Path:
    from fleetmem.config import Settings

    return Settings.from_env().model_dir


@pytest.fixture
def aws_stores(request: pytest.FixtureRequest, opensearch_url: str, embedder: Any) -> Callable[[], Any]:
    """A factory of the AWS adapter set on fresh tables and a fresh index, indexing on write."""
    from fleetmem.adapters.aws import open_aws
    from fleetmem.config import AwsSettings, SearchSettings, Settings

    ddb = engines.dynamodb_local_endpoint(request.config)

    def open_stores() -> Any:
        prefix = engines.fresh_prefix()
        engines.tables_for(ddb, prefix)
        settings = Settings(
            backend="aws",
            aws=AwsSettings(region="us-east-1", table_prefix=prefix),
            search=SearchSettings(
                endpoint=opensearch_url,
                service="none",
                index_prefix=prefix,
                write_through=True,  # no stream indexer here: index on write
            ),
        )
        stores = open_aws(
            settings,
            session=engines.session(),
            dynamodb_endpoint=ddb,
            search_model_id=embedder.model_id,
            search_dim=embedder.dim,
        )
        # Every write waits for a refresh (write-through); at the default 1 s interval the ~1,600
        # writes of the conversational set would wait ~15 minutes. A shorter interval changes when
        # documents become visible, not how they rank.
        stores.search.ensure_index()
        stores.search.client.indices.put_settings(
            index=stores.search.index, body={"index": {"refresh_interval": REFRESH_INTERVAL}}
        )
        return stores

    return open_stores


def _show(capsys: pytest.CaptureFixture[str], local: dict[str, Any], aws: dict[str, Any]) -> None:
    with capsys.disabled():
        print("\n\nlocal (SQLite FTS5 + exact cosine)\n" + local["table"])
        print("\naws (DynamoDB Local + OpenSearch 2.19.1 k-NN lucene)\n" + aws["table"] + "\n")


def test_paraphrase_set_quality_on_opensearch_matches_the_local_backend(
    aws_stores: Callable[[], Any], model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleetmem.bench.quality import run_quality

    local = run_quality(model_dir, out=lambda _t: None)
    aws = run_quality(model_dir, out=lambda _t: None, open_stores=lambda _tmp, _embedder: aws_stores())
    _show(capsys, local, aws)
    assert aws["questions"] == local["questions"] > 0
    for result in (local, aws):
        hybrid, keyword = result["modes"]["hybrid"], result["modes"]["keyword-only"]
        for qtype in ("fact/lexical", "page/lexical"):
            assert hybrid[qtype]["recall@5"] == 1.0, (qtype, hybrid[qtype])
        for qtype in ("fact/paraphrase", "page/paraphrase"):
            # the vector arm ran (a degraded hybrid raises inside run_quality) and it helps
            assert hybrid[qtype]["recall@5"] >= keyword[qtype]["recall@5"], (qtype, hybrid[qtype], keyword[qtype])
            assert hybrid[qtype]["recall@5"] >= 0.75, (qtype, hybrid[qtype])


@pytest.mark.parametrize("which", ["conversations", "long-conversations"])
def test_conversations_set_shipped_ranking_beats_plain_rrf_on_both_backends(
    which: str, aws_stores: Callable[[], Any], model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleetmem.bench.conversations import KINDS, default_set_path, run_conversations

    data = default_set_path(which)
    local = run_conversations(model_dir, data_path=data, out=lambda _t: None)
    aws = run_conversations(model_dir, data_path=data, out=lambda _t: None, open_stores=lambda _tmp: aws_stores())
    # In the long histories few list questions have all their 2-4 pieces in the top 5 (0.04); there
    # the bar is that more have one.
    listed = "all@5" if which == "conversations" else "any@5"
    _show(capsys, local, aws)
    assert aws["questions"] == local["questions"] > 0
    for backend, result in (("local", local), ("aws", aws)):
        for form, per_ranking in result["results"].items():
            shipped, plain = per_ranking["shipped"], per_ranking["rrf"]
            # the bar the shipped ranking was chosen by: +0.05 any@5 overall, no kind worse by > 0.02
            assert shipped["all"]["any@5"] >= plain["all"]["any@5"] + 0.05, (backend, form)
            for kind in KINDS:
                assert shipped[kind]["any@5"] >= plain[kind]["any@5"] - 0.02, (backend, form, kind)
            # covering each part of a multi-entity question fills the top 5 with more of its pieces
            best_hit = per_ranking["best-hit"]
            assert shipped["multi-entity"]["all@5"] >= best_hit["multi-entity"]["all@5"] + 0.05, (backend, form)
            # a list question's topic, kept to the people it names, finds their pieces
            assert shipped["aggregate"][listed] >= best_hit["aggregate"][listed] + 0.05, (backend, form)
    # The same ranking on both backends. The keyword arms differ (module docstring), so the
    # whole-query ranking already differs by up to ~0.05 on fact temporal questions per half
    # (docs/search-quality.md); the shipped steps must not widen that gap by more than 0.03 on any
    # kind (fact temporal, measured 2026-12-03: any@5 / all@5 gap 0.00 / 0.04 tuning against 0.04 /
    # 0.04 for best-hit, once a named person's turn of the asked day scored x6).
    for split, per_form in local["splits"].items():
        for form, per_ranking in per_form.items():
            for kind, here in per_ranking["shipped"].items():
                there = aws["splits"][split][form]["shipped"][kind]
                before = (per_ranking["best-hit"][kind], aws["splits"][split][form]["best-hit"][kind])
                for metric in ("any@5", "all@5"):
                    gap, was = abs(here[metric] - there[metric]), abs(before[0][metric] - before[1][metric])
                    assert gap <= was + 0.03, (split, form, kind, metric, here, there, before)
                # and neither backend's shipped ranking loses any@5 against its own best-hit
                assert here["any@5"] >= before[0]["any@5"] and there["any@5"] >= before[1]["any@5"], (split, form, kind)


def with_query_stopwords(index_body: Callable[[int], dict[str, Any]]) -> Callable[[int], dict[str, Any]]:
    """The index body with a search-time analyzer that also drops the local keyword arm's stopwords
    (`fleetmem.adapters.local.sqlite._STOPWORDS`) from the query: the one analyzer difference the
    parity explanation in docs/search-quality.md blames, isolated."""
    from fleetmem.adapters.aws.opensearch_bodies import ANALYZER
    from fleetmem.adapters.local.sqlite import _STOPWORDS

    def body(dim: int) -> dict[str, Any]:
        out = index_body(dim)
        analysis = out["settings"]["analysis"]
        base = analysis["analyzer"][ANALYZER]
        analysis["filter"] = {"fleetmem_query_stop": {"type": "stop", "stopwords": sorted(_STOPWORDS)}}
        analysis["analyzer"][ANALYZER + "_query"] = {**base, "filter": [*base["filter"], "fleetmem_query_stop"]}
        for field in ("title", "text"):
            out["mappings"]["properties"][field]["search_analyzer"] = ANALYZER + "_query"
        return out

    return body


def with_best_fields(keyword_body: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    """The keyword body as it was before: the better of title (x2) and text (`best_fields`) instead
    of their sum with title x3 (`most_fields`, as the local FTS5 bm25(3.0, 1.0))."""

    def body(query: Any) -> dict[str, Any]:
        out = keyword_body(query)
        match = out["query"]["bool"]["must"][0]["multi_match"]
        match.update(type="best_fields", fields=["title^2", "text"])
        return out

    return body


EXPERIMENTS = ("stopwords", "best-fields", "stopwords+best-fields")


@pytest.mark.parametrize("experiment", EXPERIMENTS)
@pytest.mark.parametrize("which", ["default", "conversations"])
def test_experiment_on_opensearch(
    which: str,
    experiment: str,
    aws_stores: Callable[[], Any],
    model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The experiments behind the parity explanation in docs/search-quality.md: the AWS run of a set again with its
    keyword arm changed — the index's search analyzer drops the local arm's stopwords from the
    query (one difference to the local arm removed), and/or the fields are combined as before
    (`best_fields`, title x2; one difference put back). Compare each table with the AWS table of
    the plain run above (e.g. `-k "default and stopwords"`)."""
    from fleetmem.adapters.aws import opensearch, opensearch_bodies
    from fleetmem.bench.conversations import run_conversations
    from fleetmem.bench.quality import run_quality
    from fleetmem.models import SearchQuery

    if "stopwords" in experiment:
        monkeypatch.setattr(opensearch, "index_body", with_query_stopwords(opensearch.index_body))
    if "best-fields" in experiment:
        monkeypatch.setattr(opensearch_bodies, "keyword_body", with_best_fields(opensearch_bodies.keyword_body))
    stores = aws_stores()
    client, index = stores.search.client, stores.search.index
    sent = opensearch_bodies.msearch_body(SearchQuery(tenant="t", text="x"), None)[1]
    best = sent["query"]["bool"]["must"][0]["multi_match"]["type"] == "best_fields"
    assert best == ("best-fields" in experiment)
    analyzer = client.indices.get_mapping(index=index)[index]["mappings"]["properties"]["text"].get(
        "search_analyzer", opensearch_bodies.ANALYZER
    )
    analyzed = client.indices.analyze(index=index, body={"analyzer": analyzer, "text": "What is the name of the dog"})
    # the experiment is real: with the stop filter, the query side of the index drops function words
    expected = ["name", "dog"] if "stopwords" in experiment else ["what", "is", "the", "name", "of", "the", "dog"]
    assert [t["token"] for t in analyzed["tokens"]] == expected
    if which == "default":
        aws = run_quality(model_dir, out=lambda _t: None, open_stores=lambda _tmp, _embedder: stores)
        hybrid = aws["modes"]["hybrid"]
        for qtype in ("fact/lexical", "page/lexical"):
            assert hybrid[qtype]["recall@5"] == 1.0, (qtype, hybrid[qtype])
    else:
        aws = run_conversations(model_dir, out=lambda _t: None, open_stores=lambda _tmp: stores)
        for form, per_ranking in aws["results"].items():
            assert per_ranking["shipped"]["all"]["any@5"] >= per_ranking["rrf"]["all"]["any@5"] + 0.05, form
    with capsys.disabled():
        print(f"\n\naws, {which} set, experiment: {experiment}\n" + aws["table"] + "\n")
