"""Process-wide state of one Lambda sandbox, built on first use from the environment: `Settings`
(every function), and the edge's, the authorizer's and the scheduled jobs' own settings, read only
by the function that plays that role.

SnapStart (the production preset's edge, authorizer and verbs; infra/config.py `cold_start`):
Lambda runs the init phase once per published version and snapshots the memory, and every new
sandbox is restored from that snapshot. So init imports what the first call would
(`INIT_IMPORTS`, only when `AWS_LAMBDA_INITIALIZATION_TYPE` is `snap-start`), and nothing made
during init may be shared by the restored sandboxes: `after_restore` (registered with the
runtime's `snapshot_restore_py` when it is there) re-seeds `random` and drops every cached
client, connection pool and credential, so each restored sandbox builds its own on first use."""

from __future__ import annotations

import functools
import importlib
import os
import random
import sys
from typing import Any

from fleetmem.config import AuthSettings, EdgeSettings, JobSettings, Settings
from fleetmem.ports import Auth, Deps


@functools.lru_cache(maxsize=1)
def settings() -> Settings:
    return Settings.from_env()


@functools.lru_cache(maxsize=1)
def edge_settings() -> EdgeSettings:
    return EdgeSettings.from_env()


@functools.lru_cache(maxsize=1)
def auth_settings() -> AuthSettings:
    return AuthSettings.from_env()


def job_settings() -> JobSettings:
    """Read on every wake (one variable): the heartbeat table as the stage has it now."""
    return JobSettings.from_env()


def get_deps() -> Deps:
    from fleetmem.wiring import build_deps

    return build_deps(settings())


def get_auth(deps: Deps | None = None) -> Auth:
    from fleetmem.wiring import build_auth

    return build_auth(deps or get_deps(), auth_settings() if settings().backend == "aws" else None)


@functools.lru_cache(maxsize=1)
def signer() -> Any:
    """The invoke-payload signer: one per sandbox, holding the stage's current and previous HMAC
    keys from Secrets Manager, re-read every `signing_key_ttl_s` and when a signature names a key
    it does not hold (`fleetmem.adapters.aws.signing_keys`)."""
    from fleetmem.wiring import build_signer

    return build_signer(settings())


@functools.lru_cache(maxsize=1)
def edge_invoker() -> Any:
    from fleetmem.wiring import build_lambda_invoker

    return build_lambda_invoker(settings(), edge_settings(), signer())


@functools.lru_cache(maxsize=1)
def delivery() -> Any:
    from fleetmem.wiring import build_delivery

    return build_delivery(settings())


def reset() -> None:
    """Forget everything cached (tests change the environment between cases)."""
    from fleetmem.wiring import clear_auth_cache

    for cached in (settings, edge_settings, auth_settings, signer, edge_invoker, delivery):
        getattr(cached, "cache_clear", lambda: None)()  # tests may have replaced one
    clear_auth_cache()


#: The variable Lambda sets to how this sandbox was initialised (`on-demand`,
#: `provisioned-concurrency` or `snap-start`), and the group each function belongs to
#: (infra/constructs/common.py sets it).
ENV_INIT_TYPE = "AWS_LAMBDA_INITIALIZATION_TYPE"
ENV_FUNCTION_GROUP = "FLEETMEM_FUNCTION_GROUP"

#: What the first invocation of each kind of function imports beyond its handler module: imported
#: during init when a snapshot will capture it (`prewarm`), and measured by infra/cold_start.py.
INIT_IMPORTS: dict[str, tuple[str, ...]] = {
    "tool": (
        "fleetmem.transport.invoker",
        "fleetmem.adapters.aws.invoker",
        "fleetmem.wiring",
        "fleetmem.adapters.aws",
        "fleetmem.adapters.aws.facts",
        "fleetmem.adapters.aws.fact_decisions",
        "fleetmem.adapters.aws.fact_feed",
        "fleetmem.adapters.aws.fact_listing",
        "fleetmem.adapters.aws.pages",
        "fleetmem.adapters.aws.page_feed",
        "fleetmem.adapters.aws.page_listing",
        "fleetmem.adapters.aws.opensearch",
        "fleetmem.adapters.aws.bedrock",
        "fleetmem.memory.secret_detectors",  # loaded by the first text to redact (D25)
        "boto3",
        "opensearchpy",
    ),
    "mcp": ("fleetmem.transport.mcp_app", "fleetmem.adapters.aws.invoker", "boto3"),
    "authorizer": (
        "fleetmem.tokens",
        "fleetmem.wiring",
        "fleetmem.adapters.aws.auth",
        "fleetmem.adapters.aws.clients",
        "boto3",
        "jwt",
        "aws_lambda_powertools.utilities.parameters",
    ),
    "indexer": (
        "fleetmem.adapters.aws.stream",
        "fleetmem.adapters.aws.opensearch",
        "fleetmem.adapters.aws.bedrock",
        "aws_lambda_powertools.utilities.batch",
        "boto3",
        "opensearchpy",
    ),
    "signing_rotation": ("fleetmem.adapters.aws.signing_keys", "fleetmem.adapters.aws.dynamo", "boto3"),
    "search_rolemap": ("fleetmem.adapters.aws.opensearch", "fleetmem.adapters.aws.dynamo", "boto3", "opensearchpy"),
    "heartbeat": (
        "fleetmem.transport.dispatch",
        "fleetmem.wiring",
        "fleetmem.adapters.aws.cursors",
        "fleetmem.adapters.aws.delivery",
        "boto3",
    ),
}


def init_imports(group: str) -> tuple[str, ...]:
    """The modules a function of `group` imports on its first call (a verb's are the "tool" kind's)."""
    return INIT_IMPORTS.get(group, INIT_IMPORTS["tool"])


def prewarm(group: str | None = None) -> list[str]:
    """Import the first call's modules now, so the snapshot holds them (no client is built: a
    client made before the snapshot would be shared by every restored sandbox). Returns the
    modules imported."""
    group = group or os.environ.get(ENV_FUNCTION_GROUP, "")
    names = list(init_imports(group))
    for name in names:
        importlib.import_module(name)
    return names


def after_restore() -> None:
    """Run in each sandbox restored from a snapshot, before its first invocation: a new random
    seed (the snapshot holds the generator's state, so every sandbox would draw the same
    numbers), and every client, connection pool and credential made before the snapshot
    dropped — the cached settings, deps (boto3 clients, the OpenSearch clients), signer, edge
    invoker and delivery, and boto3's default session — so they are built again, here, on first
    use. Makes no network call."""
    from fleetmem import wiring

    random.seed()
    reset()
    wiring.clear_cache()
    boto3 = sys.modules.get("boto3")
    if boto3 is not None:
        setattr(boto3, "DEFAULT_SESSION", None)  # noqa: B010  (the module's attribute, not in its stubs)


def _register_snapstart_hooks() -> bool:
    """Register `after_restore` with the Lambda runtime's `snapshot_restore_py` (preinstalled in
    the Python 3.12+ runtimes; absent elsewhere, where nothing is snapshotted) and, when this
    init will be snapshotted, prewarm. Returns whether the hook was registered."""
    try:
        from snapshot_restore_py import register_after_restore
    except ImportError:
        return False
    register_after_restore(after_restore)
    if os.environ.get(ENV_INIT_TYPE) == "snap-start":
        prewarm()
    return True


SNAPSTART_HOOKED = _register_snapstart_hooks()
