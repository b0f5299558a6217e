"""Counting AWS API calls per verb: botocore `before-call` hooks on the DynamoDB client and a
wrapper around the OpenSearch transport. Each call records its place in the (possibly nested)
parallel fan-outs of `fleetmem.adapters.aws.dynamo.parallel`; the sequential round trips are the
critical path: calls in one lane add up, a fan-out costs its slowest lane."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from fleetmem.adapters.aws.dynamo import fanout_path


@dataclass
class Call:
    service: str
    operation: str
    path: tuple[tuple[int, int], ...]


@dataclass
class Recorder:
    calls: list[Call] = field(default_factory=list)
    embeds: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, service: str, operation: str) -> None:
        with self._lock:
            self.calls.append(Call(service, operation, fanout_path()))

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.embeds = 0

    @property
    def sequential(self) -> int:
        return _lane_cost([c.path for c in self.calls], depth=0)

    def summary(self) -> dict[str, Any]:
        return {
            "sequential_round_trips": self.sequential,
            "api_calls": len(self.calls),
            "embedding_calls": self.embeds,
            "operations": _listing(self.calls),
        }


def _listing(calls: list[Call]) -> list[str]:
    """The calls in a stable order and with stable labels: concurrent calls are recorded in whatever
    order the threads ran, so each is labelled by its top-level step and its lane(s), and sorted."""
    first: dict[Any, int] = {}
    for i, c in enumerate(calls):
        first.setdefault(("group", c.path[0][0]) if c.path else ("call", i), i)
    step = {key: n for n, key in enumerate(sorted(first, key=first.__getitem__), start=1)}

    def key(i: int) -> tuple[int, tuple[int, ...], int]:
        c = calls[i]
        top = step[("group", c.path[0][0]) if c.path else ("call", i)]
        return top, tuple(lane for _, lane in c.path), i

    out = []
    for i in sorted(range(len(calls)), key=key):
        top, lanes, _ = key(i)
        label = f" [step {top}, lane {'.'.join(map(str, lanes))}]" if lanes else f" [step {top}]"
        out.append(f"{calls[i].service}:{calls[i].operation}{label}")
    return out


def _lane_cost(paths: list[tuple[tuple[int, int], ...]], depth: int) -> int:
    """Round trips of one lane: its own calls one after another, plus each fan-out it started,
    which costs as much as its slowest lane."""
    own = sum(1 for p in paths if len(p) == depth)
    lanes: dict[int, dict[int, list[tuple[tuple[int, int], ...]]]] = {}
    for p in paths:
        if len(p) > depth:
            group, lane = p[depth]
            lanes.setdefault(group, {}).setdefault(lane, []).append(p)
    return own + sum(
        max(_lane_cost(members, depth + 1) for members in group_lanes.values()) for group_lanes in lanes.values()
    )


def _record_requests(recorder: Recorder, transport: Any) -> None:
    original = transport.perform_request

    def perform_request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        recorder.add("opensearch", f"{method} {url.split('?')[0].rsplit('/', 1)[-1] or '/'}")
        return original(method, url, *args, **kwargs)

    transport.perform_request = perform_request


def attach(recorder: Recorder, dynamodb_client: Any, search: Any = None, embedder: Any = None) -> None:
    def before_call(model: Any, **_: Any) -> None:
        recorder.add("dynamodb", model.name)

    dynamodb_client.meta.events.register("before-call.dynamodb.*", before_call)
    if search is not None and hasattr(search, "client"):
        # the index's writing client and its request-path query client (`search_client`)
        clients = {id(c): c for c in (search.client, getattr(search, "search_client", search.client))}
        for client in clients.values():
            _record_requests(recorder, client.transport)
    if embedder is not None:
        original_embed = embedder.embed

        def embed(texts: Any) -> Any:
            with recorder._lock:
                recorder.embeds += 1
            return original_embed(texts)

        embedder.embed = embed
