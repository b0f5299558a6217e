"""Child processes of the multi-process `remember` decision tests (importable, pytest-free).

Each child opens its OWN stores over the shared backend — the SQLite data directory, or the
DynamoDB tables of one prefix on DynamoDB Local — the way a second server, a CLI next to a server
or another Lambda instance does, and sends `remember` calls through the one dispatch from
several threads at once.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

TENANT = "t1"
ENTITY = "projects/orion"
#: retries of a call answered `unavailable` + retryable (what its fix tells a client to do)
CALL_RETRIES = 10


def port_fact(port: int) -> str:
    """One value of one attribute: every two of these are an update of the same attribute
    (`sameness.decide` supersedes the older with the newer)."""
    return f"The Orion service now runs on port {port}"


def open_backend(backend: dict[str, str]) -> Any:
    """This process's own stores over the shared backend."""
    if backend["kind"] == "sqlite":
        from fleetmem.adapters.local import open_local

        return open_local(backend["data_dir"])
    import boto3

    from fleetmem.adapters.aws import open_aws
    from fleetmem.config import AwsSettings, Settings

    session = boto3.session.Session(aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
    settings = Settings(backend="aws", aws=AwsSettings(region="us-east-1", table_prefix=backend["prefix"]))
    return open_aws(settings, session=session, dynamodb_endpoint=backend["endpoint"])


#: how long each read of an entity's facts takes in the children (see `SlowReads`)
READ_PAUSE_S = 0.02


class SlowReads:
    """The process's FactStore, with every read of an entity's facts taking `READ_PAUSE_S` longer,
    as on a loaded machine or over a network: the time between a decision's read and its write
    grows, so writers in several processes overlap on every run. What the stores guarantee does not
    depend on it; without the guarantee, the overlap is what makes the race show."""

    def __init__(self, facts: Any) -> None:
        self._facts = facts

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._facts, name)
        if name not in ("by_entity", "recent", "decision_pool"):
            return attr

        def slow(*args: Any, **kw: Any) -> Any:
            out = attr(*args, **kw)
            time.sleep(READ_PAUSE_S)
            return out

        return slow


def remember_ports(backend: dict[str, str], worker: int, ports: list[int], barrier: Any, out: str) -> None:
    """Remember one fact per port, all at once from one thread each, after every process is ready;
    writes [{"port", "status", "id", "retries"} | {"port", "error"}] as JSON to `out`."""
    from fleetmem.adapters.local.clock import SystemClock
    from fleetmem.adapters.local.hash_embedder import HashEmbedder
    from fleetmem.adapters.local.ids import SortableIds
    from fleetmem.models import Caller
    from fleetmem.ports import Deps, Policy
    from fleetmem.transport.dispatch import dispatch

    stores = open_backend(backend)
    kw: dict[str, Any] = {}
    if backend["kind"] != "sqlite":
        from fleetmem.adapters.aws.dynamo import parallel

        kw["policy"] = Policy(parallel=parallel)
    deps = Deps.over(
        stores,
        facts=SlowReads(stores.facts),
        clock=SystemClock(),
        ids=SortableIds(),
        embedder=HashEmbedder(),
        llm=None,
        **kw,
    )
    caller = Caller(tenant=TENANT, client_id=f"worker-{worker}", scopes=frozenset({"read", "write"}), remote=False)

    def one(port: int) -> dict[str, Any]:
        args = {"fact": port_fact(port), "provenance": f"decision test, worker {worker}", "entity": ENTITY}
        for retry in range(CALL_RETRIES):
            result = dispatch("remember", args, caller, deps, transport="cli")
            if not result.is_error:
                return {"port": port, "status": result.body["status"], "id": result.body["id"], "retries": retry}
            if not (result.body.get("code") == "unavailable" and result.body.get("retryable")):
                break
        return {"port": port, "error": result.body.get("code"), "message": result.body.get("message")}

    try:
        # one remember per thread, all waiting for the other processes first
        with ThreadPoolExecutor(max_workers=len(ports)) as pool:
            barrier.wait(timeout=120)
            results = list(pool.map(one, ports))
        Path(out).write_text(json.dumps(results))
    finally:
        stores.close()
