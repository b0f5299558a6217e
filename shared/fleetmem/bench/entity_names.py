"""`fleetmem bench entity-names`: one `entity{names}` call of 50 names against 5 single `entity{name}`
calls (D35), measured where a caller pays for them:

- in process, through THE dispatch on a SQLite store (the op layer every verb Lambda runs), and
- over MCP HTTP (JSON-RPC `tools/call` on one keep-alive connection) against a real `fleetmem serve`
  this bench starts on 127.0.0.1 over the same store, or, with `--url URL --token T`, against any
  running fleetmem endpoint (e.g. `scripts/stack`, the AWS shape: API Gateway front, the edge and
  verb functions under the Lambda emulator, DynamoDB Local), seeded over the wire.

The store is seeded with people and company pages (titles, aliases, `[[…]]` links between them) and
facts about a quarter of them. The 50 names mix exact titles, aliases, slugs, bare slug suffixes and
names no page has (about one in five); the 5 singles are drawn the same way. Every round draws fresh
names and the two arms alternate which goes first. Reports each arm's p50 and the ratio batch / 5
singles per setting (the goal: below 1). No embedder: entity never embeds."""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fleetmem.bench.runner import TENANT, HttpCaller, http_server
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.dispatch import dispatch
from fleetmem.wiring import _VOCAB, SortableIds, SystemClock, open_local

BATCH = 50
SINGLES = 5
CALLER = Caller(tenant=TENANT, client_id="bench-agent", scopes=frozenset({"read", "write"}), remote=True)
#: a tool call: (tool, arguments) -> (is_error, body)
Call = Callable[[str, dict[str, Any]], tuple[bool, Any]]


def in_process(deps: Deps) -> Call:
    def call(tool: str, args: dict[str, Any]) -> tuple[bool, Any]:
        result = dispatch(tool, args, CALLER, deps)
        return result.is_error, result.body

    return call


def over_http(url: str, token: str) -> tuple[Call, Callable[[], None]]:
    """`tools/call` over one keep-alive connection, as a stateless MCP client sends it; returns the
    call and a close."""
    caller = HttpCaller(url, token)
    return caller.answer, caller.close


def _word(rng: random.Random) -> str:
    return rng.choice(_VOCAB[200:5000]).capitalize()


def seed(call: Call, rng: random.Random, pages: int, log: Callable[[str], None]) -> list[dict[str, str]]:
    """`pages` people and companies; returns how each can be named."""
    out: list[dict[str, str]] = []
    for i in range(pages):
        if i and i % 500 == 0:
            log(f"bench entity-names: seeded {i}/{pages} pages")
        folder, kind = ("people", "person") if i % 3 else ("companies", "company")
        title = f"{_word(rng)} {_word(rng)} {i}"
        slug = f"{folder}/{title.lower().replace(' ', '-')}"
        alias = f"{_word(rng)}{i}"
        links = "".join(f" Works with [[{o['slug']}]]." for o in rng.sample(out, min(3, len(out))))
        content = (
            f"---\ntitle: {title}\ntype: {kind}\naliases: [{alias}]\n---\n# {title}\n{title} is a {kind}.{links}\n"
        )
        failed, body = call("put_page", {"slug": slug, "content": content})
        if failed:
            raise RuntimeError(f"put_page failed while seeding: {body}")
        if i % 4 == 0:
            fact = {"fact": f"{title} prefers {_word(rng)}", "provenance": "bench", "entity": slug}
            failed, body = call("remember", fact)
            if failed:
                raise RuntimeError(f"remember failed while seeding: {body}")
        out.append({"title": title, "alias": alias, "slug": slug, "suffix": slug.split("/", 1)[1]})
    return out


def draw_names(rng: random.Random, known: list[dict[str, str]], n: int, round_no: int) -> list[str]:
    names = []
    for i in range(n):
        if rng.random() < 0.2:
            names.append(f"Nobody {_word(rng)} {round_no}-{i}")
        else:
            names.append(rng.choice(known)[rng.choice(("title", "alias", "slug", "suffix"))])
    return names


def _singles(call: Call, names: list[str]) -> None:
    for name in names:
        failed, body = call("entity", {"name": name})
        if failed:
            raise RuntimeError(f"entity failed: {body}")


def _batch(call: Call, names: list[str]) -> None:
    failed, body = call("entity", {"names": names})
    if failed or len(body["results"]) != len(dict.fromkeys(names)):
        raise RuntimeError(f"entity names failed: {body}")


def measure(call: Call, known: list[dict[str, str]], rng: random.Random, rounds: int) -> tuple[float, float]:
    """(p50 of 5 single calls, p50 of one batch of 50) in ms, after one warm-up round."""
    samples: dict[str, list[float]] = {"singles": [], "batch": []}
    _singles(call, draw_names(rng, known, SINGLES, -1))
    _batch(call, draw_names(rng, known, BATCH, -1))
    arms: list[tuple[str, Callable[[Call, list[str]], None], int]] = [
        ("singles", _singles, SINGLES),
        ("batch", _batch, BATCH),
    ]
    for r in range(rounds):
        for label, run, n in arms if r % 2 == 0 else arms[::-1]:
            names = draw_names(rng, known, n, r)
            started = time.perf_counter()
            run(call, names)
            samples[label].append((time.perf_counter() - started) * 1000)
    return statistics.median(samples["singles"]), statistics.median(samples["batch"])


def report(rows: list[tuple[str, float, float]], *, pages: int, rounds: int) -> str:
    lines = [
        f"entity, {BATCH} names in one call vs {SINGLES} single calls ({pages} pages, {rounds} rounds, p50 ms):",
        f"| where | {SINGLES} single entity calls | one entity{{names}} of {BATCH} | ratio batch/{SINGLES} singles |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {where} | {s:.1f} | {b:.1f} | {b / s:.2f} |" for where, s, b in rows]
    return "\n".join(lines) + "\n"


def run_local(*, pages: int, rounds: int, log: Callable[[str], None] = print) -> str:
    """In process and over HTTP against a `fleetmem serve` over the same SQLite store."""
    rng = random.Random(32)
    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        stores = open_local(Path(tmp))
        deps = Deps.over(stores, clock=SystemClock(), ids=SortableIds(), embedder=None, llm=None)
        log(f"bench entity-names: seeding {pages} pages")
        known = seed(in_process(deps), rng, pages, log)
        log("bench entity-names: in process")
        rows.append(("in process (SQLite, dispatch)", *measure(in_process(deps), known, rng, rounds)))
        stores.close()
        log("bench entity-names: over HTTP (fleetmem serve)")
        with http_server(Path(tmp), "none") as (url, token):
            call, close = over_http(url, token)
            try:
                rows.append(("MCP over HTTP (fleetmem serve)", *measure(call, known, rng, rounds)))
            finally:
                close()
    return report(rows, pages=pages, rounds=rounds)


def run_remote(url: str, token: str, *, pages: int, rounds: int, log: Callable[[str], None] = print) -> str:
    """Over MCP HTTP against a running endpoint, seeded over the wire (its surface needs `put_page`)."""
    rng = random.Random(32)
    call, close = over_http(url, token)
    try:
        log(f"bench entity-names: seeding {pages} pages at {url}")
        known = seed(call, rng, pages, log)
        log("bench entity-names: measuring")
        row = (f"MCP over HTTP ({url})", *measure(call, known, rng, rounds))
    finally:
        close()
    return report([row], pages=pages, rounds=rounds)


def main(argv: Sequence[str], *, log: Callable[[str], None] = print) -> str:
    p = argparse.ArgumentParser(prog="fleetmem bench entity-names", description=__doc__)
    p.add_argument("--pages", type=int, default=2000, help="pages seeded (a third companies, the rest people)")
    p.add_argument("--rounds", type=int, default=30, help="measured rounds per arm (after one warm-up round)")
    p.add_argument("--url", help="a running fleetmem MCP endpoint to measure instead (seeded over the wire)")
    p.add_argument("--token", help="a read+write bearer token for --url")
    args: Any = p.parse_args(list(argv))
    if bool(args.url) != bool(args.token):
        p.error("--url and --token go together")
    if args.url:
        return run_remote(args.url, args.token, pages=args.pages, rounds=args.rounds, log=log)
    return run_local(pages=args.pages, rounds=args.rounds, log=log)
