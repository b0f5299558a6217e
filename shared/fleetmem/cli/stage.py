"""A deployed AWS stage as the commands that operate it find it (`fleetmem admin`, `fleetmem tenant
delete --backend aws`): its settings from the environment, its search index, its replay queue.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from fleetmem.console import CommandFailed
from fleetmem.lanes import settings_from

if TYPE_CHECKING:
    from fleetmem.wiring import OpenSearchIndex


def aws_backend_option(p: argparse.ArgumentParser) -> None:
    """`--backend aws`, the only backend these commands work on (accepted for symmetry)."""
    p.add_argument("--backend", choices=("aws",), default="aws", help="the AWS stage named by the environment")


def search_index(search: Any, *, doing: str, nothing: str) -> OpenSearchIndex:
    """`search` when it is the stage's OpenSearch index; otherwise the refusal that names the
    settings a stage's functions have (`fleetmem {doing}, ...; nothing was {nothing}.`)."""
    from fleetmem.wiring import OpenSearchIndex

    if isinstance(search, OpenSearchIndex):
        return search
    raise CommandFailed.usage(
        f"fleetmem {doing}, and no OpenSearch endpoint is configured; nothing was {nothing}.",
        "Set FLEETMEM_OPENSEARCH_ENDPOINT (and FLEETMEM_OPENSEARCH_SERVICE, FLEETMEM_OPENSEARCH_INDEX_PREFIX, "
        "FLEETMEM_TABLE_PREFIX, FLEETMEM_BEDROCK_EMBEDDING_MODEL) to the stage's, as its functions have them, "
        "then run the command again.",
        code="invalid_config",
    )


def stage(args: argparse.Namespace) -> tuple[Any, Any]:
    """(settings, deps) of the stage the environment names; refuses a stage without a search index."""
    from fleetmem.config import ENV_EMBEDDER
    from fleetmem.wiring import build_deps

    settings = settings_from(args, backend="aws", embedder=os.environ.get(ENV_EMBEDDER) or "bedrock")
    deps = build_deps(settings)
    search_index(
        deps.search, doing=f"admin {args.admin_command} works on the stage's search index", nothing="read or written"
    )
    return settings, deps


def replay_queue(settings: Any) -> Any:
    from fleetmem.wiring import ENV_REPLAY_QUEUE_URL, ReplayQueue, queue_name, sdk_client

    try:
        return ReplayQueue.for_stage(sdk_client("replay", region=settings.aws.region), settings.aws.table_prefix)
    except Exception as exc:
        raise CommandFailed(
            "unavailable",
            f"The stage's replay queue {queue_name(settings.aws.table_prefix)!r} could not be found "
            f"({type(exc).__name__}); nothing was read or written.",
            f"Check FLEETMEM_TABLE_PREFIX and the AWS credentials and region, or set {ENV_REPLAY_QUEUE_URL} to the "
            "queue URL the indexer function has.",
        ) from None
