"""Shared plumbing of the AWS adapters: lazy SDK clients, the ONE ClientError translator, parallel
fan-out, and the small codecs every table module uses.

Nothing here connects at import: `AwsClients` builds a boto3 client on first use and caches it,
and a test (or the Lambda wiring) can inject its own session or clients.
"""

from __future__ import annotations

import contextvars
import itertools
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from fleetmem.errors import Conflict, PortError, TooLarge, Unavailable
from fleetmem.timefmt import iso, to_ms

if TYPE_CHECKING:
    from fleetmem.adapters.aws.tables import TableSpec

T = TypeVar("T")

#: DynamoDB's hard item size limit, and the margin we keep below it for attribute names.
ITEM_LIMIT_BYTES = 400 * 1024

_THROTTLE_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "LimitExceededException",
        "ServiceQuotaExceededException",
    }
)
_TRANSIENT_CODES = frozenset(
    {
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "ModelNotReadyException",
        "ModelTimeoutException",
        "TransactionInProgressException",
    }
)


def translate_client_error(exc: BaseException, *, service: str = "dynamodb") -> PortError:
    """Turn a botocore exception into the port error the domain understands.

    Only the error CODE is looked at (never the message text, which may quote request data), and
    the resulting message names the service and the code only, so nothing of the request leaks.
    """
    from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

    if isinstance(exc, PortError):
        return exc
    if isinstance(exc, ParamValidationError):
        return Unavailable(f"{service} request was rejected before sending", reason="invalid_request")
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {}) or {}
        code = str(err.get("Code", "Unknown"))
        if code in _THROTTLE_CODES:
            return Unavailable(f"{service} is throttling requests ({code})", retry_after_seconds=2, reason="throttled")
        if code in _TRANSIENT_CODES:
            return Unavailable(
                f"{service} is temporarily unavailable ({code})", retry_after_seconds=5, reason="transient"
            )
        if code == "ConditionalCheckFailedException":
            return Conflict(f"{service} condition failed")
        if code == "TransactionCanceledException":
            reasons = [str(r.get("Code", "None")) for r in exc.response.get("CancellationReasons", []) or []]
            if any(r == "ConditionalCheckFailed" for r in reasons):
                return Conflict(f"{service} transaction condition failed")
            if any(r in {"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"} for r in reasons):
                return Unavailable(
                    f"{service} is throttling requests ({code})", retry_after_seconds=2, reason="throttled"
                )
            if any(r == "TransactionConflict" for r in reasons):
                return Conflict(f"{service} transaction conflicted with another write")
            if any(r == "ValidationError" for r in reasons) and _is_size_error(exc):
                return TooLarge(f"{service} item exceeds the 400 KB limit")
            return Unavailable(f"{service} transaction was cancelled", retry_after_seconds=1, reason="cancelled")
        if code in {"ValidationException", "ItemCollectionSizeLimitExceededException"} and _is_size_error(exc):
            return TooLarge(f"{service} item exceeds the 400 KB limit")
        return Unavailable(f"{service} request failed ({code})", reason="client_error")
    if isinstance(exc, BotoCoreError):
        return Unavailable(
            f"{service} cannot be reached ({type(exc).__name__})", retry_after_seconds=5, reason="connection"
        )
    return Unavailable(f"{service} request failed ({type(exc).__name__})", reason="unexpected")


def _is_size_error(exc: Any) -> bool:
    # The code alone cannot tell a size violation from other validation errors; DynamoDB's size
    # errors always name the size, so look for that word (never surfaced to callers).
    if exc.response.get("Error", {}).get("Code") == "ItemCollectionSizeLimitExceededException":
        return True
    text = str(exc.response.get("Error", {}).get("Message", "")).lower()
    return "size" in text


# ---------------------------------------------------------------------------------------------
# clients


class AwsClients:
    """Lazily built, cached, injectable boto3 clients (thread-safe). Each client is built for a
    purpose of `sdk_clients.SDK_CLIENTS`, with that row's retries and timeouts (a caller with a
    deadline of its own may pass a shorter `read_timeout`); a purpose without a row is refused.
    `clients` injects ready clients by service name (tests, local engines)."""

    def __init__(
        self,
        *,
        region: str = "",
        session: Any = None,
        endpoints: dict[str, str] | None = None,
        clients: dict[str, Any] | None = None,
        max_pool_connections: int = 16,
    ) -> None:
        self._region = region or None
        self._session = session
        self._endpoints = dict(endpoints or {})
        self._injected: dict[str, Any] = dict(clients or {})
        self._built: dict[tuple[str, float | None], Any] = {}
        self._lock = threading.Lock()
        self._pool = max_pool_connections

    @property
    def session(self) -> Any:
        if self._session is None:
            from fleetmem.adapters.aws.sdk_clients import new_session

            self._session = new_session(region_name=self._region)
        return self._session

    def client(self, purpose: str, *, read_timeout: float | None = None) -> Any:
        from fleetmem.adapters.aws.sdk_clients import policy

        row = policy(purpose)
        injected = self._injected.get(row.service)
        if injected is not None:
            return injected
        key = (purpose, read_timeout)
        c = self._built.get(key)
        if c is not None:
            return c
        with self._lock:
            c = self._built.get(key)
            if c is None:
                from botocore.config import Config

                cfg = Config(
                    retries={"total_max_attempts": row.attempts, "mode": row.mode},
                    max_pool_connections=self._pool,
                    connect_timeout=row.connect_timeout_s,
                    read_timeout=row.read_timeout_s if read_timeout is None else read_timeout,
                )
                kw: dict[str, Any] = {"config": cfg}
                if self._region:
                    kw["region_name"] = self._region
                if row.service in self._endpoints:
                    kw["endpoint_url"] = self._endpoints[row.service]
                c = self.session.client(row.service, **kw)
                self._built[key] = c
        return c

    @property
    def dynamodb(self) -> Any:
        return self.client("stores")


# ---------------------------------------------------------------------------------------------
# parallel fan-out: independent requests go out together, so they cost one sequential round trip.
# Fan-outs nest (the domain gathers port calls, and a port call may fan out itself): each level has
# its own executor, so a worker waiting on a deeper level can never starve it. Every SDK call can
# name its place (`fanout_path()`): the round-trip budget test derives the critical path from it.

_PATH: contextvars.ContextVar[tuple[tuple[int, int], ...]] = contextvars.ContextVar("fleetmem_aws_fanout", default=())
_GROUP_IDS = itertools.count(1)
_EXECUTORS: dict[int, ThreadPoolExecutor] = {}
_EXECUTOR_LOCK = threading.Lock()


def fanout_path() -> tuple[tuple[int, int], ...]:
    """Where the current SDK call runs: one (fan-out id, lane) per enclosing parallel level."""
    return _PATH.get()


def _executor(depth: int) -> ThreadPoolExecutor:
    with _EXECUTOR_LOCK:
        pool = _EXECUTORS.get(depth)
        if pool is None:
            pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix=f"fleetmem-aws-{depth}")
            _EXECUTORS[depth] = pool
    return pool


def parallel(thunks: Sequence[Callable[[], T]]) -> list[T]:
    """Run independent calls concurrently; results in order; the first error is re-raised."""
    if len(thunks) <= 1:
        return [t() for t in thunks]
    path = _PATH.get()
    group = next(_GROUP_IDS)

    def run(lane: int, t: Callable[[], T]) -> T:
        _PATH.set((*path, (group, lane)))
        return t()

    pool = _executor(len(path))
    futures = [pool.submit(contextvars.copy_context().run, run, i, t) for i, t in enumerate(thunks)]
    return [f.result() for f in futures]


# ---------------------------------------------------------------------------------------------
# codecs


def ts(dt: datetime | None) -> str | None:
    """Timestamps are stored as the wire string: fixed width, so string order is time order."""
    return iso(dt)


def time_key_range(
    attr: str, *, after: datetime | None, until: datetime | None, before: str | None
) -> tuple[str, dict[str, Any], str | None] | None:
    """The part of a Query's key condition on `attr`, a "<iso time>#<unique>" sort key: keys after
    the instant `after`, before the instant `until` and before the key `before` (a listing's
    position). Returns (" AND …" to append, its values, the upper key) or None when nothing can
    match. BETWEEN is inclusive: the caller skips an item whose key IS the upper key."""
    # "~" sorts after every digit, "#" before every key of that instant
    low = f"{ts(after)}#~" if after is not None else None
    highs = [f"{ts(until)}#"] if until is not None else []
    if before is not None:
        highs.append(before)
    high = min(highs) if highs else None
    if low is not None and high is not None:
        if low >= high:
            return None
        return f" AND {attr} BETWEEN :lo AND :hi", {":lo": {"S": low}, ":hi": {"S": high}}, high
    if high is not None:
        return f" AND {attr} < :hi", {":hi": {"S": high}}, high
    if low is not None:
        return f" AND {attr} > :lo", {":lo": {"S": low}}, None
    return "", {}, None


def same_named(source: Any, *names: str) -> dict[str, Any]:
    """The values stored under the same name on both sides: `names` read from an item (a mapping)
    or from a record (its attributes), for the other side's keyword arguments or keys."""
    if isinstance(source, Mapping):
        return {n: source[n] for n in names}
    return {n: getattr(source, n) for n in names}


def parse_ts(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    text = str(value)
    return to_ms(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC))


def epoch(dt: datetime) -> int:
    return int(dt.timestamp())


def as_int(value: Any, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, Decimal):
        return int(value)
    return int(value)


def as_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    raw = getattr(value, "value", value)  # boto3.dynamodb.types.Binary
    return bytes(raw)


def strip_none(item: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB rejects empty-string key attributes; absent is how we store "none"."""
    return {k: v for k, v in item.items() if v is not None}


def chunks(seq: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


def approx_item_size(item: dict[str, Any]) -> int:
    """A close upper estimate of DynamoDB's item size accounting (names + UTF-8 values)."""
    total = 0
    for k, v in item.items():
        total += len(k.encode()) + _value_size(v)
    return total


def _value_size(v: Any) -> int:
    if v is None:
        return 1
    if isinstance(v, str):
        return len(v.encode())
    if isinstance(v, bytes | bytearray):
        return len(v)
    if isinstance(v, bool):
        return 1
    if isinstance(v, int | float | Decimal):
        return 21
    if isinstance(v, dict):
        return 3 + sum(len(str(k).encode()) + _value_size(x) + 1 for k, x in v.items())
    if isinstance(v, list | tuple | set | frozenset):
        return 3 + sum(_value_size(x) + 1 for x in v)
    raw = getattr(v, "value", None)
    if isinstance(raw, bytes | bytearray):
        return len(raw)
    return len(str(v).encode())


_SER: Any = None
_DESER: Any = None


def to_ddb(item: dict[str, Any]) -> dict[str, Any]:
    """Python values -> DynamoDB attribute values (None values dropped)."""
    global _SER
    if _SER is None:
        from boto3.dynamodb.types import TypeSerializer

        _SER = TypeSerializer()
    return {k: _SER.serialize(v) for k, v in item.items() if v is not None}


def val(v: Any) -> dict[str, Any]:
    """One Python value -> a DynamoDB attribute value."""
    return to_ddb({"v": v})["v"]


def from_ddb(item: dict[str, Any] | None) -> dict[str, Any] | None:
    """DynamoDB attribute values -> Python values (numbers come back as Decimal)."""
    global _DESER
    if item is None:
        return None
    if _DESER is None:
        from boto3.dynamodb.types import TypeDeserializer

        _DESER = TypeDeserializer()
    return {k: _DESER.deserialize(v) for k, v in item.items()}


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run one SDK call; every SDK exception becomes a port error."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return fn(*args, **kwargs)
    except (ClientError, BotoCoreError) as exc:
        raise translate_client_error(exc) from None


WRITE_ID = "_w"


def write_id() -> dict[str, str]:
    """A fresh id stamped on a conditional write, so a retry can recognise its own earlier write."""
    return {"S": secrets.token_hex(8)}


def conditional_put(
    client: Any,
    *,
    table: str,
    item: dict[str, Any],
    key_names: Sequence[str],
    condition: str,
    values: dict[str, Any] | None = None,
    names: dict[str, str] | None = None,
) -> None:
    """PutItem under a condition, safe under the SDK's automatic retries: when a first attempt
    landed but its response was lost (a timeout), the retry fails its condition against our own
    write. Each call stamps a fresh write id on the item (the SDK resends the same request body
    on a retry), so a failed condition over an item carrying OUR write id counts as success;
    any other stored item is a real Conflict."""
    stamp = write_id()
    req: dict[str, Any] = {
        "TableName": table,
        "Item": {**item, WRITE_ID: stamp},
        "ConditionExpression": condition,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if values:
        req["ExpressionAttributeValues"] = values
    if names:
        req["ExpressionAttributeNames"] = names
    from botocore.exceptions import ClientError

    try:
        client.put_item(**req)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            stored = exc.response.get("Item") or {}
            if stored.get(WRITE_ID) == stamp:
                return
        raise translate_client_error(exc) from None
    except Exception as exc:
        raise translate_client_error(exc) from None


def answers(op: Callable[..., Any], req: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each answer of a paginated Query or Scan (`op`), following LastEvaluatedKey."""
    req = dict(req)
    while True:
        out = call(op, **req)
        yield out
        lek = out.get("LastEvaluatedKey")
        if not lek:
            return
        req["ExclusiveStartKey"] = lek


def query_all(client: Any, req: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every raw item of a Query, following LastEvaluatedKey."""
    for out in answers(client.query, req):
        yield from out.get("Items", [])


class DynamoStore:
    """A store on one DynamoDB table (`TABLE`, named under the deployment's `prefix`)."""

    TABLE: ClassVar[TableSpec]

    def __init__(self, clients: AwsClients, prefix: str) -> None:
        self._c = clients
        self.table = self.TABLE.physical_name(prefix)

    @property
    def _db(self) -> Any:
        return self._c.dynamodb

    def _put_new(self, item: dict[str, Any], key_names: Sequence[str]) -> None:
        """Write `item` (plain values) under a key no item holds yet (Conflict otherwise)."""
        conditional_put(
            self._db, table=self.table, item=to_ddb(item), key_names=key_names, condition="attribute_not_exists(pk)"
        )

    def _index_request(self, index: str, cond: str, values: dict[str, Any], **more: Any) -> dict[str, Any]:
        """A Query request on one of the table's indexes (`more`: ScanIndexForward, Limit, ...)."""
        return {
            "TableName": self.table,
            "IndexName": index,
            "KeyConditionExpression": cond,
            "ExpressionAttributeValues": values,
            **more,
        }
