"""Composition root: the ONLY module that names adapters (an import-linter contract keeps it so).

`build_deps(settings)` opens the stores of the configured backend and the embedder/LLM, once per
process per settings (cached), so a server, a Lambda container or a CLI command shares one set of
connections. Adapter packages are imported inside their branch: the local backend never imports
boto3, and the AWS backend never loads ONNX.

Tests inject their own `Deps` instead (root conftest); `set_deps_override` lets a test make
`build_deps` return a prepared `Deps` for code paths that call it internally.
"""

from __future__ import annotations

import functools
import importlib
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fleetmem.config import AuthSettings, EdgeSettings, Settings
from fleetmem.ports import Auth, Deps, Diagnostics, Policy, Ports

if TYPE_CHECKING:  # the names of ADAPTER_EXPORTS (below), for type checkers and the import graph
    from fleetmem.adapters.aws import (
        BedrockEmbedder as BedrockEmbedder,
    )
    from fleetmem.adapters.aws import (
        open_aws as open_aws,
    )
    from fleetmem.adapters.aws import (
        sdk_client as sdk_client,
    )
    from fleetmem.adapters.aws.auth import (
        _JWT_SHAPE as _JWT_SHAPE,
    )
    from fleetmem.adapters.aws.bedrock import (
        LLM_DEADLINE_S as LLM_DEADLINE_S,
    )
    from fleetmem.adapters.aws.deadlines import (
        FUNCTION_TIMEOUT_S as FUNCTION_TIMEOUT_S,
    )
    from fleetmem.adapters.aws.deadlines import (
        SEARCH_GROUPS as SEARCH_GROUPS,
    )
    from fleetmem.adapters.aws.deadlines import (
        invoke_deadline as invoke_deadline,
    )
    from fleetmem.adapters.aws.dynamo import (
        answers as answers,
    )
    from fleetmem.adapters.aws.dynamo import (
        from_ddb as from_ddb,
    )
    from fleetmem.adapters.aws.invoker import (
        SIGNATURE_VALIDITY as SIGNATURE_VALIDITY,
    )
    from fleetmem.adapters.aws.opensearch import (
        OpenSearchIndex as OpenSearchIndex,
    )
    from fleetmem.adapters.aws.opensearch_bodies import (
        INDEX_VERSION as INDEX_VERSION,
    )
    from fleetmem.adapters.aws.opensearch_bodies import (
        alias_name as alias_name,
    )
    from fleetmem.adapters.aws.opensearch_bodies import (
        doc_key as doc_key,
    )
    from fleetmem.adapters.aws.opensearch_bodies import (
        index_name as index_name,
    )
    from fleetmem.adapters.aws.pages import (
        item_to_page as item_to_page,
    )
    from fleetmem.adapters.aws.reindex import (
        Rebuild as Rebuild,
    )
    from fleetmem.adapters.aws.reindex import (
        StateFile as StateFile,
    )
    from fleetmem.adapters.aws.reindex import (
        default_state_path as default_state_path,
    )
    from fleetmem.adapters.aws.replay import (
        ENV_REPLAY_QUEUE_URL as ENV_REPLAY_QUEUE_URL,
    )
    from fleetmem.adapters.aws.replay import (
        ReplayQueue as ReplayQueue,
    )
    from fleetmem.adapters.aws.replay import (
        ReplayReport as ReplayReport,
    )
    from fleetmem.adapters.aws.replay import (
        queue_name as queue_name,
    )
    from fleetmem.adapters.aws.replay import (
        replay as replay,
    )
    from fleetmem.adapters.aws.restore import (
        copy_tables as copy_tables,
    )
    from fleetmem.adapters.aws.restore import (
        non_empty as non_empty,
    )
    from fleetmem.adapters.aws.search_roles import (
        SecurityApiRefused as SecurityApiRefused,
    )
    from fleetmem.adapters.aws.search_roles import (
        admin_client as admin_client,
    )
    from fleetmem.adapters.aws.search_roles import (
        put_roles as put_roles,
    )
    from fleetmem.adapters.aws.signing_keys import (
        ENV_KEY_ACCEPTED_S as ENV_KEY_ACCEPTED_S,
    )
    from fleetmem.adapters.aws.signing_keys import (
        rotation_step as rotation_step,
    )
    from fleetmem.adapters.aws.stream import (
        METRIC_INDEXING_FAILURES as METRIC_INDEXING_FAILURES,
    )
    from fleetmem.adapters.aws.stream import (
        METRIC_REPLAY_KEPT as METRIC_REPLAY_KEPT,
    )
    from fleetmem.adapters.aws.stream import (
        METRIC_SEARCH_LAG as METRIC_SEARCH_LAG,
    )
    from fleetmem.adapters.aws.stream import (
        BatchResult as BatchResult,
    )
    from fleetmem.adapters.aws.stream import (
        handle_batch as handle_batch,
    )
    from fleetmem.adapters.aws.stream import (
        record_id as record_id,
    )
    from fleetmem.adapters.aws.stream import (
        record_identity as record_identity,
    )
    from fleetmem.adapters.aws.stream import (
        search_lag_s as search_lag_s,
    )
    from fleetmem.adapters.aws.tables import (
        FACTS as FACTS,
    )
    from fleetmem.adapters.aws.tables import (
        PAGES as PAGES,
    )
    from fleetmem.adapters.aws.tables import (
        TABLES as TABLES,
    )
    from fleetmem.adapters.aws.tables import (
        KeyAttr as KeyAttr,
    )
    from fleetmem.adapters.aws.tables import (
        TableSpec as TableSpec,
    )
    from fleetmem.adapters.aws.tenants import (
        QUEUES as QUEUES,
    )
    from fleetmem.adapters.aws.tenants import (
        SEARCH as SEARCH,
    )
    from fleetmem.adapters.aws.tenants import (
        TenantQueues as TenantQueues,
    )
    from fleetmem.adapters.aws.tenants import (
        TenantTables as TenantTables,
    )
    from fleetmem.adapters.aws.tenants import (
        revoke_clients as revoke_clients,
    )
    from fleetmem.adapters.local import (
        open_local as open_local,
    )
    from fleetmem.adapters.local.clock import (
        FixedClock as FixedClock,
    )
    from fleetmem.adapters.local.clock import (
        SystemClock as SystemClock,
    )
    from fleetmem.adapters.local.embedder import (
        BATCH_SIZE as BATCH_SIZE,
    )
    from fleetmem.adapters.local.embedder import (
        MiniLMEmbedder as MiniLMEmbedder,
    )
    from fleetmem.adapters.local.embedder import (
        load_local_embedder as load_local_embedder,
    )
    from fleetmem.adapters.local.hash_embedder import (
        HashEmbedder as HashEmbedder,
    )
    from fleetmem.adapters.local.ids import (
        SortableIds as SortableIds,
    )
    from fleetmem.adapters.local.sqlite.backup import (
        backup as backup,
    )
    from fleetmem.adapters.local.sqlite.db import (
        DB_FILENAME as DB_FILENAME,
    )
    from fleetmem.adapters.local.sqlite.tenants import (
        count_tenant as count_tenant,
    )
    from fleetmem.adapters.local.sqlite.tenants import (
        delete_tenant as delete_tenant,
    )
    from fleetmem.adapters.local.storebench import (
        _VOCAB as _VOCAB,
    )
    from fleetmem.adapters.local.storebench import (
        _WORDS as _WORDS,
    )
    from fleetmem.adapters.local.storebench import (
        seed as seed,
    )

_override: Deps | None = None
_lock = threading.Lock()

LLM_NOT_CONFIGURED = (
    "No LLM is configured, so synthesize cannot answer. Set FLEETMEM_LLM=bedrock and FLEETMEM_BEDROCK_LLM_MODEL "
    "(AWS), or FLEETMEM_LLM=openai, FLEETMEM_LLM_BASE_URL and FLEETMEM_LLM_MODEL (an OpenAI-compatible server)."
)


def set_deps_override(deps: Deps | None) -> None:
    """Make `build_deps` return `deps` for every settings (None restores normal wiring)."""
    global _override
    _override = deps


def build_deps(settings: Settings) -> Deps:
    if _override is not None:
        return _override
    with _lock:
        return _build_cached(settings)


def clear_cache() -> None:
    """Forget cached deps (closing nothing: callers that own stores close them)."""
    _build_cached.cache_clear()


@functools.lru_cache(maxsize=8)
def _build_cached(settings: Settings) -> Deps:
    if settings.backend == "local":
        return _build_local(settings)
    if settings.backend == "aws":
        return _build_aws(settings)
    raise ValueError(f"unknown backend {settings.backend!r} (expected 'local' or 'aws')")


def local_embedder(settings: Settings) -> tuple[Any, str | None]:
    """(embedder | None, problem | None) for the local backend, per `settings.embedder`."""
    choice = settings.embedder
    if choice == "minilm":
        from fleetmem.adapters.local.embedder import load_local_embedder

        return load_local_embedder(settings.model_dir)
    if choice == "hash":
        from fleetmem.adapters.local.hash_embedder import HashEmbedder

        return HashEmbedder(), None
    if choice == "none":
        return None, (
            "Embeddings are turned off (FLEETMEM_EMBEDDER=none), so search is keyword-only. "
            "Build the local model with `fleetmem embedder build` and unset FLEETMEM_EMBEDDER."
        )
    return None, f"Unknown embedder {choice!r}: use minilm, hash (tests only) or none."


def _build_local(settings: Settings) -> Deps:
    from fleetmem.adapters.local import open_chat_llm, open_local

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    stores = open_local(settings.data_dir)
    embedder, embedder_problem = local_embedder(settings)
    llm, llm_problem = open_chat_llm(settings) if settings.llm == "openai" else (None, LLM_NOT_CONFIGURED)
    diagnostics = Diagnostics(embedder_problem=embedder_problem, llm_problem=llm_problem)
    deps = _deps(settings, stores, diagnostics, embedder=embedder, llm=llm, maintenance=stores.maintenance)
    deps.policy = replace(deps.policy, claim_holders=True)  # D22: a local claim's holder can be observed
    return deps


def _build_aws(settings: Settings) -> Deps:
    from fleetmem.adapters.aws import BedrockEmbedder, BedrockLLM, open_aws
    from fleetmem.adapters.aws.dynamo import parallel
    from fleetmem.adapters.local import open_chat_llm  # D30: an OpenAI-compatible server, either backend

    embedder: Any
    if settings.embedder == "bedrock":
        embedder, embedder_problem = BedrockEmbedder(settings), None
    else:
        # DynamoDB + OpenSearch with a local model (a self-hosted stage, or tests on local engines).
        embedder, embedder_problem = local_embedder(settings)
    stores = open_aws(
        settings,
        search_model_id=embedder.model_id if embedder is not None else None,
        search_dim=embedder.dim if embedder is not None else None,
    )
    llm = None
    llm_problem: str | None = LLM_NOT_CONFIGURED
    if settings.llm == "bedrock" and settings.bedrock.llm_model:
        llm = BedrockLLM(settings)
        llm_problem = None
    elif settings.llm == "openai":
        llm, llm_problem = open_chat_llm(settings)
    return _deps(
        settings,
        stores,
        Diagnostics(embedder_problem=embedder_problem, llm_problem=llm_problem),
        parallel=parallel,
        embedder=embedder,
        llm=llm,
    )


def _deps(settings: Settings, stores: Ports, diagnostics: Diagnostics, *, parallel: Any = None, **ports: Any) -> Deps:
    """Deps over a backend's stores and `ports`, with what every backend shares: the system clock,
    sortable ids, and the settings' deadline and idempotency lease."""
    from fleetmem.adapters.local.clock import SystemClock
    from fleetmem.adapters.local.ids import SortableIds
    from fleetmem.pack_transfer import PackFiles

    ports.setdefault("packs", PackFiles())
    policy = Policy(
        deadline_ms=settings.deadline_ms,
        idempotency_lease_s=settings.idempotency_lease_s,
        parallel=parallel,
        core_chars=settings.core_chars,
        quote_check=settings.chat.quote_check,
    )
    return Deps.over(stores, clock=SystemClock(), ids=SortableIds(), diagnostics=diagnostics, policy=policy, **ports)


# ---------------------------------------------------------------------------------------------
# the Lambda glue's adapters (AWS) and the bearer-token check both transports share


_auth_cache: list[tuple[Deps, Auth]] = []


def build_auth(deps: Deps, settings: AuthSettings | None = None) -> Auth:
    """The `Auth` port: `fm_…` API tokens in the backend's client store (the local server passes
    no settings); on AWS (the authorizer passes its settings), when a Cognito pool is configured,
    also Cognito access tokens of app clients mapped in the clients table (refusing deny-listed
    ones), and when an OAuth issuer and the stage's resource are configured, people's access tokens
    for that resource (people mapped in the clients table). One per Deps (the JWT adapters cache
    their issuers' keys)."""
    for known, cached in _auth_cache:
        if known is deps:
            return cached
    from fleetmem.tokens import ApiTokenAuth

    # the local server checks tokens on its event loop: the use is recorded on a thread of its own
    api_tokens = ApiTokenAuth(deps.clients, deps.clock, record_in_background=settings is None)
    auth: Auth = api_tokens
    if settings is not None:
        from fleetmem.adapters.aws.auth import bearer_auth

        auth = bearer_auth(api_tokens, settings, store=deps.clients, clock=deps.clock)
    _auth_cache[:] = [(deps, auth)]  # one live Deps per process; never grow
    return auth


def clear_auth_cache() -> None:
    _auth_cache.clear()


def build_signer(settings: Settings) -> Any:
    """The invoke-payload signer of this stage (its keys read from Secrets Manager on first use and
    again every `signing.key_ttl_s`)."""
    from fleetmem.adapters.aws.invoker import PayloadSigner

    signing = settings.signing
    return PayloadSigner(secret_arn=signing.secret_arn, region=settings.aws.region, key_ttl_s=signing.key_ttl_s)


def build_lambda_invoker(settings: Settings, edge: EdgeSettings, signer: Any) -> Any:
    """The edge's invoker: one function per verb (`EdgeSettings.tool_functions`), signed payloads."""
    from fleetmem.adapters.aws.invoker import LambdaInvoker

    table = edge.tool_functions
    return LambdaInvoker(
        lambda tool: table[tool],
        surface=settings.surface,
        region=settings.aws.region or None,
        signer=signer,
        read_timeout=edge.invoke_read_timeout_s,
        deadlines=edge.invoke_deadlines,
    )


def build_delivery(settings: Settings) -> Any:
    """Heartbeat delivery to SQS / EventBridge."""
    from fleetmem.adapters.aws.delivery import Delivery

    return Delivery(region=settings.aws.region)


# ---------------------------------------------------------------------------------------------
# adapter names the other layers use: the CLI's operator commands, the Lambda glue, the benches and
# the CDK app (infra/, which builds its tables and indexes from the AWS adapter's one schema)


#: name -> the adapter module that defines it. `from fleetmem.wiring import NAME` imports that
#: module only when NAME is first asked for, so a caller loads no more of the adapters than before
#: (a Lambda's cold start, the local backend that never imports boto3).
ADAPTER_EXPORTS: dict[str, str] = {
    "BedrockEmbedder": "fleetmem.adapters.aws",
    "open_aws": "fleetmem.adapters.aws",
    "sdk_client": "fleetmem.adapters.aws",
    "_JWT_SHAPE": "fleetmem.adapters.aws.auth",
    "LLM_DEADLINE_S": "fleetmem.adapters.aws.bedrock",
    "FUNCTION_TIMEOUT_S": "fleetmem.adapters.aws.deadlines",
    "invoke_deadline": "fleetmem.adapters.aws.deadlines",
    "SEARCH_GROUPS": "fleetmem.adapters.aws.deadlines",
    "answers": "fleetmem.adapters.aws.dynamo",
    "from_ddb": "fleetmem.adapters.aws.dynamo",
    "SIGNATURE_VALIDITY": "fleetmem.adapters.aws.invoker",
    "OpenSearchIndex": "fleetmem.adapters.aws.opensearch",
    "alias_name": "fleetmem.adapters.aws.opensearch_bodies",
    "doc_key": "fleetmem.adapters.aws.opensearch_bodies",
    "index_name": "fleetmem.adapters.aws.opensearch_bodies",
    "INDEX_VERSION": "fleetmem.adapters.aws.opensearch_bodies",
    "item_to_page": "fleetmem.adapters.aws.pages",
    "default_state_path": "fleetmem.adapters.aws.reindex",
    "Rebuild": "fleetmem.adapters.aws.reindex",
    "StateFile": "fleetmem.adapters.aws.reindex",
    "ENV_REPLAY_QUEUE_URL": "fleetmem.adapters.aws.replay",
    "queue_name": "fleetmem.adapters.aws.replay",
    "replay": "fleetmem.adapters.aws.replay",
    "ReplayQueue": "fleetmem.adapters.aws.replay",
    "ReplayReport": "fleetmem.adapters.aws.replay",
    "copy_tables": "fleetmem.adapters.aws.restore",
    "non_empty": "fleetmem.adapters.aws.restore",
    "admin_client": "fleetmem.adapters.aws.search_roles",
    "put_roles": "fleetmem.adapters.aws.search_roles",
    "SecurityApiRefused": "fleetmem.adapters.aws.search_roles",
    "ENV_KEY_ACCEPTED_S": "fleetmem.adapters.aws.signing_keys",
    "rotation_step": "fleetmem.adapters.aws.signing_keys",
    "BatchResult": "fleetmem.adapters.aws.stream",
    "handle_batch": "fleetmem.adapters.aws.stream",
    "METRIC_INDEXING_FAILURES": "fleetmem.adapters.aws.stream",
    "METRIC_REPLAY_KEPT": "fleetmem.adapters.aws.stream",
    "METRIC_SEARCH_LAG": "fleetmem.adapters.aws.stream",
    "record_id": "fleetmem.adapters.aws.stream",
    "record_identity": "fleetmem.adapters.aws.stream",
    "search_lag_s": "fleetmem.adapters.aws.stream",
    "FACTS": "fleetmem.adapters.aws.tables",
    "KeyAttr": "fleetmem.adapters.aws.tables",
    "PAGES": "fleetmem.adapters.aws.tables",
    "TABLES": "fleetmem.adapters.aws.tables",
    "TableSpec": "fleetmem.adapters.aws.tables",
    "QUEUES": "fleetmem.adapters.aws.tenants",
    "revoke_clients": "fleetmem.adapters.aws.tenants",
    "SEARCH": "fleetmem.adapters.aws.tenants",
    "TenantQueues": "fleetmem.adapters.aws.tenants",
    "TenantTables": "fleetmem.adapters.aws.tenants",
    "open_local": "fleetmem.adapters.local",
    "FixedClock": "fleetmem.adapters.local.clock",
    "SystemClock": "fleetmem.adapters.local.clock",
    "BATCH_SIZE": "fleetmem.adapters.local.embedder",
    "load_local_embedder": "fleetmem.adapters.local.embedder",
    "MiniLMEmbedder": "fleetmem.adapters.local.embedder",
    "HashEmbedder": "fleetmem.adapters.local.hash_embedder",
    "SortableIds": "fleetmem.adapters.local.ids",
    "backup": "fleetmem.adapters.local.sqlite.backup",
    "DB_FILENAME": "fleetmem.adapters.local.sqlite.db",
    "count_tenant": "fleetmem.adapters.local.sqlite.tenants",
    "delete_tenant": "fleetmem.adapters.local.sqlite.tenants",
    "_VOCAB": "fleetmem.adapters.local.storebench",
    "_WORDS": "fleetmem.adapters.local.storebench",
    "seed": "fleetmem.adapters.local.storebench",
}


def __getattr__(name: str) -> Any:
    module = ADAPTER_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
