"""Where `recall {query}` spends its time, arm by arm, on the latency benchmark's corpus.

    fleetmem bench recall-arms [--pages 20000] [--runs 300] [--embedder hash] [--data-dir DIR] [--json]

The corpus is `scripts/bench latency`'s (`runner.ensure_corpus`, reused from `--data-dir`), the
calls its `recall (query)` workload: two of the corpus words, `limit` 10, through `dispatch` in this
process. Each part is timed by a `perf_counter` wrapper around the function that does it, installed
for the run and removed after (no profiler):

- embedding: `search.query_vector` (the query, its parts and topic; a repeated query is a cache hit);
- search: `SqliteSearchIndex.search` (one hybrid search: both arms of one query text), of which
  - keyword arm: `_keyword` (the FTS5 MATCH and its BM25 ranking),
  - cosine scan: `_all_scores` (every row of the tenant's matrix against the query; on the
    prefetch thread while the keyword arm runs, so it overlaps it),
  - vector arm: `_vector` (mask, exact top k, row fetch; the scan too when it was not prefetched);
- the rest: the whole call less embedding and searches (fusion, the facts read, evidence,
  redaction, packing, validation).

Per part: the total per call (ms, mean over the calls), the p50 of that per-call total, and in how
many calls the part ran (a scan kept from an earlier call is not run again). The scan
overlaps the keyword arm, so the parts of `search` add up to more than it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fleetmem.bench.corpus import WORDS
from fleetmem.bench.runner import CALLER, ensure_corpus
from fleetmem.memory import search as search_module
from fleetmem.transport.dispatch import dispatch

#: The search index's own parts: named on the class of the opened store (`type(deps.search)`, the
#: local `SqliteSearchIndex`), so the benchmark names no adapter.
INDEX = "search index"
#: (label, owner, attribute) of each timed part, in report order.
PARTS: list[tuple[str, Any, str]] = [
    ("embedding (`query_vector`)", search_module, "query_vector"),
    ("search (`SqliteSearchIndex.search`, both arms)", INDEX, "search"),
    ("keyword arm (`_keyword`: FTS5 BM25)", INDEX, "_keyword"),
    ("cosine scan (`_all_scores`, overlaps the keyword arm)", INDEX, "_all_scores"),
    ("vector arm (`_vector`: mask, top k, rows)", INDEX, "_vector"),
]


class _Clock:
    """Milliseconds spent in each part during the current call, from any thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: dict[str, float] = defaultdict(float)

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = (time.perf_counter() - t) * 1000
                with self.lock:
                    self.now[label] += spent

        return timed

    def take(self) -> dict[str, float]:
        with self.lock:
            out, self.now = dict(self.now), defaultdict(float)
        return out


@contextmanager
def _timed(clock: _Clock, index: type) -> Iterator[None]:
    owners = [index if owner == INDEX else owner for _, owner, _ in PARTS]
    saved = [(owner, name, getattr(owner, name)) for owner, (_, _, name) in zip(owners, PARTS, strict=True)]
    try:
        for (label, _, name), (owner, _, real) in zip(PARTS, saved, strict=True):
            setattr(owner, name, clock.wrap(label, real))
        yield
    finally:
        for owner, name, real in saved:
            setattr(owner, name, real)


def run_arms(data_dir: Path, *, pages: int, runs: int, embedder: str) -> dict[str, Any]:
    deps, _, _ = ensure_corpus(data_dir, pages, embedder)
    rng = random.Random("recall (query)")  # the latency benchmark's own workload and seed
    queries = [{"query": " ".join(rng.sample(WORDS, 2)), "limit": 10} for _ in range(runs + 20)]
    for args in queries[:20]:  # warm the matrix and the caches, as a running server has them
        dispatch("recall", args, CALLER, deps, transport="cli")
    clock = _Clock()
    per_call: list[dict[str, float]] = []
    with _timed(clock, type(deps.search)):
        for args in queries[20:]:
            clock.take()
            t = time.perf_counter()
            dispatch("recall", args, CALLER, deps, transport="cli")
            whole = (time.perf_counter() - t) * 1000
            parts = clock.take()
            parts["whole call"] = whole
            embed, search = parts.get(PARTS[0][0], 0.0), parts.get(PARTS[1][0], 0.0)
            parts["the rest (fusion, facts read, evidence, packing)"] = whole - embed - search
            per_call.append(parts)
    labels = ["whole call", *(label for label, _, _ in PARTS), "the rest (fusion, facts read, evidence, packing)"]
    rows = [
        {
            "part": label,
            "mean_ms": round(statistics.fmean(c.get(label, 0.0) for c in per_call), 2),
            "p50_ms": round(statistics.median(c.get(label, 0.0) for c in per_call), 2),
            "calls_reached": sum(label in c for c in per_call),
        }
        for label in labels
    ]
    return {"pages": pages, "runs": runs, "embedder": embedder, "rows": rows}


def render(report: dict[str, Any]) -> str:
    lines = [
        f"recall {{query, limit: 10}} at {report['pages']:,} pages, {report['runs']} calls, "
        f"embedder {report['embedder']} (ms per call)",
        "",
        "| part | mean | p50 |",
        "|---|---:|---:|",
    ]
    lines += [f"| {r['part']} | {r['mean_ms']} | {r['p50_ms']} |" for r in report["rows"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> str:
    p = argparse.ArgumentParser(
        prog="fleetmem bench recall-arms", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pages", type=int, default=20_000)
    p.add_argument("--runs", type=int, default=300)
    p.add_argument("--embedder", choices=("hash", "minilm"), default="hash")
    p.add_argument("--data-dir", default=None, help="the corpus directory (reused across runs; default: a temp dir)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        report = run_arms(Path(args.data_dir or tmp), pages=args.pages, runs=args.runs, embedder=args.embedder)
    return json.dumps(report, indent=2) if args.json else render(report)
