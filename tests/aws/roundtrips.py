"""Counting AWS API calls per verb: botocore `before-call` hooks on the DynamoDB client and a
wrapper around the OpenSearch transport. Calls made inside one parallel fan-out of the adapters
(`fleetmem.adapters.aws.dynamo.parallel`) share a group and cost one sequential round trip."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from fleetmem.adapters.aws.dynamo import fanout_group


@dataclass
class Call:
    service: str
    operation: str
    group: int | None


@dataclass
class Recorder:
    calls: list[Call] = field(default_factory=list)
    embeds: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, service: str, operation: str) -> None:
        with self._lock:
            self.calls.append(Call(service, operation, fanout_group()))

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.embeds = 0

    @property
    def sequential(self) -> int:
        groups = {c.group for c in self.calls if c.group is not None}
        return sum(1 for c in self.calls if c.group is None) + len(groups)

    def summary(self) -> dict[str, Any]:
        return {
            "sequential_round_trips": self.sequential,
            "api_calls": len(self.calls),
            "embedding_calls": self.embeds,
            "operations": [
                f"{c.service}:{c.operation}" + (f"[parallel {c.group}]" if c.group else "")
                for c in self.calls
            ],
        }


def attach(recorder: Recorder, dynamodb_client: Any, search: Any = None, embedder: Any = None) -> None:
    def before_call(model: Any, **_: Any) -> None:
        recorder.add("dynamodb", model.name)

    dynamodb_client.meta.events.register("before-call.dynamodb.*", before_call)
    if search is not None and hasattr(search, "client"):
        transport = search.client.transport
        original = transport.perform_request

        def perform_request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            recorder.add("opensearch", f"{method} {url.split('?')[0].rsplit('/', 1)[-1] or '/'}")
            return original(method, url, *args, **kwargs)

        transport.perform_request = perform_request
    if embedder is not None:
        original_embed = embedder.embed

        def embed(texts: Any) -> Any:
            with recorder._lock:
                recorder.embeds += 1
            return original_embed(texts)

        embedder.embed = embed
