"""The answer of `remember{items}` (docs/protocol.md: remember, "Batches"; D26): one compact receipt
per item, in item order, and the counts. `fleetmem.transport.batch` builds it; the remember verb's
result model (`fleetmem.memory.verbs.remember.RememberAnswer`) accepts it beside the single answer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from fleetmem.models import Wire
from fleetmem.protocol import ErrorCode, RememberStatus


class BatchItemSaved(Wire):
    """An item that was written (or found already saved): the fields of remember's single answer an
    agent acts on."""

    index: int
    request_id: str = Field(description="The item's own write id, derived from the call's id and the index.")
    status: RememberStatus
    id: str | None = None
    entity_slug: str | None = None
    superseded_fact_id: str | None = None
    warnings: list[str] | None = None
    valid_until: str | None = None
    #: Only when the item's write is not committed (never on this server's synchronous writes).
    state: str | None = None
    retry_after_ms: int | None = None


class BatchItemError(Wire):
    code: ErrorCode
    message: str
    detail: Any = None
    suggestion: str | None = None


class BatchItemFailed(Wire):
    """An item that was not written: the error it met (the other items were written on their own)."""

    index: int
    request_id: str
    status: Literal["failed"]
    error: BatchItemError


BatchItem = Annotated[BatchItemSaved | BatchItemFailed, Field(discriminator="status")]


class RememberBatchResult(Wire):
    """remember's answer to a call with `items`."""

    protocol_version: int
    request_id: str = Field(description="The call's write id (a UUID); send it again to replay the batch.")
    client_request_id: str | None = None
    items: list[BatchItem]
    saved: int
    failed: int
    partial: bool = Field(description="Some items were saved and some failed.")
    hints: list[str] | None = None
    next: str | None = None
