"""DynamoDB change numbering (D14 change sequences, D21 "commit first, number on read"): pending
change numbers, the numbering pass, the counter, the change floor of a time position, the settle
horizon of the eventually consistent change indexes, and the backfill of unnumbered items.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetmem.adapters.aws.dynamo import answers, as_int, call, chunks, parallel, query_all, translate_client_error, ts
from fleetmem.errors import Conflict, Unavailable

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

    return PENDING + (((_time.time_ns() << 20) | secrets.randbits(20)) << 2)


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


@dataclass(frozen=True)
class _Pass:
    """What one numbering pass numbers with: the table, the counter's key (its attribute names are
    every item's key names too) and the time stamp (`ct`) the numbers get."""

    table: str
    counter_key: dict[str, Any]
    stamp: str

    @property
    def key_names(self) -> list[str]:
        return list(self.counter_key)


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
    run = _Pass(table, counter_key, str(ts(now or datetime.now(UTC))))
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
            _number_batch(client, run, items, out)
    return out


def _number_batch(client: Any, run: _Pass, items: list[dict[str, Any]], out: Numbering) -> None:
    import random as _random
    import time as _time
    import uuid as _uuid

    from botocore.exceptions import ClientError

    table, counter_key, key_names = run.table, run.counter_key, run.key_names
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
        actions = _numbering_actions(run, [todo[key] for key in order], prev)
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
            item["ct"] = {"S": run.stamp}
            out.fresh[key] = (prev + 1 + i, item)
        _change_guess[slot] = out.top = prev + k
        return
    raise Unavailable("dynamodb change counter is contended", retry_after_seconds=1, reason="contended")


def _numbering_actions(run: _Pass, ordered: list[dict[str, Any]], prev: int) -> list[dict[str, Any]]:
    """One transaction: the counter moves from `prev` to `prev + len(ordered)` (created when `prev` is 0)
    and each item, still pending as read, takes the next number in order."""
    table, counter_key, stamp = run.table, run.counter_key, run.stamp
    k = len(ordered)
    counter: dict[str, Any] = {
        "TableName": table,
        "Key": counter_key,
        "UpdateExpression": "SET n = :n, typ = :typ, ct = :ct",
        "ExpressionAttributeValues": {":n": {"N": str(prev + k)}, ":typ": {"S": "counter"}, ":ct": {"S": stamp}},
        "ConditionExpression": "attribute_not_exists(n)",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    if prev:
        counter["ConditionExpression"] = "n = :prev"
        counter["ExpressionAttributeValues"][":prev"] = {"N": str(prev)}
    actions: list[dict[str, Any]] = [{"Update": counter}]
    for i, item in enumerate(ordered):
        actions.append(
            {
                "Update": {
                    "TableName": table,
                    "Key": {n: item[n] for n in run.key_names},
                    "UpdateExpression": "SET cs = :n, ct = :ct",
                    "ConditionExpression": "cs = :p",
                    "ExpressionAttributeValues": {
                        ":n": {"N": str(prev + 1 + i)},
                        ":ct": {"S": stamp},
                        ":p": item["cs"],
                    },
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
        )
    return actions


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


def change_floor(
    client: Any,
    *,
    table: str,
    counter_key: dict[str, Any],
    tp: str,
    since_query: dict[str, Any] | None,
    numbering: Numbering | None = None,
) -> int:
    """The highest change number below every change written after a time position (D14 cursors from
    `since`): the counter's value once pending items are numbered (D21), lowered to just under the
    smallest `cs` that `since_query` (a Query on a time-ordered index, without TableName) returns.
    None: no time position, the counter itself. An item the index still shows pending was either
    numbered by this pass (its number is known) or is read from the table (consistent): numbered
    meanwhile by another reader, it counts with that number; still pending, it will get one above
    the counter."""
    passes: list[Any] = parallel(
        [
            lambda: numbering or number_pending(client, table=table, counter_key=counter_key, tp=tp),
            lambda: read_counter(client, table=table, key=counter_key),
        ]
    )
    numbering, read = passes
    # the counter as read next to the numbering pass, or as that pass left it, whichever is later:
    # either is a value readers saw, and the later one covers what this pass numbered
    top = max(int(read), numbering.top or 0)
    if since_query is None:
        return top
    key_names = list(counter_key)
    names = {f"#k{i}": k for i, k in enumerate(key_names)}
    req = {
        "TableName": table,
        "ProjectionExpression": ", ".join([*names, "cs"]),
        **since_query,
        "ExpressionAttributeNames": names,
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
                client.update_item,
                TableName=table,
                Key=key,
                UpdateExpression="SET cs = :cs",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(cs)",
                ExpressionAttributeValues={":cs": {"N": str(pending_change())}},
            )
            marked += 1
        except Conflict:
            pass
    if marked:
        number_pending(client, table=table, counter_key=counter_key, tp=tp)
    return marked
