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
from datetime import UTC, datetime, timedelta
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
            return Unavailable(
                f"{service} is throttling requests ({code})", retry_after_seconds=2, reason="throttled"
            )
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
            if any(
                r in {"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
                for r in reasons
            ):
                return Unavailable(
                    f"{service} is throttling requests ({code})", retry_after_seconds=2, reason="throttled"
                )
            if any(r == "TransactionConflict" for r in reasons):
                return Conflict(f"{service} transaction conflicted with another write")
            if any(r == "ValidationError" for r in reasons) and _is_size_error(exc):
                return TooLarge(f"{service} item exceeds the 400 KB limit")
            return Unavailable(
                f"{service} transaction was cancelled", retry_after_seconds=1, reason="cancelled"
            )
        if code in {"ValidationException", "ItemCollectionSizeLimitExceededException"} and _is_size_error(
            exc
        ):
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
    """Lazily built, cached, injectable boto3 clients (thread-safe)."""

    def __init__(
        self,
        *,
        region: str = "",
        session: Any = None,
        endpoints: dict[str, str] | None = None,
        clients: dict[str, Any] | None = None,
        max_pool_connections: int = 16,
        read_timeout: float = 10,
        retries: int = 3,
    ) -> None:
        self._read_timeout = read_timeout
        #: retries after the first attempt (botocore's `max_attempts` counts retries only)
        self._retries = retries
        self._region = region or None
        self._session = session
        self._endpoints = dict(endpoints or {})
        self._clients: dict[str, Any] = dict(clients or {})
        self._lock = threading.Lock()
        self._pool = max_pool_connections

    @property
    def session(self) -> Any:
        if self._session is None:
            import boto3

            self._session = boto3.session.Session(region_name=self._region)
        return self._session

    def client(self, service: str) -> Any:
        c = self._clients.get(service)
        if c is not None:
            return c
        with self._lock:
            c = self._clients.get(service)
            if c is None:
                from botocore.config import Config

                cfg = Config(
                    retries={"max_attempts": self._retries, "mode": "standard"},
                    max_pool_connections=self._pool,
                    connect_timeout=2,
                    read_timeout=self._read_timeout,
                )
                kw: dict[str, Any] = {"config": cfg}
                if self._region:
                    kw["region_name"] = self._region
                if service in self._endpoints:
                    kw["endpoint_url"] = self._endpoints[service]
                c = self.session.client(service, **kw)
                self._clients[service] = c
        return c

    @property
    def dynamodb(self) -> Any:
        return self.client("dynamodb")


# ---------------------------------------------------------------------------------------------
# parallel fan-out: independent requests go out together, so they cost one sequential round trip.
# Fan-outs nest (the domain gathers port calls, and a port call may fan out itself): each level has
# its own executor, so a worker waiting on a deeper level can never starve it. Every SDK call can
# name its place (`fanout_path()`): the round-trip budget test derives the critical path from it.

_PATH: contextvars.ContextVar[tuple[tuple[int, int], ...]] = contextvars.ContextVar(
    "fleetmem_aws_fanout", default=()
)
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


# ---------------------------------------------------------------------------------------------
# D14 change sequences, D21 "commit first, number on read": a write commits its item with a
# PENDING change number (a unique value >= 2**53, above every real number) and touches nothing
# shared, so concurrent writers never race. A reader that needs positions first numbers the pending
# items it finds in `by_change`: one TransactWriteItems moves the tenant's counter n -> n+k
# (conditional on n) and sets each item's real number, conditional on the item still carrying the
# pending value it was found with. Numbers therefore follow the order in which readers NUMBER
# items; every number is above every counter value any reader saw before, which is all
# at-least-once delivery needs. Each numbered item (and the counter) records when it was numbered
# (`ct`): the settle horizon of the eventually consistent index counts from there.

#: every change number at or above this is pending (never a position; JSON keeps 2**53 - 1 exact)
PENDING = 2**53
#: a transaction holds at most 100 actions: the counter + 99 items
_NUMBER_BATCH = 99
_NUMBER_ATTEMPTS = 64
_NUMBER_PASSES = 16
_WRITE_ATTEMPTS = 8
_change_guess: dict[tuple[str, str], int] = {}


def pending_change() -> int:
    """A fresh pending change number: 2**53 + (nanosecond clock, 20 random bits), times 4 so a
    write may use up to 4 consecutive values. Unique per write, roughly time-ordered, and exact as a
    DynamoDB Number (about 25 digits of the 38 it keeps)."""
    import time as _time

    return PENDING + ((((_time.time_ns() << 20) | secrets.randbits(20))) << 2)


def is_pending(cs: Any) -> bool:
    return cs is not None and as_int(cs) >= PENDING


def _counter_value(item: dict[str, Any] | None) -> int | None:
    if not item or "n" not in item:
        return None
    return int(item["n"]["N"])


def _reasons(exc: Any) -> list[dict[str, Any]]:
    if (exc.response.get("Error", {}) or {}).get("Code") != "TransactionCanceledException":
        return []
    return [r or {} for r in exc.response.get("CancellationReasons", []) or []]


def transact_pending(client: Any, *, build: Callable[[int], list[dict[str, Any]]]) -> int:
    """Run TransactWriteItems `build(p)` with a fresh pending change number `p` and return it (D21).
    Nothing in it is shared between writers, so there is no counter race; a TransactionConflict
    (another transaction on one of its items at that moment, e.g. a reader numbering it) is retried
    with a short pause. A failed condition is the caller's Conflict."""
    import random as _random
    import time as _time
    import uuid as _uuid

    from botocore.exceptions import ClientError

    for attempt in range(_WRITE_ATTEMPTS):
        p = pending_change()
        try:
            client.transact_write_items(TransactItems=build(p), ClientRequestToken=_uuid.uuid4().hex)
            return p
        except ClientError as exc:
            reasons = _reasons(exc)
            codes = {r.get("Code") for r in reasons}
            if "TransactionConflict" in codes and "ConditionalCheckFailed" not in codes:
                _time.sleep(0.002 * (attempt + 1) * _random.random())
                continue
            raise translate_client_error(exc) from None
        except Exception as exc:
            raise translate_client_error(exc) from None
    raise Unavailable("dynamodb write conflicted repeatedly", retry_after_seconds=1, reason="contended")


def _key_of(item: dict[str, Any], key_names: Sequence[str]) -> tuple[str, ...]:
    return tuple(str(next(iter(item[k].values()))) for k in key_names)


class Numbering:
    """What one numbering pass did: the counter value after it and, by item key, the numbers it
    assigned (raw items as the index or the table showed them, with the new `cs` and `ct`)."""

    def __init__(self) -> None:
        self.top: int | None = None
        self.fresh: dict[tuple[str, ...], tuple[int, dict[str, Any]]] = {}


def number_pending(
    client: Any, *, table: str, counter_key: dict[str, Any], tp: str, now: datetime | None = None
) -> Numbering:
    """Give every pending item of the tenant's `by_change` index a real change number (D21): Query
    `cs >= 2**53`, then per batch of 99 one TransactWriteItems [counter n -> n+k conditional on n]
    + an Update `SET cs, ct` per item conditional on `cs = <the pending value it was found with>`.
    A lost counter race retries with the value the failed condition returned; an item rewritten
    meanwhile is retried with its newer pending value; an item numbered by another reader, or
    deleted, is dropped. Bounded: at most 16 index pages of 99 (an item written after that waits
    for the next reader)."""
    out = Numbering()
    key_names = list(counter_key)
    stamp = str(ts(now or datetime.now(UTC)))
    req: dict[str, Any] = {
        "TableName": table,
        "IndexName": "by_change",
        "KeyConditionExpression": "tp = :k AND cs >= :p",
        "ExpressionAttributeValues": {":k": {"S": tp}, ":p": {"N": str(PENDING)}},
        "ScanIndexForward": True,
        "Limit": _NUMBER_BATCH,
    }
    for page in itertools.islice(answers(client.query, req), _NUMBER_PASSES):
        items = [i for i in page.get("Items", []) if "cs" in i]
        if items:
            _number_batch(client, table=table, counter_key=counter_key, key_names=key_names, items=items,
                          stamp=stamp, out=out)
    return out


def _number_batch(
    client: Any, *, table: str, counter_key: dict[str, Any], key_names: Sequence[str],
    items: list[dict[str, Any]], stamp: str, out: Numbering,
) -> None:
    import random as _random
    import time as _time
    import uuid as _uuid

    from botocore.exceptions import ClientError

    slot = (table, "#".join(_key_of(counter_key, key_names)))
    todo = {_key_of(i, key_names): i for i in items}
    prev: int | None = _change_guess.get(slot)
    for attempt in range(_NUMBER_ATTEMPTS):
        if not todo:
            return
        if prev is None:
            got = call(client.get_item, TableName=table, Key=counter_key, ConsistentRead=True)
            prev = _counter_value(got.get("Item")) or 0
        order = sorted(todo, key=lambda k: as_int(todo[k]["cs"]["N"]))
        k = len(order)
        counter: dict[str, Any] = {
            "TableName": table, "Key": counter_key,
            "UpdateExpression": "SET n = :n, typ = :typ, ct = :ct",
            "ExpressionAttributeValues": {":n": {"N": str(prev + k)}, ":typ": {"S": "counter"}, ":ct": {"S": stamp}},
            "ConditionExpression": "attribute_not_exists(n)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if prev:
            counter["ConditionExpression"] = "n = :prev"
            counter["ExpressionAttributeValues"][":prev"] = {"N": str(prev)}
        actions: list[dict[str, Any]] = [{"Update": counter}]
        for i, key in enumerate(order):
            item = todo[key]
            actions.append({"Update": {
                "TableName": table, "Key": {n: item[n] for n in key_names},
                "UpdateExpression": "SET cs = :n, ct = :ct", "ConditionExpression": "cs = :p",
                "ExpressionAttributeValues": {":n": {"N": str(prev + 1 + i)}, ":ct": {"S": stamp}, ":p": item["cs"]},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }})
        try:
            client.transact_write_items(TransactItems=actions, ClientRequestToken=_uuid.uuid4().hex)
        except ClientError as exc:
            reasons = _reasons(exc)
            if not reasons:
                raise translate_client_error(exc) from None
            codes = [r.get("Code") for r in reasons]
            if any(c not in (None, "None", "ConditionalCheckFailed", "TransactionConflict") for c in codes):
                raise translate_client_error(exc) from None
            if codes[0] == "ConditionalCheckFailed":
                prev = _counter_value(reasons[0].get("Item"))
            for key, reason in zip(order, reasons[1:], strict=False):
                if reason.get("Code") != "ConditionalCheckFailed":
                    continue
                now_item = reason.get("Item") or {}
                if "cs" in now_item and is_pending(now_item["cs"]["N"]):
                    todo[key] = now_item  # rewritten meanwhile: number its newer version
                else:
                    del todo[key]  # numbered by another reader, or deleted
            if "TransactionConflict" in codes:
                prev = None
                _time.sleep(0.002 * min(attempt + 1, 10) * _random.random())
            continue
        except Exception as exc:
            raise translate_client_error(exc) from None
        for i, key in enumerate(order):
            item = dict(todo[key])
            item["cs"] = {"N": str(prev + 1 + i)}
            item["ct"] = {"S": stamp}
            out.fresh[key] = (prev + 1 + i, item)
        _change_guess[slot] = out.top = prev + k
        return
    raise Unavailable("dynamodb change counter is contended", retry_after_seconds=1, reason="contended")


def change_time(item: dict[str, Any], written: str) -> str:
    """When an item got its change number: `ct` (D21), or, for an item numbered in its own write
    before D21, its write time."""
    return str(item.get("ct") or item.get(written, ""))


def settle_horizon(now: datetime | None, settle: timedelta) -> datetime | None:
    """D14 on DynamoDB: the change indexes are GSIs, which are eventually consistent, so a reader
    lists changes (in change-number order) only up to the first one written after `now - settle`:
    a number below a listed one can no longer be missing from the index. None: no horizon."""
    return now - settle if now is not None and settle > timedelta(0) else None


def read_counter(client: Any, *, table: str, key: dict[str, Any]) -> int:
    """The counter's current value (strongly consistent; 0 when it does not exist yet)."""
    out = call(client.get_item, TableName=table, Key=key, ConsistentRead=True)
    return _counter_value(out.get("Item")) or 0


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


def change_floor(
    client: Any, *, table: str, counter_key: dict[str, Any], tp: str, since_query: dict[str, Any] | None,
    numbering: Numbering | None = None,
) -> int:
    """The highest change number below every change written after a time position (D14 cursors from
    `since`): the counter's value once pending items are numbered (D21), lowered to just under the
    smallest `cs` that `since_query` (a Query on a time-ordered index, without TableName) returns.
    None: no time position, the counter itself. An item the index still shows pending was either
    numbered by this pass (its number is known) or is read from the table (consistent): numbered
    meanwhile by another reader, it counts with that number; still pending, it will get one above
    the counter."""
    passes: list[Any] = parallel([
        lambda: numbering or number_pending(client, table=table, counter_key=counter_key, tp=tp),
        lambda: read_counter(client, table=table, key=counter_key),
    ])
    numbering, read = passes
    # the counter as read next to the numbering pass, or as that pass left it, whichever is later:
    # either is a value readers saw, and the later one covers what this pass numbered
    top = max(int(read), numbering.top or 0)
    if since_query is None:
        return top
    key_names = list(counter_key)
    names = {f"#k{i}": k for i, k in enumerate(key_names)}
    req = {
        "TableName": table, "ProjectionExpression": ", ".join([*names, "cs"]),
        **since_query, "ExpressionAttributeNames": names,
    }
    low: int | None = None
    unknown: list[dict[str, Any]] = []
    for i in query_all(client, req):
        if "cs" not in i:
            continue
        cs = as_int(i["cs"]["N"])
        if cs >= PENDING:
            known = numbering.fresh.get(_key_of(i, key_names))
            if known is None:
                unknown.append({k: i[k] for k in key_names})
                continue
            cs = known[0]
        low = cs if low is None else min(low, cs)
    for group in chunks(unknown, 100):
        request: dict[str, Any] = {table: {"Keys": list(group), "ConsistentRead": True, "ProjectionExpression": "cs"}}
        while request:
            got = call(client.batch_get_item, RequestItems=request)
            for i in got.get("Responses", {}).get(table, []):
                if "cs" in i and not is_pending(i["cs"]["N"]):
                    cs = as_int(i["cs"]["N"])
                    low = cs if low is None else min(low, cs)
            request = got.get("UnprocessedKeys") or {}
    return top if low is None else min(top, low - 1)


def backfill_changes(
    client: Any, *, table: str, counter_key: dict[str, Any], tp: str, item_keys: Sequence[dict[str, Any]]
) -> int:
    """Give each item of `item_keys` that has no change number (`cs`) one, as if it had just been
    written (D21): a pending number (UpdateItem `attribute_exists(pk) AND attribute_not_exists(cs)`,
    so an item numbered by a write meanwhile, or deleted, is skipped), then one numbering pass for
    all of them; returns how many were marked."""
    marked = 0
    for key in item_keys:
        try:
            call(
                client.update_item, TableName=table, Key=key, UpdateExpression="SET cs = :cs",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(cs)",
                ExpressionAttributeValues={":cs": {"N": str(pending_change())}},
            )
            marked += 1
        except Conflict:
            pass
    if marked:
        number_pending(client, table=table, counter_key=counter_key, tp=tp)
    return marked
