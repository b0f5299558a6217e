"""Search speed on the embedded default: embedding throughput, `recall {query}` end to end, and
memory with a large vector index.

    scripts/bench search [--pages 20000] [--chunks-per-page 2] [--big-chunks 200000] [--runs 200]

- Embedding: texts/s at batch 32 and single-text p50 of the real MiniLM (`bench_embedder`).
- recall: a store seeded with N synthetic pages, their chunks indexed for BM25 and carrying unit
  vectors tagged with the MiniLM model id, then `recall {query}` through `dispatch` — the query is
  embedded by the real model each time (distinct queries, so no cache hit), both arms run over
  the whole index and are fused. Two kinds of query: three random words (naming nobody), and a
  question naming someone ("What did Orbit River say about kettle summit?"), which also embeds and
  searches its topic without the name (`ranking.topic`); its p50 is also given as a multiple of
  the first kind's. The chunk vectors are random rather than model output: latency
  depends on the matrix size, not on its values (ranking quality is `scripts/bench quality`).
- Memory: the peak RSS growth of loading a tenant's matrix of `--big-chunks` vectors, and the
  search latency over it.
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleetmem.bench.quality import bench_embedder
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch
from fleetmem.wiring import _VOCAB, _WORDS, MiniLMEmbedder, SortableIds, SystemClock, open_local, seed

TENANT = "bench"
CALLER = Caller(tenant=TENANT, client_id="bench", scopes=frozenset({"read"}), remote=True)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _percentiles(fn: Callable[[int], object], runs: int) -> dict[str, float]:
    times = []
    for i in range(runs):
        t = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 2),
    }


def _queries(n: int) -> list[str]:
    rng = random.Random(3)
    return [" ".join(rng.choice(_VOCAB[50:5000]) for _ in range(3)) + f" {i}" for i in range(n)]


def named_questions(n: int) -> list[str]:
    """Distinct questions naming someone as the seeded pages are titled ("Orbit River")."""
    rng = random.Random(4)
    return [
        f"What did {rng.choice(_WORDS).title()} {rng.choice(_WORDS).title()} say about "
        f"{rng.choice(_VOCAB[50:5000])} {rng.choice(_VOCAB[50:5000])} {i}?"
        for i in range(n)
    ]


def _seeded(data_dir: Path, *, pages: int, chunks_per_page: int, model_id: str, dim: int, log: Callable) -> Any:
    stores = open_local(data_dir)
    if not stores.page_listing.list(TENANT, world_only=False, limit=1):
        t = time.perf_counter()
        log(f"seeding {pages:,} pages x {chunks_per_page} chunks into {data_dir} ...")
        seed(stores, tenant=TENANT, pages=pages, chunks_per_page=chunks_per_page, model=model_id, dim=dim)
        log(f"seeded in {time.perf_counter() - t:.0f} s")
    return stores


def run_search_bench(
    model_dir: Path,
    *,
    pages: int = 20_000,
    chunks_per_page: int = 2,
    big_chunks: int = 200_000,
    runs: int = 200,
    data_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    out: dict[str, Any] = {"embedding": bench_embedder(model_dir)}
    embedder = MiniLMEmbedder(model_dir)
    with tempfile.TemporaryDirectory() as tmp:
        root = data_dir or Path(tmp)
        stores = _seeded(
            root / f"search-{pages}",
            pages=pages,
            chunks_per_page=chunks_per_page,
            model_id=embedder.model_id,
            dim=embedder.dim,
            log=log,
        )
        deps = Deps.over(stores, clock=SystemClock(), ids=SortableIds(), embedder=embedder)
        # Distinct queries throughout: the embedder caches recent query vectors.
        queries = _queries(2 * runs + 2)
        big_queries = queries[runs + 1 :]
        t = time.perf_counter()
        first = dispatch("recall", {"query": queries[-1], "limit": 10}, CALLER, deps)
        out["recall_first_ms"] = round((time.perf_counter() - t) * 1000, 1)
        out["recall_degraded"] = first.body.get("search_degraded")
        out["recall"] = _percentiles(
            lambda i: dispatch("recall", {"query": queries[i], "limit": 10}, CALLER, deps), runs
        )
        named = named_questions(runs)
        out["recall_named"] = _percentiles(
            lambda i: dispatch("recall", {"query": named[i], "limit": 10}, CALLER, deps), runs
        )
        out["recall_chunks"] = pages * chunks_per_page
        stores.close()
        if big_chunks:
            big_pages = max(1, big_chunks // 4)
            big = _seeded(
                root / f"search-big-{big_chunks}",
                pages=big_pages,
                chunks_per_page=4,
                model_id=embedder.model_id,
                dim=embedder.dim,
                log=log,
            )
            deps = Deps.over(big, clock=SystemClock(), ids=SortableIds(), embedder=embedder)
            before = _rss_mb()
            t = time.perf_counter()
            dispatch("recall", {"query": big_queries[-1], "limit": 10}, CALLER, deps)
            out["big_first_ms"] = round((time.perf_counter() - t) * 1000, 1)
            out["big_rss_growth_mb"] = round(_rss_mb() - before, 1)
            out["big_rss_mb"] = round(_rss_mb(), 1)
            out["big_recall"] = _percentiles(
                lambda i: dispatch("recall", {"query": big_queries[i], "limit": 10}, CALLER, deps), min(runs, 50)
            )
            out["big_chunks"] = big_pages * 4
            big.close()
    return out


def render(r: dict[str, Any]) -> str:
    e = r["embedding"]
    lines = [
        "| measure | value |",
        "|---|---:|",
        f"| MiniLM texts/s, batch {e['batch']} (onnxruntime) | {e['onnx_texts_per_s']} |",
        f"| MiniLM texts/s, batch {e['batch']} (numpy fallback) | {e['numpy_texts_per_s']} |",
        f"| MiniLM single text p50 (onnxruntime) | {e['onnx_single_p50_ms']} ms |",
        f"| recall(query) p50 / p99, {r['recall_chunks']:,} chunks | "
        f"{r['recall']['p50_ms']} / {r['recall']['p99_ms']} ms |",
        f"| recall(question naming someone) p50 / p99, {r['recall_chunks']:,} chunks | "
        f"{r['recall_named']['p50_ms']} / {r['recall_named']['p99_ms']} ms "
        f"({r['recall_named']['p50_ms'] / max(r['recall']['p50_ms'], 1e-9):.2f}x the query's p50) |",
        f"| recall(query) first call (loads the vector matrix) | {r['recall_first_ms']} ms |",
    ]
    if "big_chunks" in r:
        lines += [
            f"| recall(query) p50 / p99, {r['big_chunks']:,} chunks | "
            f"{r['big_recall']['p50_ms']} / {r['big_recall']['p99_ms']} ms |",
            f"| first call at {r['big_chunks']:,} chunks (matrix load) | {r['big_first_ms']} ms |",
            f"| RSS growth loading {r['big_chunks']:,} vectors / process peak RSS | "
            f"{r['big_rss_growth_mb']} MB / {r['big_rss_mb']} MB |",
        ]
    if r.get("recall_degraded"):
        lines.append(f"\nsearch was degraded: {r['recall_degraded']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str], *, model_dir: Path, log: Callable[[str], None]) -> str:
    p = argparse.ArgumentParser(
        prog="fleetmem bench search", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pages", type=int, default=20_000)
    p.add_argument("--chunks-per-page", type=int, default=2)
    p.add_argument("--big-chunks", type=int, default=200_000, help="0 skips the large-index memory run")
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--data-dir", default=None, help="keep the seeded stores here (reused across runs)")
    a = p.parse_args(argv)
    r = run_search_bench(
        model_dir,
        pages=a.pages,
        chunks_per_page=a.chunks_per_page,
        big_chunks=a.big_chunks,
        runs=a.runs,
        data_dir=Path(a.data_dir) if a.data_dir else None,
        log=log,
    )
    return render(r)
