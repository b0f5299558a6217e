"""`fleetmem bench batch`: one `remember{items}` call of 20 facts against the same 20 facts as 20
single remember calls, through THE dispatch on a SQLite store with the real MiniLM embedder (D26).
Every round uses fresh texts (the embedder caches recent vectors) spread over a few entities, so
both arms run the same dedup and supersession decisions. Reports each arm's p50, their ratio, the
batch against one single remember, and the embedder alone on one text and on 20 (the model's own
share, which no batching of the store's work removes)."""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch
from fleetmem.wiring import _VOCAB, MiniLMEmbedder, SortableIds, SystemClock, open_local

BATCH = 20
CALLER = Caller(tenant="bench-batch", client_id="bench", scopes=frozenset({"read", "write"}), remote=True)


def _facts(rng: random.Random, round_no: int, arm: str) -> list[dict[str, Any]]:
    return [
        {
            "fact": f"{arm} {round_no}.{i}: "
            + " ".join(rng.choice(_VOCAB[50:5000]) for _ in range(8))
            + f" costs {rng.randint(1, 999)} units",
            "entity": f"projects/bench-batch-{i % 4}",
        }
        for i in range(BATCH)
    ]


def _time(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def _singles(deps: Deps, facts: list[dict[str, Any]], each: list[float] | None = None) -> None:
    for f in facts:
        started = time.perf_counter()
        result = dispatch("remember", {**f, "provenance": "bench"}, CALLER, deps)
        assert not result.is_error, result.body
        if each is not None:
            each.append((time.perf_counter() - started) * 1000)


def _batch(deps: Deps, facts: list[dict[str, Any]]) -> None:
    result = dispatch("remember", {"items": facts, "provenance": "bench"}, CALLER, deps)
    assert not result.is_error and result.body["saved"] == BATCH, result.body


def run_batch_bench(model_dir: Path, *, rounds: int = 15, log: Callable[[str], None] = print) -> str:
    embedder = MiniLMEmbedder(model_dir)
    rng = random.Random(26)
    singles: list[float] = []
    batches: list[float] = []
    one_call: list[float] = []
    embed_one: list[float] = []
    embed_all: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        stores = open_local(Path(tmp))
        deps = Deps.over(stores, clock=SystemClock(), ids=SortableIds(), embedder=embedder)
        _singles(deps, _facts(rng, -1, "warm single"))
        _batch(deps, _facts(rng, -1, "warm batch"))
        for r in range(rounds):
            log(f"bench batch: round {r + 1}/{rounds}")
            # alternate which arm goes first so neither always meets the larger store
            arms: list[tuple[str, list[float], Callable[[Deps, list[dict[str, Any]]], None]]] = [
                ("single", singles, partial(_singles, each=one_call)),
                ("batch", batches, _batch),
            ]
            for name, samples, run in arms if r % 2 == 0 else arms[::-1]:
                facts = _facts(rng, r, name)
                samples.append(_time(partial(run, deps, facts)))
            one = [_facts(rng, r, "embed one")[0]["fact"]]
            many = [f["fact"] for f in _facts(rng, r, "embed many")]
            embed_one.append(_time(partial(embedder.embed, one)))
            embed_all.append(_time(partial(embedder.embed, many)))
        stores.close()
    single_p50, batch_p50 = statistics.median(singles), statistics.median(batches)
    one_p50 = statistics.median(one_call)
    embed_one_p50, embed_all_p50 = statistics.median(embed_one), statistics.median(embed_all)
    return (
        f"remember, {BATCH} facts (SQLite, MiniLM `{embedder.model_id}`, {rounds} rounds):\n"
        f"| arm | p50 ms |\n|---|---:|\n"
        f"| {BATCH} single remember calls | {single_p50:.1f} |\n"
        f"| one remember{{items}} of {BATCH} | {batch_p50:.1f} |\n"
        f"| one single remember call | {one_p50:.1f} |\n"
        f"| the embedder alone, 1 text | {embed_one_p50:.1f} |\n"
        f"| the embedder alone, {BATCH} texts in one call | {embed_all_p50:.1f} |\n"
        f"ratio batch/singles: {batch_p50 / single_p50:.2f}\n"
        f"batch / one single remember: {batch_p50 / one_p50:.1f}x "
        f"(the embedder alone on {BATCH} texts: {embed_all_p50 / one_p50:.1f}x)\n"
    )


def main(argv: Sequence[str], *, model_dir: Path, log: Callable[[str], None] = print) -> str:
    p = argparse.ArgumentParser(prog="fleetmem bench batch", description=__doc__)
    p.add_argument("--rounds", type=int, default=15, help="measured rounds per arm (after one warm-up round)")
    args = p.parse_args(list(argv))
    return run_batch_bench(model_dir, rounds=args.rounds, log=log)
