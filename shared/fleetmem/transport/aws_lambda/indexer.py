"""The stream indexer: DynamoDB stream records -> the search index, with partial batch failures."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from fleetmem.ports import Deps
from fleetmem.transport.aws_lambda import runtime


def handle_stream_batch(event: Mapping[str, Any], context: Any, deps: Deps | None = None) -> dict[str, Any]:
    """DynamoDB stream records -> search index through Powertools' BatchProcessor, which reports
    the failed records (`batchItemFailures`) so only they — and what follows them on the shard —
    are retried. Each record goes through the AWS adapter's `handle_batch`, so documents are built
    by the domain's indexing exactly as the local backend builds them."""
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    from fleetmem.adapters.aws.stream import handle_batch

    d = deps or runtime.get_deps()

    def index_record(record: Any) -> None:
        result = handle_batch([sdk_shaped_record(record.raw_event)], index=d.search, embedder=d.embedder)
        if result.failed:
            raise RecordNotIndexed()

    processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)
    return dict(
        process_partial_response(event=dict(event), record_handler=index_record, processor=processor, context=context)
    )


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


class RecordNotIndexed(Exception):
    """A stream record whose index operations failed (reported back for retry, then DLQ)."""
