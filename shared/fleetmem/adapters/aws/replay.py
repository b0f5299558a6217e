"""Records the stream indexer could not index, kept for `fleetmem admin replay` (docs/operate.md).

The store is the stage's replay queue (SQS, `<prefix>-indexer-replay`, 14 days' retention, made
by the CDK app's indexer construct). Every time a batch leaves records unindexed the indexer
sends each one's identity (`Kept`: tenant, kind, id) there as a message, so the identity outlives
the stream's retries and its 24 h, which keep only the shard position. A message names an item,
never its content: replay reads the item as DynamoDB holds it NOW and writes that to the index
(an item that is gone deletes its documents), so an identity kept twice, or kept for a record the
stream later indexed after all, costs a re-write and changes nothing else.

`replay` reads the queue ten messages at a time, re-indexes the distinct items of each read with one
BatchGetItem, one embedder call and one `_bulk` (the stream indexer's own steps,
adapters/aws/stream.py), deletes the messages whose items went in, and leaves the others on the
queue (they come back after the visibility timeout, for the next run).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleetmem.adapters.aws.stream import KINDS, Kept, apply_operations, embed_operations, operations_for, read_current
from fleetmem.errors import PortError

log = logging.getLogger("fleetmem.replay")

#: The replay queue's URL, set on the indexer by the CDK app (the CLI finds it by name without it).
ENV_REPLAY_QUEUE_URL = "FLEETMEM_REPLAY_QUEUE_URL"
#: SQS takes at most 10 messages per SendMessageBatch / ReceiveMessage / DeleteMessageBatch.
SQS_BATCH = 10
#: Seconds a message read by replay stays invisible: a run does not see its own failures again.
REPLAY_VISIBILITY_S = 300


def queue_name(prefix: str) -> str:
    """The replay queue of a stage (`<prefix>-indexer-replay`)."""
    return f"{prefix}-indexer-replay"


def encode(kept: Kept) -> str:
    return json.dumps({"tenant": kept.tenant, "kind": kept.kind, "id": kept.id}, ensure_ascii=False, sort_keys=True)


def decode(body: str) -> Kept | None:
    """A message body -> its identity; None for a body that is not one (it is dropped)."""
    try:
        raw = json.loads(body)
        kept = Kept(str(raw["tenant"]), str(raw["kind"]), str(raw["id"]))
    except (ValueError, KeyError, TypeError):
        return None
    return kept if kept.kind in KINDS and kept.tenant and kept.id else None


class ReplayQueue:
    """The replay queue: `keep` (the indexer), `count`, `receive`, `done` (replay)."""

    def __init__(self, sqs: Any, url: str) -> None:
        self.sqs = sqs
        self.url = url

    @classmethod
    def for_stage(cls, sqs: Any, prefix: str) -> ReplayQueue:
        """The stage's queue: `$FLEETMEM_REPLAY_QUEUE_URL`, else looked up by its name."""
        url = os.environ.get(ENV_REPLAY_QUEUE_URL) or sqs.get_queue_url(QueueName=queue_name(prefix))["QueueUrl"]
        return cls(sqs, str(url))

    def keep(self, kept: Iterable[Kept]) -> int:
        """Send each identity once; returns how many. Raises on a message SQS did not take."""
        items = sorted(set(kept))
        for start in range(0, len(items), SQS_BATCH):
            chunk = items[start : start + SQS_BATCH]
            entries = [{"Id": str(n), "MessageBody": encode(k)} for n, k in enumerate(chunk)]
            out = self.sqs.send_message_batch(QueueUrl=self.url, Entries=entries)
            if out.get("Failed"):
                raise RuntimeError(f"the replay queue refused {len(out['Failed'])} message(s)")
        return len(items)

    def count(self) -> dict[str, int]:
        """Messages waiting (`waiting`) and being replayed now (`in_flight`), as SQS approximates them."""
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=self.url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return {
            "waiting": int(attrs.get("ApproximateNumberOfMessages", 0)),
            "in_flight": int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0)),
        }

    def receive(self, wait_s: int = 1) -> list[tuple[str, Kept | None]]:
        out = self.sqs.receive_message(
            QueueUrl=self.url,
            MaxNumberOfMessages=SQS_BATCH,
            WaitTimeSeconds=wait_s,
            VisibilityTimeout=REPLAY_VISIBILITY_S,
        )
        return [(str(m["ReceiptHandle"]), decode(str(m.get("Body", "")))) for m in out.get("Messages", [])]

    def done(self, receipts: Sequence[str]) -> None:
        for start in range(0, len(receipts), SQS_BATCH):
            chunk = receipts[start : start + SQS_BATCH]
            self.sqs.delete_message_batch(
                QueueUrl=self.url, Entries=[{"Id": str(n), "ReceiptHandle": r} for n, r in enumerate(chunk)]
            )


@dataclass
class ReplayReport:
    messages: int = 0  # messages read
    replayed: list[Kept] = field(default_factory=list)  # items re-indexed (their messages deleted)
    failed: list[Kept] = field(default_factory=list)  # items left on the queue
    dropped: int = 0  # messages that named no item (deleted)


def replay_batch(kept: Sequence[Kept], *, facts: Any, pages: Any, index: Any, embedder: Any) -> set[Kept]:
    """Re-index these items from their current DynamoDB state (one BatchGetItem, as the stream
    indexer reads); returns the ones that failed. An identity whose tenant no key can hold has no
    item and nothing indexed: it is done, not failed."""
    by_rid = {f"{n}": k for n, k in enumerate(kept)}
    try:
        current = read_current(facts, pages, kept)
    except PortError as exc:  # the table failed: every item waits for the next run
        log.warning("replay read failed", extra={"event": "replay_read_failed", "error": type(exc).__name__})
        return set(kept)
    ops = operations_for(current, {k: rid for rid, k in by_rid.items()}, {})
    ops, unembedded = embed_operations(ops, embedder)
    skip = set(unembedded)
    failed = {by_rid[r] for r in skip}
    failed.update(by_rid[r] for r in apply_operations(index, [op for op in ops if op.record_id not in skip]))
    return failed


def replay(
    queue: ReplayQueue,
    *,
    facts: Any,
    pages: Any,
    index: Any,
    embedder: Any,
    progress: Callable[[ReplayReport], None] = lambda _: None,
) -> ReplayReport:
    """Drain the queue: each read's items re-indexed, their messages deleted; the messages of items
    that failed stay (invisible for `REPLAY_VISIBILITY_S`, so this run ends). Stops when a read
    returns nothing."""
    report = ReplayReport()
    while messages := queue.receive():
        report.messages += len(messages)
        items = sorted({k for _, k in messages if k is not None})
        report.dropped += sum(1 for _, k in messages if k is None)
        failed = replay_batch(items, facts=facts, pages=pages, index=index, embedder=embedder)
        queue.done([r for r, k in messages if k is None or k not in failed])
        report.replayed += [k for k in items if k not in failed]
        report.failed += [k for k in items if k in failed]
        progress(report)
    return report
