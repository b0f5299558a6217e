"""Server time of each console screen over a large memory.

    scripts/bench console [--pages 20000] [--facts 2000] [--runs 30]

Seeds a local memory with N cheap synthetic pages (their chunks in the search index with
hash-embedder vectors, written straight through the stores for speed, `storebench.seed`) and F facts
(through `remember`, so their index entries and dedup are real), mints an admin token, then renders
each screen through the console app in process — the console calling `/v1` of the same app
`fleetmem serve` runs, as it does there — and reports p50/p95 per screen.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.tokens import create_client
from fleetmem.transport.dispatch import dispatch
from fleetmem.transport.http_local import build_local_app
from fleetmem.web import Console, ToolClient
from fleetmem.web.sessions import cookie_names
from fleetmem.wiring import HashEmbedder, SortableIds, SystemClock, open_local, seed

TENANT = "bench"


def _percentile(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 1)


async def _measure(console: Console, token: str, paths: list[str], runs: int) -> dict[str, dict[str, Any]]:
    import httpx2
    from starlette.applications import Starlette
    from starlette.routing import Mount

    who = await console.client.call(token, "whoami", {})
    session = console.sessions.open(token, who)
    http = httpx2.AsyncClient(
        transport=httpx2.ASGITransport(
            app=Starlette(routes=[Mount("/console", app=console.app())]), client=("127.0.0.1", 0)
        ),
        base_url="http://127.0.0.1:1",
        cookies={cookie_names(1)[0]: session.id},
    )
    out: dict[str, dict[str, Any]] = {}
    try:
        for path in paths:
            times = []
            status = 0
            for _ in range(runs + 1):
                t = time.perf_counter()
                r = await http.get(f"/console{path}")
                times.append((time.perf_counter() - t) * 1000)
                status = r.status_code
            times = times[1:]  # the first render warms caches
            out[path] = {
                "status": status,
                "p50_ms": round(statistics.median(times), 1),
                "p95_ms": _percentile(times, 0.95),
            }
    finally:
        await http.aclose()
    return out


def run_console_bench(
    *, pages: int = 20_000, facts: int = 2_000, runs: int = 30, data_dir: Path | None = None, log: Any = print
) -> dict[str, Any]:
    embedder = HashEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        root = (data_dir or Path(tmp)) / f"console-{pages}-{facts}"
        stores = open_local(root)
        deps = Deps.over(stores, clock=SystemClock(), ids=SortableIds(), embedder=embedder)
        writer = Caller(tenant=TENANT, client_id="bench-writer", scopes=frozenset({"read", "write"}), remote=True)
        t = time.perf_counter()
        if not stores.page_listing.list(TENANT, world_only=False, limit=1):
            seed(stores, tenant=TENANT, pages=pages, chunks_per_page=1, model=embedder.model_id, dim=embedder.dim)
            for i in range(facts):
                dispatch(
                    "remember",
                    {
                        "fact": f"Bench fact {i} about account {i % 97} and plan {i % 13}",
                        "provenance": "bench",
                        "entity": f"companies/bench-{i % 50}",
                    },
                    writer,
                    deps,
                )
        log(f"seeded {pages:,} pages and {facts:,} facts in {time.perf_counter() - t:.0f} s")
        token, _ = create_client(
            stores.clients, SystemClock(), tenant=TENANT, client_id="bench-console", scopes=("read", "write", "admin")
        )
        one = dispatch("list_facts", {"limit": 1}, writer, deps).body["facts"][0]["fact_id"]
        page_slug = stores.page_listing.list(TENANT, world_only=True, limit=1)[0].slug
        app = build_local_app(lambda: deps, data_dir=root)
        console = Console(ToolClient.in_process(app))
        paths = [
            "/",
            "/memories",
            "/memories?state=any&limit=200",
            "/memories?q=account+plan",
            f"/facts/{one}",
            "/pages",
            f"/pages/{page_slug}",
            f"/edit-page/{page_slug}",
            "/entities",
            "/entities?sort=changed",
            "/entities/companies/bench-7",
            "/followers",
            "/context?entities=companies/bench-7,companies/bench-8&budget=2000",
            "/tokens",
            "/activity",
            "/activity?client_id=bench-writer&action=write",
            "/packs",
        ]
        timings = asyncio.run(_measure(console, token, paths, runs))
        stores.close()
    return {"pages": pages, "facts": facts, "runs": runs, "screens": timings}


def render(r: dict[str, Any]) -> str:
    lines = [
        f"Console screens, {r['pages']:,} pages and {r['facts']:,} facts, {r['runs']} renders each (server time):",
        "",
        "| screen | HTTP | p50 | p95 |",
        "|---|---:|---:|---:|",
    ]
    for path, t in r["screens"].items():
        lines.append(f"| `{path}` | {t['status']} | {t['p50_ms']} ms | {t['p95_ms']} ms |")
    return "\n".join(lines)


def main(argv: list[str], *, log: Any = print) -> str:
    p = argparse.ArgumentParser(prog="fleetmem bench console")
    p.add_argument("--pages", type=int, default=20_000)
    p.add_argument("--facts", type=int, default=2_000)
    p.add_argument("--runs", type=int, default=30)
    args = p.parse_args(argv)
    return render(run_console_bench(pages=args.pages, facts=args.facts, runs=args.runs, log=log))
