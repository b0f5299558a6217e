"""`fleetmem tenant delete --backend aws` against the deployed shape while the tenant's client keeps
writing with its token through API Gateway, whose stand-in caches the authorizer's Allow per
Authorization header for `api.authorizer_cache_ttl_s` (tests/stack/stack.py).

The command revokes first, waits out the cache bound, then deletes and verifies; after it exits 0
no table holds an item of the tenant, the index no document, the stage's queues no message, and the
writer's later calls are refused. Heartbeat and replay messages naming the tenant are put on the
stage's queues (moto's SQS) in the shapes the heartbeat function and the indexer send them; the
other tenant's messages and memory stay. Nothing is mocked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

import boto3
import httpx
import pytest

from fleetmem.config import ENV_AUTHORIZER_CACHE_TTL_S, ENV_INVOKE_READ_TIMEOUT_S
from tests.aws import engines
from tests.aws.test_tenant_delete_aws import docs, tenant_items

from .conftest import mint
from .stack import Stack

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]

#: The writer stops after this many calls or this many seconds, whichever comes first.
WRITER_MAX_CALLS = 1500
WRITER_MAX_S = 420.0
WRITER_PAUSE_S = 0.2


class Writer(threading.Thread):
    """The deleted tenant's client: `remember` over POST /v1 with its token, again and again."""

    def __init__(self, stack: Stack, token: str) -> None:
        super().__init__(daemon=True)
        self.stack, self.token = stack, token
        self.codes: list[int] = []
        self.halt = threading.Event()
        self.wrote = threading.Event()

    def call(self, n: int) -> int:
        out = httpx.post(
            f"{self.stack.base_url}/v1/remember",
            json={
                "fact": f"Writer fact {n} {uuid.uuid4().hex[:8]} about the harbour",
                "provenance": "tenant delete race",
                "entity": "projects/race",
                "idempotency_key": uuid.uuid4().hex,
            },
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=60,
        )
        return out.status_code

    def run(self) -> None:
        deadline = time.monotonic() + WRITER_MAX_S
        for n in range(WRITER_MAX_CALLS):
            if self.halt.is_set() or time.monotonic() > deadline:
                return
            self.codes.append(self.call(n))
            if self.codes.count(200) >= 3:
                self.wrote.set()
            self.halt.wait(WRITER_PAUSE_S)


def delete_command(stack: Stack, tenant: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
        **stack.admin_env(),
        # the cache bound and the in-flight bound as the stage's authorizer and edge have them
        ENV_AUTHORIZER_CACHE_TTL_S: stack.environment["authorizer"][ENV_AUTHORIZER_CACHE_TTL_S],
        ENV_INVOKE_READ_TIMEOUT_S: stack.environment["mcp"][ENV_INVOKE_READ_TIMEOUT_S],
    }
    return subprocess.run(
        [sys.executable, "-m", "fleetmem.cli", "tenant", "delete", tenant, "--backend", "aws", "--yes", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def queued(sqs: Any, url: str) -> list[dict[str, Any]]:
    """The bodies of the queue's visible messages, read without hiding them (visibility 0)."""
    seen: dict[str, dict[str, Any]] = {}
    for _ in range(5):
        out = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0, WaitTimeSeconds=1)
        for m in out.get("Messages") or []:
            seen[m["MessageId"]] = json.loads(m["Body"])
    return list(seen.values())


def test_a_writing_client_cannot_outrun_the_deletion_of_its_tenant(stack: Stack) -> None:
    run = uuid.uuid4().hex[:6]
    gone, kept = f"gone-{run}", f"kept-{run}"
    token, kept_token = mint(stack, ["read", "write"], tenant=gone), mint(stack, ["read", "write"], tenant=kept)
    kept_fact = httpx.post(
        f"{stack.base_url}/v1/remember",
        json={"fact": f"Kept fact {run} about the lighthouse", "provenance": "tenant delete race"},
        headers={"Authorization": f"Bearer {kept_token}"},
        timeout=60,
    )
    assert kept_fact.status_code == 200, kept_fact.text
    sqs = boto3.client("sqs", endpoint_url=stack.moto, **engines.CREDENTIALS)
    from fleetmem.adapters.aws.replay import encode
    from fleetmem.adapters.aws.stream import Kept

    for tenant in (gone, kept):  # a delivered heartbeat delta and a kept replay identity of each tenant
        body = {"tenant": tenant, "client_id": "c", "session_id": f"s-{run}", "correlation_id": "x", "delta": {}}
        sqs.send_message(QueueUrl=stack.heartbeat_queue, MessageBody=json.dumps(body))
        sqs.send_message(QueueUrl=stack.replay_queue, MessageBody=encode(Kept(tenant, "fact", f"f-{run}")))

    writer = Writer(stack, token)
    writer.start()
    try:
        assert writer.wrote.wait(120), writer.codes  # the client is writing before the deletion starts
        held = tenant_items(stack.ddb, stack.prefix, gone)
        assert held["facts"] and held["audit"] and held["idempotency"] and held["clients"], held

        deleted = delete_command(stack, gone)
        assert deleted.returncode == 0, deleted.stderr[-3000:]
    finally:
        writer.halt.set()
        writer.join(timeout=120)
    # the writer's later calls are refused, and nothing of the tenant is left in any store
    assert [writer.call(n) for n in range(3)] == [401, 401, 401]
    assert writer.codes[-1] == 401, writer.codes[-5:]  # refused before the command ended
    stack.drain()
    assert tenant_items(stack.ddb, stack.prefix, gone) == dict.fromkeys(held, 0)
    report = json.loads(deleted.stdout)
    assert report["left"] == 0 and report["revoked"] == 1 and report["waited_s"] > 0, report
    assert "api.authorizer_cache_ttl_s" in deleted.stderr  # it says what it waits for and why
    from opensearchpy import OpenSearch

    search = OpenSearch(hosts=[stack.search_url])
    try:
        assert docs(search, stack.index_prefix, gone) == 0
        assert docs(search, stack.index_prefix, kept) > 0
    finally:
        search.close()
    for url in (stack.heartbeat_queue, stack.replay_queue):
        tenants = [m.get("tenant") for m in queued(sqs, url)]
        assert gone not in tenants and kept in tenants, (url, tenants)
    assert tenant_items(stack.ddb, stack.prefix, kept)["facts"] > 0

    # no new credential for the deleted tenant
    from fleetmem.tokens import TenantDeleted

    with pytest.raises(TenantDeleted):
        mint(stack, ["read"], tenant=gone)
