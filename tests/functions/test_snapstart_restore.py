"""SnapStart's restore path (shared/fleetmem/transport/aws_lambda/runtime.py): what a snapshot
captures at init is shared by every sandbox restored from it, so the after-restore hook must
re-seed `random` and drop every client made before the snapshot, without touching the network.

The deps are the real AWS wiring (boto3 clients, the OpenSearch adapter) built from the
environment a deployed function gets; nothing is called through them. The Lambda runtime's
`snapshot_restore_py` module exists only inside Lambda's Python 3.12+ runtimes: the one test that
checks the hook is registered gives the runtime module a stand-in that records what it is handed
(said there)."""

from __future__ import annotations

import importlib.util
import random
import socket
import sys
import types
from typing import Any

import pytest

from fleetmem import wiring
from fleetmem.config import (
    ENV_BACKEND,
    ENV_BEDROCK_EMBEDDING_DIM,
    ENV_BEDROCK_EMBEDDING_MODEL,
    ENV_EMBEDDER,
    ENV_OPENSEARCH_ENDPOINT,
    ENV_OPENSEARCH_SERVICE,
    ENV_TABLE_PREFIX,
)
from fleetmem.transport.aws_lambda import runtime

DEPLOYED_ENV = {
    ENV_BACKEND: "aws",
    ENV_EMBEDDER: "bedrock",
    ENV_TABLE_PREFIX: "fleetmem-restore",
    # a port nothing listens on: any request through these clients would fail the test anyway
    ENV_OPENSEARCH_ENDPOINT: "http://127.0.0.1:9",
    ENV_OPENSEARCH_SERVICE: "es",
    ENV_BEDROCK_EMBEDDING_MODEL: "amazon.titan-embed-text-v2:0",
    ENV_BEDROCK_EMBEDDING_DIM: "1024",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "AKIDRESTORETEST",
    "AWS_SECRET_ACCESS_KEY": "restore-test-secret",
}


@pytest.fixture
def deployed_env(monkeypatch: pytest.MonkeyPatch):
    for k, v in DEPLOYED_ENV.items():
        monkeypatch.setenv(k, v)
    wiring.set_deps_override(None)
    runtime.reset()
    wiring.clear_cache()
    yield
    runtime.reset()
    wiring.clear_cache()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every connect refused and recorded: a restore that reached out would fail here."""
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any, *a: Any) -> Any:
        attempts.append(address)
        raise ConnectionRefusedError(f"after_restore tried to connect to {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", lambda address, *a, **k: refuse(None, address))  # type: ignore[arg-type]
    return attempts


def _clients(deps: Any) -> list[Any]:
    """The network clients the deps hold (the facts store's boto3 client, the search index's)."""
    return [deps.search.client, deps.search.search_client, deps.facts._c.dynamodb]


def test_after_restore_builds_fresh_clients_without_a_network_call(deployed_env, no_network):
    before = runtime.get_deps()
    old_clients = _clients(before)  # made "during init", as a snapshot would hold them
    runtime.after_restore()
    after = runtime.get_deps()
    assert after is not before
    new_clients = _clients(after)
    assert all(new is not old for new, old in zip(new_clients, old_clients, strict=True))
    assert no_network == []


def test_after_restore_gives_each_restored_sandbox_its_own_random_sequence(deployed_env, no_network):
    random.seed(20261206)  # the state every sandbox restored from one snapshot starts with
    snapshot = random.getstate()
    runtime.after_restore()
    assert random.getstate() != snapshot
    assert no_network == []


def test_init_registers_the_hook_and_prewarms_when_snapshotted(monkeypatch: pytest.MonkeyPatch):
    """`snapshot_restore_py` is Lambda's own module (not installable here): a stand-in records the
    hook the runtime module registers when it is imported, as Lambda's init imports it."""
    hooks: list[Any] = []
    fake = types.ModuleType("snapshot_restore_py")
    fake.register_after_restore = hooks.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", fake)
    monkeypatch.setenv(runtime.ENV_FUNCTION_GROUP, "recall")
    monkeypatch.setenv(runtime.ENV_INIT_TYPE, "snap-start")
    monkeypatch.delitem(sys.modules, "opensearchpy", raising=False)

    spec = importlib.util.spec_from_file_location("runtime_at_init", runtime.__file__)
    assert spec is not None and spec.loader is not None
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)

    assert fresh.SNAPSTART_HOOKED is True
    assert hooks == [fresh.after_restore]
    assert "opensearchpy" in sys.modules  # a verb's first-call import, done before the snapshot
    assert set(runtime.init_imports("recall")) <= set(sys.modules)
