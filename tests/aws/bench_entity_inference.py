"""`python -m tests.aws.bench_entity_inference`: what remember's entity inference (D24) costs per
write. On a fresh DynamoDB Local: the DynamoDB requests one inference makes (`PageStore.names`
plus the heads it lists), by operation, for short and long facts that name one page, two pages or
none. On SQLite (in memory): the median and 95th percentile time of a whole remember with
inference on and off, and of the `names` read alone, over a tenant of 1,000 entity pages.
Prints one JSON document. Nothing here is asserted: speed belongs to benchmarks, not tests."""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.adapters.local.ids import SortableIds
from fleetmem.memory.entity_inference import candidate_keys, infer_entity
from fleetmem.memory.verbs import remember
from fleetmem.models import Caller, Page
from fleetmem.ports import CallContext, Deps

PAGES = 1000
NOW = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)
FILLER = "the team reviewed the quarterly numbers and agreed to revisit the plan after the offsite next week"
TEXTS = {
    "short_one_name": "Person 17 Example approved the budget",
    "short_no_name": "the build is green again",
    "short_two_names": "Person 17 Example met Person 19 Example",
    "long_one_name": f"{FILLER} while Person 17 Example {FILLER}",
    "long_no_name": f"{FILLER} {FILLER}",
}


def _pages(tenant: str) -> list[Page]:
    out = []
    for i in range(PAGES):
        kind, folder = ("person", "people") if i % 2 else ("company", "companies")
        title = f"Person {i} Example" if kind == "person" else f"Company {i} Labs"
        out.append(
            Page(
                tenant=tenant,
                slug=f"{folder}/e{i}",
                title=title,
                type=kind,
                aliases=(f"alias {i}",),
                created_at=NOW,
                updated_at=NOW,
            )
        )
    return out


def dynamodb_requests() -> dict[str, Any]:
    from tests.aws import engines
    from tests.aws.bench_write_ceiling import start_dynamodb_local

    endpoint, proc = start_dynamodb_local()
    try:
        session = engines.session()
        counted: Counter[str] = Counter()
        session.events.register("before-call.dynamodb", lambda model, **_: counted.update([model.name]))
        engines.tables_for(endpoint, prefix := engines.fresh_prefix())
        from fleetmem.adapters.aws import open_aws
        from fleetmem.config import AwsSettings, Settings

        settings = Settings(backend="aws", aws=AwsSettings(region="us-east-1", table_prefix=prefix))
        stores = open_aws(settings, session=session, dynamodb_endpoint=endpoint)
        tenant = "bench"
        for p in _pages(tenant)[:200]:
            stores.pages.put(p)
        deps = Deps.over(stores, clock=FixedClock(NOW), ids=SortableIds(), llm=None, embedder=None)
        caller = Caller(tenant=tenant, client_id="bench", scopes=frozenset({"read", "write"}), remote=True)
        out: dict[str, Any] = {}
        for name, text in TEXTS.items():
            counted.clear()
            found = infer_entity(deps, caller, text)
            out[name] = {
                "keys": len(candidate_keys(text)),
                "linked": found.page.slug if found.page else None,
                "warning": found.warning,
                "requests": dict(counted),
            }
        return out
    finally:
        proc.terminate()
        proc.wait()


def _timed(fn: Any, n: int) -> dict[str, float]:
    laps = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        laps.append((time.perf_counter() - t) * 1000)
    laps.sort()
    return {"p50_ms": round(statistics.median(laps), 3), "p95_ms": round(laps[int(0.95 * len(laps))], 3)}


def sqlite_times(n: int = 300) -> dict[str, Any]:
    stores = open_local(":memory:")
    try:
        deps = Deps.over(stores, clock=FixedClock(NOW), ids=SortableIds(), llm=None, embedder=None)
        tenant = "bench"
        for p in _pages(tenant):
            stores.pages.put(p)
        caller = Caller(tenant=tenant, client_id="bench", scopes=frozenset({"read", "write"}), remote=True)
        ctx = CallContext("bench")

        def write(text: str, **extra: Any) -> Any:
            def run(i: int) -> None:
                args = {"fact": f"{text} (take {i})", "provenance": "bench", **extra}
                remember.run(deps, caller, remember.RememberParams.model_validate(args), ctx)

            return run

        keys = candidate_keys(TEXTS["long_one_name"])
        return {
            "remember_inferred_short": _timed(write(TEXTS["short_one_name"]), n),
            "remember_inference_off_short": _timed(write(TEXTS["short_one_name"], infer_entity=False), n),
            "remember_inferred_long": _timed(write(TEXTS["long_one_name"]), n),
            "remember_inference_off_long": _timed(write(TEXTS["long_one_name"], infer_entity=False), n),
            "names_read_long_fact": _timed(lambda i: stores.pages.names(tenant, keys, world_only=True), n),
        }
    finally:
        stores.close()


if __name__ == "__main__":
    print(json.dumps({"dynamodb_local": dynamodb_requests(), "sqlite_in_memory": sqlite_times()}, indent=1))
