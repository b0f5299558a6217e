"""DynamoDB keys: the one place a key is built from a tenant and caller values, and the one check
that an item read back belongs to the caller's tenant (see docs/table-design.md, "Key encoding").

A key is the tenant followed by its components, joined by `#`. The tenant must fit the id grammar
(`fleetmem.tokens.ID_PATTERN`, which admits no separator); a tenant outside it is refused with
`InvalidTenant`, an internal error, before any request is built. Every other component is escaped:
`%`, `#`, `*` and `~` (the escape itself, the separator, the word-prefix marker and the first
character of the reserved counter names) become `%25`, `%23`, `%2A` and `%7E`. So no value of any
field can end a component early or spell a reserved name, the encoding is injective, and a value
without those four characters is stored exactly as before the escaping existed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from fleetmem.adapters.aws.changes import PENDING
from fleetmem.adapters.aws.dynamo import from_ddb
from fleetmem.tokens import id_problem

log = logging.getLogger("fleetmem.keys")

SEP = "#"
#: Reserved components (counters): escaping turns a caller's "~" into "%7E", so none can spell them.
SEQ = "~seq"
CHANGE = "~chg"
#: Ends the word-prefix keys of the pages `by_word` index (an escaped word never holds it).
PREFIX_MARK = "*"
_ESCAPE = str.maketrans({"%": "%25", SEP: "%23", PREFIX_MARK: "%2A", "~": "%7E"})


class InvalidTenant(RuntimeError):
    """A tenant id outside the id grammar reached a store: a bug upstream, never a caller error."""


def tenant(value: str) -> str:
    """The tenant as it leads every key; refuses one outside the id grammar."""
    if id_problem("tenant", value):
        raise InvalidTenant("a tenant id outside the id grammar reached the DynamoDB stores")
    return value


def part(value: str) -> str:
    """One escaped key component."""
    return value.translate(_ESCAPE)


def key(tenant_id: str, *parts: str) -> str:
    """`<tenant>#<part>#<part>…`, each part escaped."""
    return SEP.join((tenant(tenant_id), *(part(p) for p in parts)))


def reserved(tenant_id: str, name: str) -> str:
    """The key of a tenant's counter item (`SEQ`, `CHANGE`), which no escaped value can equal."""
    return f"{tenant(tenant_id)}{SEP}{name}"


def prefix_key(tenant_id: str, prefix: str) -> str:
    """A word-prefix key of the pages `by_word` index: never equal to a whole-word key."""
    return key(tenant_id, prefix) + PREFIX_MARK


def owned(item: dict[str, Any], tenant_id: str, *, table: str) -> bool:
    """True when an item read back is the tenant's: its stored `tenant` (when it has one) is the
    tenant and its `pk` starts with the tenant's key prefix. Anything else is logged (the table
    only, never the item) and is to be treated as missing."""
    stored = item.get("tenant")
    pk = item.get("pk")
    ok = (stored is not None or pk is not None) and (
        (stored is None or stored == tenant_id) and (pk is None or str(pk).startswith(tenant_id + SEP))
    )
    if not ok:
        log.error("foreign item dropped", extra={"event": "foreign_item_dropped", "table": table})
    return ok


def owned_items(raws: Iterable[dict[str, Any] | None], tenant_id: str, *, table: str) -> Iterator[dict[str, Any]]:
    """The items of raw DynamoDB answers (GetItem, Query, BatchGetItem, Scan pages) that are the
    tenant's, decoded; every other item is dropped as if missing (`owned`)."""
    for raw in raws:
        item = from_ddb(raw)
        if item and owned(item, tenant_id, table=table):
            yield item


def numbered_changes(table: str, tenant_id: str, seq: int, *, page_size: int) -> dict[str, Any]:
    """The `by_change` Query of a tenant's numbered changes after `seq`, ascending: positions only
    (`cs` below `PENDING`, D21: a pending change is never a position). The caller answers nothing
    when `seq >= PENDING - 1` (nothing is above it, and that BETWEEN would be refused)."""
    return {
        "TableName": table,
        "IndexName": "by_change",
        "KeyConditionExpression": "tp = :k AND cs BETWEEN :s AND :top",
        "ExpressionAttributeValues": {
            ":k": {"S": tenant(tenant_id)},
            ":s": {"N": str(int(seq) + 1)},
            ":top": {"N": str(PENDING - 1)},
        },
        "ScanIndexForward": True,
        "Limit": page_size,
    }
