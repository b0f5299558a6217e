"""Retrieval quality of recall: keyword-only (BM25) vs hybrid (BM25 + MiniLM, RRF), and embedder speed.

`run_quality(model_dir)` builds a deterministic evaluation set (seeded): people with facts, and
project pages with Status / Risks / Decisions sections. Every stored statement has two questions:
a *paraphrase* that shares no content word with it, and a *lexical* one that reuses its words.
Fact questions name the person, half of them by first name only (several people share first or
last names, and the same statement is stored for several people, so neither the name nor the
content alone pins the answer); page questions name nothing and must find the page by content
among pages of identical structure. Everything is ingested through the real
`dispatch("remember" | "put_page")` into a local store in a temporary directory, then asked
through `dispatch("recall")` twice over the same data: once with no embedder (keyword-only) and
once with the MiniLM embedder (hybrid).

Metrics per question type: recall@1/5/10 (answer in the top k) and MRR (rank cut at 10).
`bench_embedder(model_dir)` measures texts/s at batch 32 (onnxruntime and the numpy fallback) and
the single-text latency.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetmem.bench.quality_set import KS, RECALL_LIMIT, TENANT, EvalSet, build_eval_set


def _deps(stores: Any, embedder: Any, problem: str | None) -> Any:
    from fleetmem.ports import Deps, Diagnostics
    from fleetmem.wiring import FixedClock, SortableIds

    return Deps.over(
        stores,
        clock=FixedClock(datetime(2026, 6, 11, 9, 30, tzinfo=UTC)),
        ids=SortableIds(),
        embedder=embedder,
        llm=None,
        diagnostics=Diagnostics(embedder_problem=problem),
    )


def _metrics(ranks: list[int | None]) -> dict[str, float]:
    n = max(1, len(ranks))
    out = {f"recall@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in KS}
    out["mrr"] = sum(1.0 / r for r in ranks if r is not None) / n
    out["n"] = len(ranks)
    return out


def run_quality(
    model_dir: Path | str,
    *,
    out: Callable[[str], Any] = print,
    open_stores: Callable[[Path, Any], Any] | None = None,
) -> dict[str, Any]:
    """Ingest the evaluation set, ask every question keyword-only and hybrid, print a markdown table.

    `open_stores(tmp_dir, embedder)` picks the adapter set (default: the local SQLite stores);
    tests/aws/bench_quality_parity.py passes the AWS set on DynamoDB Local and OpenSearch.

    Returns {"modes": {mode: {qtype: metrics}}, "table": markdown, "questions": n, ...}.
    """
    from fleetmem.models import Caller
    from fleetmem.wiring import load_local_embedder, open_local

    embedder, problem = load_local_embedder(model_dir)
    if embedder is None:
        raise RuntimeError(problem or "the local embedder is unavailable")
    data = build_eval_set()
    caller = Caller(tenant=TENANT, client_id="bench", scopes=frozenset({"read", "write"}), remote=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fleetmem-quality-") as tmp:
        stores = open_stores(Path(tmp), embedder) if open_stores else open_local(Path(tmp))
        try:
            hybrid = _deps(stores, embedder, None)
            keyword = _deps(stores, None, "keyword-only baseline")
            fact_ids = _ingest(data, caller, hybrid)
            ingest_s = time.monotonic() - started
            modes: dict[str, dict[str, Any]] = {}
            latencies: dict[str, list[float]] = {}
            for mode, deps in (("keyword-only", keyword), ("hybrid", hybrid)):
                modes[mode], latencies[mode] = _ask(data, caller, deps, mode, fact_ids)
        finally:
            stores.close()
    table = quality_table(modes)
    out(table)
    return {
        "modes": modes,
        "table": table,
        "questions": len(data.questions),
        "facts": len(data.facts),
        "pages": len(data.pages),
        "ingest_seconds": round(ingest_s, 2),
        "recall_p50_ms": {m: round(statistics.median(v), 2) for m, v in latencies.items()},
        "seconds": round(time.monotonic() - started, 2),
    }


def _ingest(data: EvalSet, caller: Any, deps: Any) -> dict[str, str]:
    """Every fact and page of the set, through the real dispatch; the fact ids by the set's keys."""
    from fleetmem.transport.dispatch import dispatch

    fact_ids: dict[str, str] = {}
    for key, person, text in data.facts:
        res = dispatch(
            "remember",
            {"fact": text, "entity": person, "provenance": "quality bench"},
            caller,
            deps,
        )
        if res.is_error:
            raise RuntimeError(f"remember failed: {res.body.get('code')}")
        fact_ids[key] = res.body["id"]
    for slug, _title, content in data.pages:
        res = dispatch("put_page", {"slug": slug, "content": content}, caller, deps)
        if res.is_error:
            raise RuntimeError(f"put_page failed: {res.body.get('code')}")
    return fact_ids


def _ask(
    data: EvalSet, caller: Any, deps: Any, mode: str, fact_ids: dict[str, str]
) -> tuple[dict[str, Any], list[float]]:
    """Every question of the set in one mode: the metrics per question type, and each recall's ms."""
    from fleetmem.transport.dispatch import dispatch

    ranks: dict[str, list[int | None]] = {}
    latencies: list[float] = []
    for q in data.questions:
        t0 = time.perf_counter()
        res = dispatch("recall", {"query": q.text, "limit": RECALL_LIMIT}, caller, deps)
        latencies.append((time.perf_counter() - t0) * 1000)
        if res.is_error:
            raise RuntimeError(f"recall failed: {res.body.get('code')}")
        if mode == "hybrid" and res.body.get("search_degraded"):
            raise RuntimeError(f"hybrid recall degraded: {res.body['search_degraded']}")
        if q.qtype.startswith("fact/"):
            found = [f["fact_id"] for f in res.body["facts"]]
            wanted = {fact_ids[t] for t in q.targets}
        else:
            found = [r["slug"] for r in res.body["results"]]
            wanted = set(q.targets)
        rank = next((i for i, x in enumerate(found, start=1) if x in wanted), None)
        ranks.setdefault(q.qtype, []).append(rank)
        ranks.setdefault("all", []).append(rank)
    return {qtype: _metrics(r) for qtype, r in ranks.items()}, latencies


def quality_table(modes: dict[str, dict[str, dict[str, float]]]) -> str:
    qtypes = ["fact/paraphrase", "fact/lexical", "page/paraphrase", "page/lexical", "all"]
    lines = [
        "| question type | n | mode | recall@1 | recall@5 | recall@10 | MRR |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for qtype in qtypes:
        for mode, per_type in modes.items():
            m = per_type.get(qtype)
            if m is None:
                continue
            lines.append(
                f"| {qtype} | {int(m['n'])} | {mode} | {m['recall@1']:.2f} | {m['recall@5']:.2f} | "
                f"{m['recall@10']:.2f} | {m['mrr']:.3f} |"
            )
    return "\n".join(lines)


def bench_embedder(model_dir: Path | str, *, texts: int = 256, singles: int = 50) -> dict[str, Any]:
    """Embedding speed: texts/s at batch 32 for onnxruntime and the numpy fallback, single-text p50."""
    from fleetmem.embedder_build import ONNX_FILE, model_path
    from fleetmem.wiring import BATCH_SIZE, MiniLMEmbedder

    data = build_eval_set()
    corpus = [t for _k, _e, t in data.facts] + [q.text for q in data.questions]
    corpus = (corpus * (texts // max(1, len(corpus)) + 1))[:texts]
    result: dict[str, Any] = {
        "batch": BATCH_SIZE,
        "texts": texts,
        "onnx_mb": round((model_path(model_dir) / ONNX_FILE).stat().st_size / 1e6, 1),
    }
    # numpy first: it only runs where onnxruntime is absent, so it is timed before ORT's threads exist
    for backend in ("numpy", "onnx"):
        embedder = MiniLMEmbedder(model_dir, backend=backend)
        t0 = time.perf_counter()
        embedder.embed(corpus[:BATCH_SIZE])  # load + warm-up
        result[f"{backend}_load_s"] = round(time.perf_counter() - t0, 3)
        n = texts if backend == "onnx" else min(texts, 128)
        t0 = time.perf_counter()
        embedder.embed(corpus[:n])
        result[f"{backend}_texts_per_s"] = round(n / (time.perf_counter() - t0), 1)
        lat = []
        for text in corpus[: singles if backend == "onnx" else 20]:
            t0 = time.perf_counter()
            embedder.embed([text])
            lat.append((time.perf_counter() - t0) * 1000)
        result[f"{backend}_single_p50_ms"] = round(statistics.median(lat), 2)
    return result


if __name__ == "__main__":
    import json
    import sys

    from fleetmem.config import Settings

    model_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Settings().model_dir
    summary = run_quality(model_dir)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("table", "modes")}, indent=2))
    print(json.dumps(bench_embedder(model_dir), indent=2))
