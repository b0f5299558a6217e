"""Latency and throughput of the verbs on a seeded corpus, in-process (op layer) and over HTTP.

Op layer = `dispatch()` in this process (validation, scope check and the verb, no transport) —
what every Lambda verb function runs. HTTP = a real `fleetmem serve` subprocess on 127.0.0.1 and
JSON-RPC `tools/call` requests with keep-alive, 1 and 8 concurrent clients. Every loop is bounded
by a request count; the server is stopped at the end. Output: a markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetmem.bench.corpus import CORPUS_VERSION, WORDS, Corpus, seed_corpus, slug_for
from fleetmem.bench.floor import HEALTH, MCP_NOOP, floor_beside
from fleetmem.bench.serving import TENANT, http_server, open_deps
from fleetmem.models import Caller
from fleetmem.timefmt import iso

CALLER = Caller(tenant=TENANT, client_id="bench-agent", scopes=frozenset({"read", "write"}), remote=True)
MARKER = "bench-corpus.json"
CHANGES = 20

ArgsFn = Callable[[random.Random, int], dict[str, Any]]


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def workloads(corpus: Corpus, delta_since: str) -> dict[str, tuple[str, ArgsFn]]:
    targets, titles, n = corpus.targets, corpus.target_titles, corpus.pages
    return {
        "entity (title)": ("entity", lambda r, i: {"name": r.choice(titles)}),
        "entity (alias, any page)": ("entity", lambda r, i: {"name": f"alias-{r.randrange(n):06d}"}),
        "recall (entity)": ("recall", lambda r, i: {"entity": r.choice(targets)}),
        "recall (query)": ("recall", lambda r, i: {"query": " ".join(r.sample(WORDS, 2)), "limit": 10}),
        "context_pack (8)": (
            "context_pack",
            lambda r, i: {"entities": ",".join(r.sample(targets, 8)), "budget_tokens": 2000},
        ),
        f"delta ({CHANGES} changes)": ("delta", lambda r, i: {"since": delta_since}),
        # a reference client's catch-up: a bare since long ago, a budget, 50 pages listed
        "delta (since 2000, budget 4000)": (
            "delta",
            lambda r, i: {"since": "2000-01-01T00:00:00Z", "budget_tokens": 4000},
        ),
        "remember": (
            "remember",
            lambda r, i: {
                "fact": f"Bench write {i} {r.random():.12f}",
                "provenance": "bench",
                "entity": r.choice(targets),
            },
        ),
    }


@dataclass
class Stats:
    samples: list[float] = field(default_factory=list)
    errors: int = 0
    cpu: list[float] = field(default_factory=list)  # the calling thread's CPU ms (docs/benchmarks.md)

    def pct(self, q: float, *, cpu: bool = False) -> float:
        values = self.cpu if cpu else self.samples
        if not values:
            return float("nan")
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ensure_corpus(data_dir: Path, pages: int, embedder: str) -> tuple[Any, Corpus, str]:
    """Seed once per data directory (a marker remembers it), then make CHANGES fresh page edits."""
    deps = open_deps(data_dir, embedder)
    marker = data_dir / MARKER
    wanted = {"pages": pages, "version": CORPUS_VERSION, "embedded": embedder != "none"}
    if marker.exists() and all(json.loads(marker.read_text()).get(k) == v for k, v in wanted.items()):
        info = json.loads(marker.read_text())
        corpus = Corpus(TENANT, pages, info["targets"], info["target_titles"], info["seconds"])
        _log(f"bench: reusing the {pages:,}-page corpus in {data_dir}")
    elif marker.exists():
        raise RuntimeError(
            f"{data_dir} holds a corpus of another size, shape or embedder than asked "
            f"({marker.read_text().strip()[:200]}): delete it or pass another --data-dir"
        )
    else:
        _log(f"bench: seeding {pages:,} pages into {data_dir} …")
        corpus = seed_corpus(
            deps,
            tenant=TENANT,
            pages=pages,
            now=deps.clock.now(),
            embed=embedder != "none",
            progress=lambda done, total: (
                _log(f"  seeded {done:,}/{total:,}") if done % 20000 == 0 or done == total else None
            ),
        )
        marker.write_text(
            json.dumps(
                {
                    **wanted,
                    "targets": corpus.targets,
                    "target_titles": corpus.target_titles,
                    "seconds": corpus.seconds,
                }
            )
        )
        _log(f"bench: seeded in {corpus.seconds:.1f}s")
    from fleetmem.transport.dispatch import dispatch

    probe = dispatch("recall", {"query": WORDS[0], "limit": 1}, CALLER, deps, transport="cli")
    if probe.is_error or not probe.body.get("results"):
        raise RuntimeError(
            f"the corpus in {data_dir} answers no search results (written by an older store "
            "schema?): delete it or pass another --data-dir"
        )
    since = iso(deps.clock.now())
    rng = random.Random(7)
    for k in range(CHANGES):
        slug = slug_for(rng.randrange(pages))
        result = dispatch(
            "put_page",
            {"slug": slug, "content": f"# Changed {k}\n\nEdited by the benchmark.\n"},
            CALLER,
            deps,
            transport="cli",
        )
        if result.is_error:
            raise RuntimeError(f"bench write failed: {result.body.get('code')}")
    return deps, corpus, since or ""


def op_layer(deps: Any, work: dict[str, tuple[str, ArgsFn]], iterations: int) -> dict[str, Stats]:
    from fleetmem.transport.dispatch import dispatch

    out: dict[str, Stats] = {}
    for label, (tool, make) in work.items():
        rng, stats = random.Random(label), Stats()
        for i in range(min(20, iterations)):  # warm caches the way a running server has them
            dispatch(tool, make(rng, -i - 1), CALLER, deps, transport="cli")
        for i in range(iterations):
            args = make(rng, i)
            c, t = time.thread_time(), time.perf_counter()
            result = dispatch(tool, args, CALLER, deps, transport="cli")
            stats.samples.append((time.perf_counter() - t) * 1000)
            stats.cpu.append((time.thread_time() - c) * 1000)
            stats.errors += int(result.is_error)
        out[label] = stats
    return out


class HttpCaller:
    """JSON-RPC tools/call over one keep-alive connection (stateless, JSON responses)."""

    def __init__(self, url: str, token: str) -> None:
        import httpx2

        self.url = url
        self.client = httpx2.Client(
            timeout=60,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": "2025-06-18",
            },
        )
        self.n = 0

    def answer(self, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
        """(is_error, the result's structured content) — (True, the start of the body) when the call
        got no JSON-RPC result."""
        self.n += 1
        body = {
            "jsonrpc": "2.0",
            "id": self.n,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        r = self.client.post(self.url, content=json.dumps(body))
        result = r.json().get("result") if r.status_code == 200 else None
        if not isinstance(result, dict):
            return True, r.text[:500]
        return bool(result.get("isError", True)), result.get("structuredContent")

    def call(self, tool: str, arguments: dict[str, Any]) -> bool:
        return not self.answer(tool, arguments)[0]

    def close(self) -> None:
        self.client.close()


class V1Caller(HttpCaller):
    """The same calls as `POST /v1/<tool>` (the JSON body is the arguments) on one keep-alive
    connection; `url` is the MCP URL, whose `/v1` sibling is used."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(url, token)
        self.base = url.removesuffix("/mcp")

    def call(self, tool: str, arguments: dict[str, Any]) -> bool:
        r = self.client.post(f"{self.base}/v1/{tool}", content=json.dumps(arguments))
        return r.status_code == 200


def http_latency(
    url: str, token: str, work: dict[str, tuple[str, ArgsFn]], iterations: int, *, v1: bool = False
) -> dict[str, Stats]:
    """Per-label latency of `work` over MCP tools/call, or over `POST /v1/<tool>` with `v1`."""
    caller, out = (V1Caller if v1 else HttpCaller)(url, token), {}
    try:
        for label, (tool, make) in work.items():
            rng, stats = random.Random(label + "http"), Stats()
            for i in range(min(20, iterations)):
                caller.call(tool, make(rng, -i - 1_000_000))
            for i in range(iterations):
                args = make(rng, i + 1_000_000)
                t = time.perf_counter()
                ok = caller.call(tool, args)
                stats.samples.append((time.perf_counter() - t) * 1000)
                stats.errors += int(not ok)
            out[label] = stats
    finally:
        caller.close()
    return out


def paired_http_latency(
    url: str, token: str, work: dict[str, tuple[str, ArgsFn]], iterations: int
) -> tuple[dict[str, Stats], dict[str, Stats]]:
    """Per-label latency over MCP tools/call and over `POST /v1/<tool>`, the two calls of each
    iteration made back to back with the same arguments, so both see the same engine warmth and
    load (run one after the other, the later side meets JIT-warmed engines and looks faster)."""
    mcp, v1 = HttpCaller(url, token), V1Caller(url, token)
    out_mcp: dict[str, Stats] = {}
    out_v1: dict[str, Stats] = {}
    try:
        for label, (tool, make) in work.items():
            rng, sm, sv = random.Random(label + "http"), Stats(), Stats()
            for i in range(min(20, iterations)):
                args = make(rng, -i - 1_000_000)
                mcp.call(tool, args)
                v1.call(tool, args)
            for i in range(iterations):
                args = make(rng, i + 1_000_000)
                for caller, stats in ((mcp, sm), (v1, sv)) if i % 2 == 0 else ((v1, sv), (mcp, sm)):
                    t = time.perf_counter()
                    ok = caller.call(tool, args)
                    stats.samples.append((time.perf_counter() - t) * 1000)
                    stats.errors += int(not ok)
            out_mcp[label], out_v1[label] = sm, sv
    finally:
        mcp.close()
        v1.close()
    return out_mcp, out_v1


def http_throughput(url: str, token: str, tool: str, make: ArgsFn, clients: int, total: int) -> tuple[float, int]:
    """Requests per second with `clients` concurrent keep-alive clients sharing `total` requests."""
    per = max(1, total // clients)
    errors = [0] * clients
    barrier = threading.Barrier(clients + 1)

    def worker(k: int) -> None:
        caller, rng = HttpCaller(url, token), random.Random(k)
        try:
            barrier.wait()
            for i in range(per):
                errors[k] += int(not caller.call(tool, make(rng, i)))
        finally:
            caller.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return per * clients / (time.perf_counter() - start), sum(errors)


def _ms(v: float) -> str:
    return f"{v:.1f}" if v == v else "–"


def prepare(args: argparse.Namespace) -> tuple[Path, list[int]]:
    """Where corpora live and their sizes; the embedder's default (the mixed load runs the embedded
    default, MiniLM; latency is keyword-only)."""
    base = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="fleetmem-bench-"))
    sizes = [int(s.replace("_", "").replace(",", "")) for s in args.pages]
    if args.embedder is None:
        args.embedder = "minilm" if args.mixed else "none"
    return base, sizes


def run(args: argparse.Namespace, base: Path, sizes: list[int]) -> str:
    lines = [
        f"fleetmem bench — {platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, embedder `{args.embedder}`, {args.iterations} calls per verb",
        "",
    ]
    delta_p50: dict[int, float] = {}
    for n in [args.delta_baseline, *sizes] if args.delta_baseline not in sizes else sizes:
        data_dir = base / f"pages-{n}"
        data_dir.mkdir(parents=True, exist_ok=True)
        deps, corpus, since = ensure_corpus(data_dir, n, args.embedder)
        work = workloads(corpus, since)
        delta_label = f"delta ({CHANGES} changes)"
        if n not in sizes:  # the small corpus only serves the delta ratio
            delta_p50[n] = op_layer(deps, {delta_label: work[delta_label]}, args.iterations)[delta_label].pct(0.5)
            continue
        _log(f"bench: op layer at {n:,} pages")
        # Reads first on both layers, writes last, so every delta call sees the same CHANGES.
        reads = {k: v for k, v in work.items() if v[0] != "remember"}
        writes = {k: v for k, v in work.items() if v[0] == "remember"}
        ops = op_layer(deps, reads, args.iterations)
        delta_p50[n] = ops[delta_label].pct(0.5)
        http: dict[str, Stats] = {}
        floor: dict[str, Stats] = {}
        tput: dict[int, tuple[float, int]] = {}
        if args.no_http:
            ops.update(op_layer(deps, writes, args.iterations))
        else:
            _log(f"bench: HTTP at {n:,} pages")
            with http_server(data_dir, args.embedder) as (url, token):
                http = http_latency(url, token, reads, args.iterations)
                floor = {k: Stats(v.ms, v.errors) for k, v in floor_beside(url, token, args.iterations).items()}
                entity_tool, entity_args = work["entity (title)"]
                for c in args.clients:
                    tput[c] = http_throughput(url, token, entity_tool, entity_args, c, args.throughput_requests)
                ops.update(op_layer(deps, writes, args.iterations))
                http.update(http_latency(url, token, writes, args.iterations))
        lines += [
            f"### {n:,} pages ({n:,} aliases, {n:,} links, {2 * n + 50 * 20:,} facts; "
            f"seeded in {corpus.seconds:.0f} s)",
            "",
            "| call | op-layer p50 ms | op-layer p99 ms | HTTP p50 ms | HTTP p99 ms | op-layer CPU p50 / p99 ms |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for label in work:
            h = http.get(label)
            errors = ops[label].errors + (h.errors if h else 0)
            name = f"{label} ({errors} errors)" if errors else label
            http_cols = f"{_ms(h.pct(0.5))} | {_ms(h.pct(0.99))}" if h else "– | –"
            cpu = f"{ops[label].pct(0.5, cpu=True):.2f} / {ops[label].pct(0.99, cpu=True):.2f}"
            lines.append(f"| {name} | {_ms(ops[label].pct(0.5))} | {_ms(ops[label].pct(0.99))} | {http_cols} | {cpu} |")
        for label in (HEALTH, MCP_NOOP) if floor else ():
            f = floor[label]
            name = f"{label} ({f.errors} errors)" if f.errors else label
            lines.append(f"| {name} (floor) | – | – | {_ms(f.pct(0.5))} | {_ms(f.pct(0.99))} | – |")
        if floor:
            noop = floor[MCP_NOOP].pct(0.99)
            multiples = ", ".join(f"{label} {http[label].pct(0.99) / noop:.1f}×" for label in reads if label in http)
            lines += ["", f"HTTP p99 as a multiple of the no-op `tools/call`'s p99 ({_ms(noop)} ms): {multiples}"]
        if tput:
            lines += ["", "| HTTP throughput, entity(title) | requests/s |", "|---|---:|"]
            for c, (rps, errs) in tput.items():
                lines.append(f"| {c} client{'s' if c > 1 else ''} | {rps:.0f}{f' ({errs} errors)' if errs else ''} |")
        lines.append("")
    if args.delta_baseline in delta_p50:
        for n in sizes:
            if n != args.delta_baseline and n in delta_p50:
                ratio = delta_p50[n] / delta_p50[args.delta_baseline]
                lines.append(
                    f"delta p50 for {CHANGES} changes: {delta_p50[args.delta_baseline]:.2f} ms at "
                    f"{args.delta_baseline:,} pages vs {delta_p50[n]:.2f} ms at {n:,} pages — "
                    f"ratio {ratio:.2f} (target ≤ 1.2)"
                )
    if not args.data_dir:
        _log(f"bench: corpus left in {base} (pass --data-dir to reuse it next time)")
    return "\n".join(lines).rstrip() + "\n"


def _positive(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
        return value

    return parse


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fleetmem bench", description=__doc__)
    p.add_argument("--pages", nargs="+", default=["20000"], help="corpus sizes, e.g. --pages 20000 200000")
    p.add_argument("--iterations", type=int, default=300, help="measured calls per verb (after 20 warm-up calls)")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8], help="concurrent HTTP clients for throughput")
    p.add_argument("--throughput-requests", type=int, default=800, help="requests per throughput run")
    p.add_argument("--delta-baseline", type=int, default=2000, help="small corpus for the delta ratio")
    p.add_argument(
        "--embedder",
        default=None,
        choices=("none", "hash", "minilm"),
        help="embedder for the corpus and calls (default: none — keyword-only, fastest seeding; minilm with --mixed)",
    )
    p.add_argument(
        "--mixed",
        action="store_true",
        help="fleet throughput: --concurrency MCP sessions issue recall, entity, remember, context_pack, "
        "put_page and delta against a real server for --seconds",
    )
    p.add_argument("--concurrency", type=_positive(int), default=32, help="concurrent MCP clients (--mixed)")
    p.add_argument("--seconds", type=_positive(float), default=30.0, help="duration of the mixed run (--mixed)")
    p.add_argument(
        "--server-threads",
        type=_positive(int),
        default=None,
        help="the server's call threads (fleetmem serve --threads; default: its own default) (--mixed)",
    )
    p.add_argument("--no-http", action="store_true", help="op layer only")
    p.add_argument("--data-dir", default=None, help="where corpora live (reused across runs)")
    return p
