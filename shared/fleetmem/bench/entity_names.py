"""`fleetmem bench entity-names`: one `entity{names}` call of 50 names against 5 single `entity{name}`
calls, through THE dispatch on a SQLite store seeded with people and company pages (titles,
aliases, links between them) and facts about some of them (D35). The 50 names mix exact titles,
aliases, slugs, bare slug suffixes and names no page has (about one in five); the 5 singles are drawn
the same way. Every round draws fresh names. Reports each arm's p50 and the ratio batch / 5 singles
(the goal: below 1, a batch of 50 costs less than 5 cards). No embedder: entity never embeds."""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch
from fleetmem.wiring import _VOCAB, SortableIds, SystemClock, open_local

BATCH = 50
SINGLES = 5
CALLER = Caller(tenant="bench-names", client_id="bench", scopes=frozenset({"read", "write"}), remote=True)


def _word(rng: random.Random) -> str:
    return rng.choice(_VOCAB[200:5000]).capitalize()


def _seed(deps: Deps, rng: random.Random, pages: int) -> list[dict[str, str]]:
    """`pages` people and companies; returns how each can be named."""
    out: list[dict[str, str]] = []
    for i in range(pages):
        folder, kind = ("people", "person") if i % 3 else ("companies", "company")
        title = f"{_word(rng)} {_word(rng)} {i}"
        slug = f"{folder}/{title.lower().replace(' ', '-')}"
        alias = f"{_word(rng)}{i}"
        links = "".join(f" Works with [[{o['slug']}]]." for o in rng.sample(out, min(3, len(out))))
        content = (
            f"---\ntitle: {title}\ntype: {kind}\naliases: [{alias}]\n---\n# {title}\n{title} is a {kind}.{links}\n"
        )
        result = dispatch("put_page", {"slug": slug, "content": content}, CALLER, deps)
        assert not result.is_error, result.body
        if i % 4 == 0:
            fact = {"fact": f"{title} prefers {_word(rng)}", "provenance": "bench", "entity": slug}
            assert not dispatch("remember", fact, CALLER, deps).is_error
        out.append({"title": title, "alias": alias, "slug": slug, "suffix": slug.split("/", 1)[1]})
    return out


def _names(rng: random.Random, known: list[dict[str, str]], n: int, round_no: int) -> list[str]:
    names = []
    for i in range(n):
        if rng.random() < 0.2:
            names.append(f"Nobody {_word(rng)} {round_no}-{i}")
        else:
            names.append(rng.choice(known)[rng.choice(("title", "alias", "slug", "suffix"))])
    return names


def _time(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def _singles(deps: Deps, names: list[str]) -> None:
    for name in names:
        result = dispatch("entity", {"name": name}, CALLER, deps)
        assert not result.is_error, result.body


def _batch(deps: Deps, names: list[str]) -> None:
    result = dispatch("entity", {"names": names}, CALLER, deps)
    assert not result.is_error and len(result.body["results"]) == len(dict.fromkeys(names)), result.body


def run_entity_names_bench(*, pages: int = 2000, rounds: int = 30, log: Callable[[str], None] = print) -> str:
    rng = random.Random(32)
    singles: list[float] = []
    batches: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        stores = open_local(Path(tmp))
        deps = Deps.over(stores, clock=SystemClock(), ids=SortableIds(), embedder=None, llm=None)
        log(f"bench entity-names: seeding {pages} pages")
        known = _seed(deps, rng, pages)
        _singles(deps, _names(rng, known, SINGLES, -1))
        _batch(deps, _names(rng, known, BATCH, -1))
        for r in range(rounds):
            if r % 10 == 0:
                log(f"bench entity-names: round {r + 1}/{rounds}")
            arms: list[tuple[list[float], Callable[[Deps, list[str]], None], int]] = [
                (singles, _singles, SINGLES),
                (batches, _batch, BATCH),
            ]
            for samples, run, n in arms if r % 2 == 0 else arms[::-1]:
                names = _names(rng, known, n, r)
                samples.append(_time(lambda run=run, names=names: run(deps, names)))
        stores.close()
    single_p50, batch_p50 = statistics.median(singles), statistics.median(batches)
    return (
        f"entity, {BATCH} names in one call vs {SINGLES} single calls (SQLite, {pages} pages, {rounds} rounds):\n"
        f"| arm | p50 ms |\n|---|---:|\n"
        f"| {SINGLES} single entity calls | {single_p50:.1f} |\n"
        f"| one entity{{names}} of {BATCH} | {batch_p50:.1f} |\n"
        f"ratio batch/{SINGLES} singles: {batch_p50 / single_p50:.2f}\n"
    )


def main(argv: Sequence[str], *, log: Callable[[str], None] = print) -> str:
    p = argparse.ArgumentParser(prog="fleetmem bench entity-names", description=__doc__)
    p.add_argument("--pages", type=int, default=2000, help="pages seeded (a third companies, the rest people)")
    p.add_argument("--rounds", type=int, default=30, help="measured rounds per arm (after one warm-up round)")
    args: Any = p.parse_args(list(argv))
    return run_entity_names_bench(pages=args.pages, rounds=args.rounds, log=log)
