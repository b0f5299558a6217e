"""Heartbeat delivery: one message to an SQS queue or, for an HTTPS destination, an event on the
stage's EventBridge bus (an API destination rule forwards it to the webhook).

Both services refuse a message above 256 KB (EventBridge counts the whole PutEvents entry), so
`size_of` measures the serialized entry before sending and `MAX_MESSAGE_BYTES` is the bound the
heartbeat keeps each delivery under. `send` raises on any failure, so nothing advances then.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

HEARTBEAT_SOURCE = "fleetmem.heartbeat"
HEARTBEAT_DETAIL_TYPE = "fleetmem.delta"
#: The PutEvents entry / SQS message limit (256 KiB), less a margin for the envelope the
#: services add and for EventBridge's own accounting of the entry's fields.
MAX_MESSAGE_BYTES = 256 * 1024 - 4 * 1024
#: The client each destination type is sent through (retries: `sdk_clients.SDK_CLIENTS`).
_PURPOSES = {"sqs": "heartbeat_queue", "events": "heartbeat_bus"}


class Delivery:
    def __init__(self, *, sqs: Any = None, events: Any = None, region: str = "") -> None:
        self._sqs = sqs
        self._events = events
        self.region = region
        self.max_bytes = MAX_MESSAGE_BYTES

    def _client(self, name: str) -> Any:
        current = getattr(self, f"_{name}")
        if current is None:
            from fleetmem.adapters.aws import sdk_client

            current = sdk_client(_PURPOSES[name], region=self.region)
            setattr(self, f"_{name}", current)
        return current

    @staticmethod
    def _entry(destination: Mapping[str, Any], message: Mapping[str, Any]) -> dict[str, Any]:
        detail = json.dumps({"destination": destination.get("name"), **message}, ensure_ascii=False)
        return {
            "Source": HEARTBEAT_SOURCE,
            "DetailType": HEARTBEAT_DETAIL_TYPE,
            "Detail": detail,
            "EventBusName": destination.get("bus", ""),
        }

    def size_of(self, destination: Mapping[str, Any], message: Mapping[str, Any]) -> int:
        """Bytes the destination's service counts against its 256 KB limit."""
        if destination.get("type") == "https":
            entry = self._entry(destination, message)
            return sum(len(str(v).encode()) for v in entry.values())
        return len(json.dumps(message, ensure_ascii=False).encode())

    def send(self, destination: Mapping[str, Any], message: Mapping[str, Any]) -> None:
        if destination.get("type") == "sqs":
            text = json.dumps(message, ensure_ascii=False)
            self._client("sqs").send_message(QueueUrl=destination["queue_url"], MessageBody=text)
            return
        if destination.get("type") == "https":
            out = self._client("events").put_events(Entries=[self._entry(destination, message)])
            if out.get("FailedEntryCount"):
                raise RuntimeError("the event bus refused the heartbeat event")
            return
        raise ValueError("unknown heartbeat destination type")
