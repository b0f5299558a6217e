"""Composition root: the ONLY module that names adapters.

`build_deps(settings)` opens the stores of the configured backend and the embedder/LLM, once per
process per settings (cached), so a server, a Lambda container or a CLI command shares one set of
connections. Adapter packages are imported inside their branch: the local backend never imports
boto3, and the AWS backend never loads ONNX.

Tests inject their own `Deps` instead (root conftest); `set_deps_override` lets a test make
`build_deps` return a prepared `Deps` for code paths that call it internally.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from fleetmem.config import Settings
from fleetmem.ports import Deps

_override: Deps | None = None
_lock = threading.Lock()

LLM_NOT_CONFIGURED = (
    "No LLM is configured, so synthesize cannot answer. On the AWS backend set FLEETMEM_LLM=bedrock and "
    "FLEETMEM_BEDROCK_LLM_MODEL to a Bedrock model id; the local backend has no LLM."
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
    from fleetmem.adapters.local import open_local
    from fleetmem.adapters.local.clock import SystemClock
    from fleetmem.adapters.local.ids import SortableIds

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    stores = open_local(settings.data_dir)
    embedder, embedder_problem = local_embedder(settings)
    return Deps.over(
        stores,
        clock=SystemClock(),
        ids=SortableIds(),
        embedder=embedder,
        embedder_problem=embedder_problem,
        llm=None,
        llm_problem=LLM_NOT_CONFIGURED,
        backend="local",
        deadline_ms=settings.deadline_ms,
    )


def _build_aws(settings: Settings) -> Deps:
    from fleetmem.adapters.aws import BedrockEmbedder, BedrockLLM, open_aws
    from fleetmem.adapters.aws.dynamo import parallel
    from fleetmem.adapters.local.clock import SystemClock
    from fleetmem.adapters.local.ids import SortableIds

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
    if settings.llm == "bedrock" and settings.bedrock_llm_model:
        llm = BedrockLLM(settings)
        llm_problem = None
    return Deps.over(
        stores,
        clock=SystemClock(),
        ids=SortableIds(),
        embedder=embedder,
        embedder_problem=embedder_problem,
        llm=llm,
        llm_problem=llm_problem,
        backend="aws",
        deadline_ms=settings.deadline_ms,
        parallel=parallel,
    )
