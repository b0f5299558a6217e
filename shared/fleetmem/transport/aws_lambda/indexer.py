"""The stream indexer: DynamoDB stream records -> the search index, with partial batch failures."""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Mapping
from typing import Any

from fleetmem.ports import Deps
from fleetmem.transport.aws_lambda import runtime

log = logging.getLogger("fleetmem.indexer")


def handle_stream_batch(
    event: Mapping[str, Any], context: Any, deps: Deps | None = None, kept: Any = None
) -> dict[str, Any]:
    """A DynamoDB Streams batch -> the search index in one pass: the records' items read again
    from the tables in one BatchGetItem (a record is trusted for the keys it names, never for its
    images), one embedder call per `EMBED_BATCH` texts and one `_bulk` for the whole batch
    (`adapters.aws.stream.handle_batch`, whose documents the domain's indexing builds exactly as
    the local backend does).

    The answer is the partial-batch response of `ReportBatchItemFailures`: every record whose
    operations failed, by sequence number; Lambda retries the shard from the lowest one (the
    records before it are done). Each failed record's item (tenant, kind, id) is also sent to the
    stage's replay queue (`kept`, default `adapters.aws.replay.ReplayQueue` at
    `$FLEETMEM_REPLAY_QUEUE_URL`), on every failure, so it survives the stream giving up on it;
    `fleetmem admin replay` re-indexes those items from DynamoDB. Metrics per batch:
    `IndexingFailures`, `SearchLagSeconds`, `ReplayKept` (names in adapters/aws/stream.py)."""
    from fleetmem.wiring import BatchResult, handle_batch, record_id, record_identity, search_lag_s

    d = deps or runtime.get_deps()
    records = [sdk_shaped_record(r) for r in event.get("Records") or ()]
    result = (
        handle_batch(records, index=d.search, embedder=d.embedder, facts=d.facts, pages=d.pages)
        if records
        else BatchResult()
    )
    n_kept = 0
    if result.failed:
        failed = set(result.failed)
        items = {record_identity(r) for r in records if record_id(r) in failed}
        items.discard(None)
        try:
            n_kept = (kept or _replay_queue()).keep(items)
        except Exception as exc:  # the stream still retries them; the stream DLQ is the last record
            log.error("failed records not kept", extra={"event": "replay_keep_failed", "error": type(exc).__name__})
        log.warning(
            "records not indexed",
            extra={"event": "records_not_indexed", "failed": len(result.failed), "kept": n_kept},
        )
    if records:
        _emit_metrics(failed=len(result.failed), lag_s=search_lag_s(records), kept=n_kept)
    response: dict[str, Any] = result.response()
    return response


def _replay_queue() -> Any:
    from fleetmem.wiring import ENV_REPLAY_QUEUE_URL, ReplayQueue, sdk_client

    url = os.environ.get(ENV_REPLAY_QUEUE_URL)
    if not url:
        raise RuntimeError(f"{ENV_REPLAY_QUEUE_URL} is not set")
    return ReplayQueue(sdk_client("replay", region=runtime.settings().aws.region), url)


def _emit_metrics(*, failed: int, lag_s: float | None, kept: int) -> None:
    from aws_lambda_powertools import Metrics
    from aws_lambda_powertools.metrics import MetricUnit

    from fleetmem.wiring import METRIC_INDEXING_FAILURES, METRIC_REPLAY_KEPT, METRIC_SEARCH_LAG

    metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "fleetmem")
    metrics.add_metric(name=METRIC_INDEXING_FAILURES, unit=MetricUnit.Count, value=failed)
    if lag_s is not None:
        metrics.add_metric(name=METRIC_SEARCH_LAG, unit=MetricUnit.Seconds, value=lag_s)
    if kept:
        metrics.add_metric(name=METRIC_REPLAY_KEPT, unit=MetricUnit.Count, value=kept)
    metrics.flush_metrics()


def sdk_shaped_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A stream record as Lambda delivers it (JSON: binary attributes base64-encoded) -> the shape
    the DynamoDB SDK returns (binary as bytes), which the adapters' item readers expect."""
    out = dict(record)
    ddb = dict(out.get("dynamodb") or {})
    for image in ("Keys", "NewImage", "OldImage"):
        if isinstance(ddb.get(image), Mapping):
            ddb[image] = {k: _binary_to_bytes(v) for k, v in ddb[image].items()}
    out["dynamodb"] = ddb
    return out


def _binary_to_bytes(value: Any) -> Any:
    if not isinstance(value, Mapping) or len(value) != 1:
        return value
    ((kind, inner),) = value.items()
    if kind == "B" and isinstance(inner, str):
        return {"B": base64.b64decode(inner)}
    if kind == "BS" and isinstance(inner, list):
        return {"BS": [base64.b64decode(x) if isinstance(x, str) else x for x in inner]}
    if kind == "M" and isinstance(inner, Mapping):
        return {"M": {k: _binary_to_bytes(v) for k, v in inner.items()}}
    if kind == "L" and isinstance(inner, list):
        return {"L": [_binary_to_bytes(v) for v in inner]}
    return value
