"""Serverless constraints on the real OpenSearch node.

An OpenSearch Serverless VECTORSEARCH collection generates every document `_id` and has no
`_delete_by_query`. The local node accepts both, so a test that runs the adapter in its
`serverless` flavour talks to the node through `ServerlessTransport`: it records every request
and fails the test on what a collection would refuse, asserting on the actual requests:

- a `_delete_by_query` call;
- an `index` / `create` action (in `_bulk`, or `PUT .../_doc/<id>`, `.../_create/<id>`) that
  names an `_id` the node did not hand out itself (in a bulk response or a search hit);
- an `update` action (upserts by id are refused too).

Requests made by the test itself (refreshes, counts) go through the same transport and are
held to the same rules; they use none of the refused calls.
"""

from __future__ import annotations

import json
from typing import Any

from opensearchpy import OpenSearch, Transport

from fleetmem.adapters.aws.opensearch import OpenSearchIndex


class ServerlessViolation(AssertionError):
    """The adapter sent a request a serverless VECTORSEARCH collection refuses."""


class ServerlessTransport(Transport):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[tuple[str, str]] = []
        self.issued: set[str] = set()  # `_id`s the node generated or returned
        self.violations: list[str] = []
        self.bulk_actions: list[dict[str, Any]] = []

    def perform_request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        body = kwargs.get("body", args[1] if len(args) > 1 else None)
        self.requests.append((method, url))
        self._check(method, url, body)
        out = super().perform_request(method, url, *args, **kwargs)
        self._learn(out)
        return out

    def _refuse(self, what: str) -> None:
        self.violations.append(what)
        raise ServerlessViolation(what)

    def _check(self, method: str, url: str, body: Any) -> None:
        path = url.split("?", 1)[0]
        if "_delete_by_query" in path:
            self._refuse(f"{method} {path}: a serverless collection has no _delete_by_query")
        parts = path.strip("/").split("/")
        if len(parts) >= 3 and parts[-2] in {"_doc", "_create"} and method in {"PUT", "POST"}:
            self._refuse(f"{method} {path}: a document written under a custom _id")
        if parts[-1] == "_bulk" and body is not None:
            self._check_bulk(body)

    def _check_bulk(self, body: Any) -> None:
        text = body.decode() if isinstance(body, bytes) else body
        lines = [json.loads(line) for line in text.splitlines() if line.strip()] if isinstance(text, str) else body
        n = 0
        while n < len(lines):
            ((action, header),) = lines[n].items()
            self.bulk_actions.append({action: header})
            if action == "update":
                self._refuse("a bulk update: a serverless collection refuses upserts by id")
            if action in {"index", "create"} and "_id" in header and header["_id"] not in self.issued:
                self._refuse(f"a bulk {action} with a custom _id {header['_id']!r}")
            n += 1 if action == "delete" else 2

    def _learn(self, out: Any) -> None:
        if not isinstance(out, dict):
            return
        for entry in out.get("items", []):
            for result in entry.values():
                if result.get("_id"):
                    self.issued.add(str(result["_id"]))
        for resp in [out, *out.get("responses", [])]:
            for hit in (resp.get("hits") or {}).get("hits", []):
                self.issued.add(str(hit["_id"]))


def serverless_index(url: str, **kwargs: Any) -> tuple[OpenSearchIndex, ServerlessTransport]:
    """An OpenSearchIndex in the `serverless` flavour whose client speaks through a
    ServerlessTransport to the (unsigned) local node."""
    client = OpenSearch(hosts=[url], transport_class=ServerlessTransport)
    index = OpenSearchIndex(url, service="none", flavour="serverless", client=client, **kwargs)
    transport = client.transport
    assert isinstance(transport, ServerlessTransport)
    return index, transport
