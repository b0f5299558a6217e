"""`fleetmem bench remember-pool`: what one `remember` costs as its entity grows. A new fact is
compared with the entity's active facts (its decision pool, up to `CANDIDATE_SCAN` of them: read,
scored against the new fact's vector, the nearest decided on), so a remember on an entity holding
hundreds of facts does that work for each of them. For each `--sizes` count the bench fills an entity
of its own to that many facts and times `--calls` remember calls on it, through THE dispatch on a
SQLite store in a temporary directory. The `hash` embedder (default) leaves out the model's time,
which does not depend on the entity; `--embedder minilm` puts it in. Every call must save its fact
(`inserted`); the bench fails otherwise."""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fleetmem.console import CommandFailed
from fleetmem.memory.fact_dedup import CANDIDATE_SCAN
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch
from fleetmem.wiring import _VOCAB, SortableIds, SystemClock, open_local

CALLER = Caller(tenant="bench-pool", client_id="bench", scopes=frozenset({"read", "write"}), remote=True)
DEFAULT_SIZES = (0, 100, CANDIDATE_SCAN)


def _embedder(name: str, model_dir: Path | None) -> Any:
    if name == "minilm":
        from fleetmem.wiring import MiniLMEmbedder

        if model_dir is None:
            raise SystemExit("bench remember-pool: --embedder minilm needs the model directory")
        return MiniLMEmbedder(model_dir)
    from fleetmem.wiring import HashEmbedder

    return HashEmbedder()


def _remember(deps: Deps, rng: random.Random, entity: str) -> float:
    # fresh words and a number of its own: a new fact, never a duplicate or an update of another
    text = " ".join(rng.choice(_VOCAB[50:5000]) for _ in range(9)) + f" measures {rng.randint(1, 10**9)}"
    started = time.perf_counter()
    result = dispatch("remember", {"fact": text, "entity": entity, "provenance": "bench"}, CALLER, deps)
    elapsed = (time.perf_counter() - started) * 1000
    if result.is_error or result.body.get("status") != "inserted":
        raise RuntimeError(f"bench remember-pool: a remember was not saved as a new fact: {result.body}")
    return elapsed


def run_pool_bench(
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    calls: int = 40,
    embedder: str = "hash",
    model_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    emb = _embedder(embedder, model_dir)
    rng = random.Random(49)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        stores = open_local(Path(tmp))
        try:
            deps = Deps.over(stores, clock=SystemClock(), ids=SortableIds(), embedder=emb)
            for size in sorted(set(sizes)):
                entity = f"projects/bench-pool-{size}"
                log(f"bench remember-pool: filling {entity} with {size} facts")
                for _ in range(size):
                    _remember(deps, rng, entity)
                # each timed call adds one fact: the entity grows from `size` to `size + calls - 1`
                samples = [_remember(deps, rng, entity) for _ in range(calls)]
                rows.append(
                    {
                        "facts_on_entity": size,
                        "pool": min(size, CANDIDATE_SCAN),
                        "calls": calls,
                        "p50_ms": round(statistics.median(samples), 3),
                        "p90_ms": round(statistics.quantiles(samples, n=10)[-1], 3) if calls > 1 else samples[0],
                    }
                )
        finally:
            stores.close()
    return {"embedder": getattr(emb, "model_id", embedder), "rows": rows}


def render(doc: dict[str, Any]) -> str:
    lines = [
        f"remember on one entity as it grows (SQLite, embedder `{doc['embedder']}`):",
        "| active facts on the entity | pool scored | calls | p50 ms | p90 ms |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in doc["rows"]:
        lines.append(f"| {r['facts_on_entity']} | {r['pool']} | {r['calls']} | {r['p50_ms']:.2f} | {r['p90_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str], *, model_dir: Path | None = None, log: Callable[[str], None] = print) -> str:
    p = argparse.ArgumentParser(prog="fleetmem bench remember-pool", description=__doc__)
    p.add_argument(
        "--sizes",
        default=",".join(str(s) for s in DEFAULT_SIZES),
        help="comma-separated counts of active facts on the entity (default: %(default)s)",
    )
    p.add_argument("--calls", type=int, default=40, help="timed remember calls at each size (default: %(default)s)")
    p.add_argument("--embedder", choices=("hash", "minilm"), default="hash")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = p.parse_args(list(argv))
    parts = [s.strip() for s in args.sizes.split(",") if s.strip()]
    if not parts or not all(s.isdigit() for s in parts) or args.calls < 1:
        raise CommandFailed.usage(
            f"bench remember-pool: --sizes takes comma-separated whole numbers and --calls a count of at least 1 "
            f"(got --sizes {args.sizes!r} --calls {args.calls})",
            "e.g. `fleetmem bench remember-pool --sizes 0,100,500 --calls 40`",
        )
    sizes = [int(s) for s in parts]
    doc = run_pool_bench(sizes=sizes, calls=args.calls, embedder=args.embedder, model_dir=model_dir, log=log)
    return json.dumps(doc, indent=2) + "\n" if args.json else render(doc)
