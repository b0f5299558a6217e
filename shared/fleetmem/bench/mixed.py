"""`fleetmem bench --concurrency N --mixed`: fleet-scale throughput over real MCP sessions.

A real `fleetmem serve` runs on 127.0.0.1 over the seeded corpus; N concurrent MCP clients (the
official `mcp` client over streamable HTTP, one session each, as agents connect) issue a mixed
workload — recall, entity, remember, context_pack, put_page, delta — for a fixed duration. The
report gives calls/s, errors by code and p50/p99 per verb. Every loop is bounded by the duration
(and a per-call timeout); the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetmem.bench.corpus import HUBS, WORDS, Corpus, slug_for
from fleetmem.config import Settings

#: (verb, weight): reads dominate, as in an agent fleet; every write verb is present.
MIX: tuple[tuple[str, int], ...] = (
    ("recall", 35),
    ("entity", 20),
    ("remember", 15),
    ("context_pack", 10),
    ("delta", 10),
    ("put_page", 10),
)
CALL_TIMEOUT = 30.0

MakeArgs = Callable[[random.Random, int, int], dict[str, Any]]


def mixed_workload(corpus: Corpus) -> dict[str, MakeArgs]:
    """Arguments per verb from (rng, client, i). recall asks in common words, as agents do
    ("which pricing does Person 000007 prefer": `pricing` and `person` are in half the corpus);
    context_pack asks for the hub entities (hundreds of backlinks each)."""
    targets, titles, n = corpus.targets, corpus.target_titles, corpus.pages
    hubs = targets[: min(HUBS, len(targets))]

    def recall(r: random.Random, c: int, i: int) -> dict[str, Any]:
        return {"query": f"which {r.choice(WORDS)} does {r.choice(titles)} prefer", "limit": 10}

    def entity(r: random.Random, c: int, i: int) -> dict[str, Any]:
        return {"name": r.choice(titles) if r.random() < 0.5 else f"alias-{r.randrange(n):06d}"}

    def remember(r: random.Random, c: int, i: int) -> dict[str, Any]:
        return {
            "fact": f"{r.choice(titles)} prefers {r.choice(WORDS)} reviews (client {c}, call {i})",
            "provenance": "bench mixed",
            "entity": r.choice(targets),
        }

    def context_pack(r: random.Random, c: int, i: int) -> dict[str, Any]:
        return {"entities": ",".join(hubs), "budget_tokens": 2000}

    def delta(r: random.Random, c: int, i: int) -> dict[str, Any]:
        return {"session_id": f"bench-mixed-{c}"}

    def put_page(r: random.Random, c: int, i: int) -> dict[str, Any]:
        words = " ".join(r.choice(WORDS) for _ in range(24))
        return {
            "slug": slug_for(n + c * 1_000_000 + i % 500),  # pages of its own, rewritten in a cycle
            "content": f"# Bench note {c}-{i % 500}\n\nWritten by client {c}: {words}.\n",
        }

    return {
        "recall": recall,
        "entity": entity,
        "remember": remember,
        "context_pack": context_pack,
        "delta": delta,
        "put_page": put_page,
    }


@dataclass
class VerbStats:
    samples: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    def pct(self, q: float) -> float:
        if not self.samples:
            return float("nan")
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class MixedResult:
    clients: int
    seconds: float
    verbs: dict[str, VerbStats] = field(default_factory=dict)

    def record(self, verb: str, ms: float, error: str | None) -> None:
        stats = self.verbs.setdefault(verb, VerbStats())
        stats.samples.append(ms)
        if error:
            stats.errors[error] += 1

    @property
    def calls(self) -> int:
        return sum(len(s.samples) for s in self.verbs.values())

    @property
    def errors(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for s in self.verbs.values():
            total.update(s.errors)
        return total

    def rate(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else 0.0


def pick_verb(rng: random.Random) -> str:
    verbs, weights = zip(*MIX, strict=True)
    return rng.choices(verbs, weights=weights)[0]


def error_code(result: Any) -> str | None:
    """The envelope's `code` of a tool error (None when the call succeeded)."""
    if not result.is_error:
        return None
    for block in result.content:
        text = getattr(block, "text", None)
        if text:
            try:
                doc = json.loads(text)
            except json.JSONDecodeError:
                break
            if isinstance(doc, dict) and doc.get("code"):
                return str(doc["code"])
    return "tool_error"


async def run_clients(url: str, token: str, work: dict[str, MakeArgs], *, clients: int, seconds: float) -> MixedResult:
    """`clients` MCP sessions calling the mixed workload until `seconds` have passed."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    result = MixedResult(clients=clients, seconds=seconds)
    ready = asyncio.Event()
    opened = 0
    begun = deadline = 0.0

    async def client(c: int) -> None:
        nonlocal opened, begun, deadline
        rng = random.Random(1000 + c)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT) as http:
            async with Client(streamable_http_client(url, http_client=http)) as session:
                opened += 1
                if opened == clients:  # the clock starts once every session is open
                    begun = time.perf_counter()
                    deadline = begun + seconds
                    ready.set()
                await asyncio.wait_for(ready.wait(), CALL_TIMEOUT * 2)
                i = 0
                while time.perf_counter() < deadline:
                    verb = pick_verb(rng)
                    args = work[verb](rng, c, i)
                    i += 1
                    started = time.perf_counter()
                    try:
                        reply = await asyncio.wait_for(session.call_tool(verb, args), CALL_TIMEOUT)
                        error = error_code(reply)
                    except Exception as exc:  # a transport failure counts as an error, by type
                        error = f"transport:{type(exc).__name__}"
                    result.record(verb, (time.perf_counter() - started) * 1000, error)

    await asyncio.gather(*(client(c) for c in range(clients)))
    result.seconds = time.perf_counter() - begun
    return result


def format_mixed(result: MixedResult, *, pages: int, embedder: str, threads: int) -> list[str]:
    calls = result.calls
    lines = [
        f"### mixed workload, {result.clients} MCP clients, {result.seconds:.1f} s, {pages:,} pages, "
        f"embedder `{embedder}`, {threads} server threads",
        "",
        f"{calls:,} calls, {result.rate():.0f} calls/s, {sum(result.errors.values())} errors",
        "",
        "| verb | calls | errors | p50 ms | p99 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for verb, _ in MIX:
        s = result.verbs.get(verb)
        if s is None:
            lines.append(f"| {verb} | 0 | 0 | – | – |")
            continue
        lines.append(
            f"| {verb} | {len(s.samples):,} | {sum(s.errors.values())} | {s.pct(0.5):.1f} | {s.pct(0.99):.1f} |"
        )
    if result.errors:
        lines += ["", "| error code | count |", "|---|---:|"]
        lines += [f"| {code} | {count} |" for code, count in result.errors.most_common()]
    return lines


def run_mixed(url: str, token: str, corpus: Corpus, *, clients: int, seconds: float) -> MixedResult:
    return asyncio.run(run_clients(url, token, mixed_workload(corpus), clients=clients, seconds=seconds))


def run_mixed_bench(args: argparse.Namespace, base: Path, sizes: list[int]) -> str:
    """`fleetmem bench --mixed`: N MCP sessions against a real server for `--seconds` per corpus size."""
    from fleetmem.bench.runner import _log, ensure_corpus, http_server

    lines = [
        f"fleetmem bench --mixed — {platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, embedder `{args.embedder}`",
        "",
    ]
    for n in sizes:
        data_dir = base / f"pages-{n}-{args.embedder}"
        data_dir.mkdir(parents=True, exist_ok=True)
        _, corpus, _ = ensure_corpus(data_dir, n, args.embedder)
        _log(f"bench: {args.concurrency} MCP clients, mixed workload, {args.seconds:g} s at {n:,} pages")
        with http_server(data_dir, args.embedder, args.server_threads) as (url, token):
            result = run_mixed(url, token, corpus, clients=args.concurrency, seconds=args.seconds)
        threads = args.server_threads or Settings.from_env().serve.call_threads  # what the server reads
        lines += [*format_mixed(result, pages=n, embedder=args.embedder, threads=threads), ""]
    if not args.data_dir:
        _log(f"bench: corpus left in {base} (pass --data-dir to reuse it next time)")
    return "\n".join(lines).rstrip() + "\n"
