"""`scripts/stack bench`: the latency of the local stack per verb, over the calls `scripts/bench`
makes (`fleetmem.bench.runner.workloads`, keep-alive JSON-RPC over HTTP), through the front, the
authorizer (cached), the edge function and each verb's own function process.

The corpus is seeded as `scripts/bench` seeds it (`seed_corpus`, through the store ports straight
into the stack's DynamoDB tables and OpenSearch index), and the stream indexer catches up on it
before anything is measured. Smaller than `scripts/bench`'s default (2,000 pages), since every
page and fact also passes the DynamoDB stream through the indexer function.

`scripts/stack bench --indexing` measures the stream indexer instead: the same corpus is written
into the tables while the stream mapping is held, then the clock runs from releasing it until the
mapping has handed every stream record to the indexer function and had its answer (the documents
are in the index then; they become searchable at its next refresh). Records/s counts stream
records (pages with their derived rows, facts, counters); docs/s the documents the index got."""

from __future__ import annotations

import argparse
import platform
import sys
import time

from fleetmem.adapters.local.clock import SystemClock
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.bench.corpus import seed_corpus
from fleetmem.bench.runner import CALLER, TENANT, Stats, _ms, http_latency, paired_http_latency, workloads
from fleetmem.ports import Deps
from fleetmem.timefmt import iso
from fleetmem.transport.dispatch import dispatch
from tests.aws import engines

from .stack import LOCAL_EMBEDDING_DIM, LOCAL_EMBEDDING_MODEL, Stack


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="scripts/stack bench")
    p.add_argument("--pages", type=int, default=2000)
    p.add_argument("--iterations", type=int, default=100, help="measured calls per verb (after 20 warm-up calls)")
    p.add_argument(
        "--indexing", action="store_true", help="stream indexer throughput (records/s) over --pages pages instead"
    )
    p.add_argument(
        "--compare-v1",
        action="store_true",
        help="pair each call with the same call as POST /v1/<tool>; print both p50s and the /mcp overhead",
    )
    args = p.parse_args(argv)
    if args.indexing:
        return indexing(args.pages)
    stack = Stack(port=0, sync_index=False).start()
    try:
        from fleetmem.adapters.aws.opensearch import OpenSearchIndex
        from fleetmem.tokens import create_client

        stores = engines.open_stores(stack.ddb, stack.prefix)
        search = OpenSearchIndex(
            stack.search_url,
            model_id=LOCAL_EMBEDDING_MODEL,
            dim=LOCAL_EMBEDDING_DIM,
            prefix=stack.index_prefix,
            service="none",
        )
        deps = Deps.over(stores, search=search, clock=SystemClock(), ids=SortableIds(), embedder=None, llm=None)
        t0 = time.monotonic()
        corpus = seed_corpus(deps, tenant=TENANT, pages=args.pages, now=deps.clock.now())
        stack.drain()
        print(
            f"stack bench: seeded {args.pages:,} pages and indexed the stream in {time.monotonic() - t0:.0f} s",
            file=sys.stderr,
        )
        since = iso(deps.clock.now())
        for k in range(20):
            dispatch(
                "put_page",
                {"slug": corpus.targets[k % len(corpus.targets)], "content": f"# Changed {k}\n"},
                CALLER,
                deps,
                transport="cli",
            )
        stack.drain()
        token, _ = create_client(
            stores.clients, SystemClock(), tenant=TENANT, client_id="bench-agent", scopes=["read", "write"]
        )
        work = workloads(corpus, since)
        reads = {k: v for k, v in work.items() if v[0] != "remember"}
        writes = {k: v for k, v in work.items() if v[0] == "remember"}
        v1_stats: dict[str, Stats] = {}
        if args.compare_v1:  # each /mcp call paired with the same /v1 call
            stats, v1_stats = paired_http_latency(stack.mcp_url, str(token), reads, args.iterations)
            more, more_v1 = paired_http_latency(stack.mcp_url, str(token), writes, args.iterations)
            stats.update(more)
            v1_stats.update(more_v1)
        else:
            stats = http_latency(stack.mcp_url, str(token), reads, args.iterations)
            stats.update(http_latency(stack.mcp_url, str(token), writes, args.iterations))
    finally:
        stack.stop()
    print(
        f"local stack — {platform.system()} {platform.machine()}, {args.pages:,} pages, "
        f"{args.iterations} calls per verb\n\n"
        "| call | p50 ms | p99 ms |\n|---|---:|---:|"
    )
    for label, s in stats.items():
        name = f"{label} ({s.errors} errors)" if s.errors else label
        print(f"| {name} | {_ms(s.pct(0.5))} | {_ms(s.pct(0.99))} |")
    if v1_stats:
        print("\n| call | /mcp p50 ms | /v1 p50 ms | /mcp - /v1 ms |\n|---|---:|---:|---:|")
        for label, s in stats.items():
            v = v1_stats[label]
            name = f"{label} ({v.errors} /v1 errors)" if v.errors else label
            print(f"| {name} | {_ms(s.pct(0.5))} | {_ms(v.pct(0.5))} | {_ms(s.pct(0.5) - v.pct(0.5))} |")
    return 0


def indexing(pages: int) -> int:
    """Records/s and docs/s of the stream indexer over a corpus of `pages` pages (module doc)."""
    from fleetmem.adapters.aws import NoSearchIndex

    stack = Stack(port=0, sync_index=False).start()
    try:
        stores = engines.open_stores(stack.ddb, stack.prefix)
        deps = Deps.over(
            stores,
            search=NoSearchIndex(),
            clock=SystemClock(),
            ids=SortableIds(),
            embedder=None,
            llm=None,
        )
        pump = stack.pump
        with pump.lock:  # the mapping waits while the corpus is written
            seed_corpus(deps, tenant=TENANT, pages=pages, now=deps.clock.now())
            records, batches = pump.records, pump.batches
            t0 = time.monotonic()
        while True:
            seen = pump.batches
            pump.pump()
            if pump.batches == seen:
                break
        seconds = time.monotonic() - t0
        records, batches = pump.records - records, pump.batches - batches
        index = f"{stack.search_url}/{stack.index_prefix}*"
        import httpx

        httpx.post(f"{index}/_refresh", timeout=60)
        docs = httpx.get(f"{index}/_count", timeout=60).json()["count"]
        failed = pump.failed_batches
    finally:
        stack.stop()
    print(
        f"stream indexer on the local stack — {platform.system()} {platform.machine()}, {pages:,} pages\n\n"
        "| stream records | batches | failed batches | docs indexed | seconds | records/s | docs/s |\n"
        "|---:|---:|---:|---:|---:|---:|---:|\n"
        f"| {records:,} | {batches:,} | {failed} | {docs:,} | {seconds:.1f} | {records / seconds:,.0f} | "
        f"{docs / seconds:,.0f} |"
    )
    return 0
