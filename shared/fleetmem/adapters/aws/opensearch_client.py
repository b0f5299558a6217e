"""The OpenSearch client (`build_client`: SigV4 for a managed domain or Serverless, or none for a
local node) and the `SearchBreaker` that sheds a query while the node is not answering; used by
`opensearch.OpenSearchIndex`."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

from fleetmem.adapters.aws.deadlines import BREAKER_FAILURES, BREAKER_OPEN_S
from fleetmem.errors import Unavailable


def build_client(
    endpoint: str,
    *,
    service: str = "es",
    region: str = "",
    session: Any = None,
    purpose: str,
) -> Any:
    """An opensearch-py client. `service` is "es" (managed domain) or "aoss" (Serverless), both
    SigV4-signed with the boto3 credential chain; "none" talks to an unsigned endpoint (a local
    engine). Its timeout per attempt and its attempts are `purpose`'s row of
    `sdk_clients.SDK_CLIENTS`; retries also apply to timeouts when there are any (the indexer's
    writes, "index": a retry is harmless there; the request path's queries, "search", run with none)."""
    from opensearchpy import AWSV4SignerAuth, OpenSearch, RequestsHttpConnection

    from fleetmem.adapters.aws.sdk_clients import policy

    row = policy(purpose)
    if row.service != "opensearch":
        raise ValueError(f"{purpose!r} is not an OpenSearch client purpose")
    retries = row.attempts - 1
    kw: dict[str, Any] = {
        "hosts": [endpoint],
        "timeout": row.read_timeout_s,
        "max_retries": retries,
        "retry_on_timeout": retries > 0,
    }
    if service in {"es", "aoss"}:
        from fleetmem.adapters.aws.sdk_clients import new_session

        sess = session or new_session(region_name=region or None)
        creds = sess.get_credentials()
        kw["http_auth"] = AWSV4SignerAuth(creds, region or sess.region_name, service)
        kw["connection_class"] = RequestsHttpConnection
        kw["use_ssl"] = endpoint.startswith("https")
        kw["verify_certs"] = True
    return OpenSearch(**kw)


#: Search failures that mean "the index is not answering" (a slow or paused node, no route):
#: the ones the breaker counts. A refused query (a 4xx) says nothing about the node's health.
_NOT_ANSWERING = frozenset({"timeout", "connection"})


class SearchBreaker:
    """Fails a sandbox's searches fast while the index is not answering: after `failures`
    timeouts or unreachable answers in a row, every search raises `unavailable` (reason
    `circuit_open`, Retry-After = the seconds left) for `open_s` seconds without asking the index;
    then calls go through again, and one more failure opens it again. A success closes it."""

    def __init__(
        self,
        *,
        failures: int = BREAKER_FAILURES,
        open_s: float = BREAKER_OPEN_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = failures
        self.open_s = open_s
        self.clock = clock
        self._failures = 0
        self._open_until = 0.0
        self._lock = threading.Lock()

    def check(self) -> None:
        with self._lock:
            left = self._open_until - self.clock()
        if left > 0:
            raise Unavailable(
                "search index is not answering; searches fail fast until it is retried",
                retry_after_seconds=max(1, math.ceil(left)),
                reason="circuit_open",
            )

    def open_for(self) -> float:
        """Seconds the breaker stays open (0 when searches go through)."""
        with self._lock:
            return max(0.0, self._open_until - self.clock())

    def record(self, error: Unavailable | None) -> None:
        with self._lock:
            if error is None:
                self._failures, self._open_until = 0, 0.0
            elif error.reason in _NOT_ANSWERING:
                self._failures += 1
                if self._failures >= self.threshold:
                    self._open_until = self.clock() + self.open_s
