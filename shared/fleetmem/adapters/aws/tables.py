"""The DynamoDB table definitions, as plain data (see docs/table-design.md).

ONE definition for everyone: the adapters read key/index names from here, the tests create tables
on DynamoDB Local / moto from it (`create_tables`), and the CDK app builds its `TableV2`s from it.
Pure Python: importing this module imports no SDK.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

KeyType = Literal["S", "N", "B"]


@dataclass(frozen=True)
class KeyAttr:
    name: str
    type: KeyType = "S"


@dataclass(frozen=True)
class Gsi:
    name: str
    partition: KeyAttr
    sort: KeyAttr | None = None
    #: "ALL", "KEYS_ONLY" or a tuple of non-key attributes to INCLUDE
    projection: str | tuple[str, ...] = "ALL"


@dataclass(frozen=True)
class TableSpec:
    #: logical name; the physical name is f"{prefix}-{logical}"
    logical: str
    partition: KeyAttr
    sort: KeyAttr | None = None
    gsis: tuple[Gsi, ...] = ()
    #: attribute holding an epoch-seconds expiry (DynamoDB TTL); reads still filter it
    ttl_attribute: str | None = None
    #: DynamoDB Streams view type feeding the search indexer, or None
    stream: str | None = None
    purpose: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def physical_name(self, prefix: str) -> str:
        return f"{prefix}-{self.logical}"


#: Attributes of the page projection (PageHead) copied onto alias rows so resolution by alias needs
#: no second read.
HEAD_ATTRS: tuple[str, ...] = ("slug", "title", "ptype", "visibility", "updated_at", "last_retrieved_at")

#: What the facts GSIs carry besides their keys: the fact attributes the queries read. The ~4 KB
#: `vector` is projected only where a query reads it: remember's near-duplicate check compares
#: vectors of the facts it gets from `by_entity` and `by_time` (within its two round trips, so it
#: cannot fetch them afterwards); `by_session` (recall / context_pack by session) never reads it.
FACT_INDEX_ATTRS: tuple[str, ...] = (
    "typ", "tenant", "fact_id", "seq", "text", "kind", "entity_slug", "provenance", "visibility",
    "session_id", "client_id", "created_at", "valid_until", "expired_at", "expired_reason",
    "expired_by", "superseded_by", "supersedes", "vector_model",
)  # fmt: skip
FACT_INDEX_ATTRS_WITH_VECTOR: tuple[str, ...] = (*FACT_INDEX_ATTRS, "vector")
#: `by_time` also carries `cs` (delta turns a `since` into a change position through it); to stay
#: within DynamoDB's 20 projected attributes per index it leaves out who expired a fact and why,
#: which only trace_fact shows (from the base item).
FACT_TIME_ATTRS: tuple[str, ...] = (
    *(a for a in FACT_INDEX_ATTRS_WITH_VECTOR if a not in ("expired_reason", "expired_by")),
    "cs",
)

FACTS = TableSpec(
    logical="facts",
    partition=KeyAttr("pk"),  # "<tenant>#<fact_id>"; counters "<tenant>#~seq" and "<tenant>#~chg"
    gsis=(
        # facts about one entity, newest first
        Gsi("by_entity", KeyAttr("ent"), KeyAttr("ck"), FACT_INDEX_ATTRS_WITH_VECTOR),  # ent = "<tenant>#<entity_slug>"
        # facts written in one session, newest first
        Gsi("by_session", KeyAttr("sess"), KeyAttr("ck"), FACT_INDEX_ATTRS),  # sess = "<tenant>#<session_id>"
        # the tenant's facts by creation time (recent facts, since filters)
        Gsi("by_time", KeyAttr("tp"), KeyAttr("ck"), FACT_TIME_ATTRS),  # tp = "<tenant>"
        # D14/D21: the tenant's fact changes in numbering order (cs = change number, pending >= 2**53
        # until a reader numbers it; ct = when it was numbered, for the settle horizon)
        Gsi("by_change", KeyAttr("tp"), KeyAttr("cs", "N"), projection=(*FACT_INDEX_ATTRS, "ct")),
        # D19: facts with a TTL by expiry time (xp = "<tenant>" only when valid_until is set;
        # xk = "<valid_until iso>#<seq:012d>"), for delta's TTL retractions
        Gsi("by_expiry", KeyAttr("xp"), KeyAttr("xk"), projection=FACT_INDEX_ATTRS),
    ),
    stream="NEW_AND_OLD_IMAGES",
    purpose="facts (source of truth) and the per-tenant fact sequence counter",
)

PAGES = TableSpec(
    logical="pages",
    partition=KeyAttr("pk"),  # "<tenant>#<slug>"
    sort=KeyAttr("sk"),  # "P" the page; "A#<alias>", "L#<target>#<type>", "W#<word>" derived rows
    # (pk "<tenant>#~chg", sk "C" is the tenant's page change counter)
    gsis=(
        Gsi("by_alias", KeyAttr("ak")),  # "A#" rows: ak = "<tenant>#<normalized alias>"
        Gsi("by_title", KeyAttr("tk")),  # page row: tk = "<tenant>#<lower(title)>"
        Gsi("by_leaf", KeyAttr("lk")),  # page row: lk = "<tenant>#<last slug segment>"
        Gsi("by_target", KeyAttr("gk"), KeyAttr("src")),  # "L#" rows: gk = "<tenant>#<target slug>"
        Gsi("by_word", KeyAttr("wk")),  # "W#" rows: wk = "<tenant>#<word>"
        Gsi("by_updated", KeyAttr("tp"), KeyAttr("us")),  # page row: us = "<updated_at iso>#<slug>"
        Gsi("by_slug", KeyAttr("tp"), KeyAttr("slug")),  # page row: list pages by slug
        # D14/D21: page rows and tombstones in numbering order (cs = change number of the last
        # write, pending >= 2**53 until a reader numbers it; ct = when it was numbered)
        Gsi("by_change", KeyAttr("tp"), KeyAttr("cs", "N"), projection=(*HEAD_ATTRS, "tenant", "ct")),
    ),
    stream="NEW_AND_OLD_IMAGES",
    purpose="pages with their alias, link and word rows",
)

CURSORS = TableSpec(
    logical="cursors",
    partition=KeyAttr("pk"),  # "<tenant>#<client_id>"
    sort=KeyAttr("sk"),  # session_id
    # a tenant's cursors, most recently woken first (list_followers); every cursor item carries
    # both attributes
    gsis=(Gsi("by_tenant", KeyAttr("tenant"), KeyAttr("touched_at")),),
    ttl_attribute="ttl",  # touched_at + SESSION_IDLE_DAYS, epoch seconds
    purpose="delta session cursors",
)

CLIENTS = TableSpec(
    logical="clients",
    partition=KeyAttr("pk"),  # "<token sha256 hex>": the credential decides the tenant
    gsis=(
        Gsi("by_token_id", KeyAttr("token_id")),
        Gsi("by_tenant", KeyAttr("tenant"), KeyAttr("created_at")),
    ),
    purpose="API credentials (hash only)",
)

IDEMPOTENCY = TableSpec(
    logical="idempotency",
    partition=KeyAttr("pk"),  # "<tenant>#<client_id>#<request id>" (D22; before it "...#<verb>#<key>")
    # D22: a client's receipts newest first (list_write_requests); the stored answer is not projected
    gsis=(
        Gsi(
            "by_owner",
            KeyAttr("owner"),  # "<tenant>#<client_id>"
            KeyAttr("created_at"),
            (
                "tenant",
                "client_id",
                "verb",
                "ikey",
                "request_hash",
                "expires_at",
                "lease_until",
                "claim_id",
                "client_request_id",
                "state",
                "updated_at",
                "holder",
                "outcome",
            ),
        ),
    ),
    ttl_attribute="ttl",  # expires_at, epoch seconds
    purpose="idempotency claims, write receipts and stored results (24 h)",
)

AUDIT = TableSpec(
    logical="audit",
    partition=KeyAttr("pk"),  # "<tenant>#<subject>"
    sort=KeyAttr("sk"),  # "<at iso>#<unique>"
    # the tenant's events newest first (list_activity): every row carries both attributes, so rows
    # written before the index existed are in it too
    gsis=(Gsi("by_tenant", KeyAttr("tenant"), KeyAttr("sk")),),
    purpose="append-only audit rows per subject",
)

TABLES: tuple[TableSpec, ...] = (FACTS, PAGES, CURSORS, CLIENTS, IDEMPOTENCY, AUDIT)


def table_names(prefix: str) -> dict[str, str]:
    """Logical name -> physical table name."""
    return {t.logical: t.physical_name(prefix) for t in TABLES}


def _projection(p: str | tuple[str, ...]) -> dict[str, Any]:
    if isinstance(p, tuple):
        return {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(p)}
    return {"ProjectionType": p}


def create_table_request(spec: TableSpec, prefix: str) -> dict[str, Any]:
    """The CreateTable request (on-demand billing) for one table."""
    attrs: dict[str, str] = {spec.partition.name: spec.partition.type}
    schema = [{"AttributeName": spec.partition.name, "KeyType": "HASH"}]
    if spec.sort:
        attrs[spec.sort.name] = spec.sort.type
        schema.append({"AttributeName": spec.sort.name, "KeyType": "RANGE"})
    gsis = []
    for g in spec.gsis:
        attrs[g.partition.name] = g.partition.type
        ks = [{"AttributeName": g.partition.name, "KeyType": "HASH"}]
        if g.sort:
            attrs[g.sort.name] = g.sort.type
            ks.append({"AttributeName": g.sort.name, "KeyType": "RANGE"})
        gsis.append({"IndexName": g.name, "KeySchema": ks, "Projection": _projection(g.projection)})
    req: dict[str, Any] = {
        "TableName": spec.physical_name(prefix),
        "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t} for n, t in attrs.items()],
        "KeySchema": schema,
        "BillingMode": "PAY_PER_REQUEST",
    }
    if gsis:
        req["GlobalSecondaryIndexes"] = gsis
    if spec.stream:
        req["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": spec.stream}
    return req


def create_tables(client: Any, prefix: str) -> list[str]:
    """Create every table that does not exist yet (and enable TTL). For tests and local engines;
    production tables come from the CDK app. Returns the names created."""
    existing: set[str] = set()
    for page in client.get_paginator("list_tables").paginate():
        existing.update(page.get("TableNames", []))
    created = []
    for spec in TABLES:
        name = spec.physical_name(prefix)
        if name in existing:
            continue
        client.create_table(**create_table_request(spec, prefix))
        client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})
        if spec.ttl_attribute:
            client.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": spec.ttl_attribute},
            )
        created.append(name)
    return created


def delete_tables(client: Any, prefix: str) -> None:
    """Drop every table of `prefix` that exists (tests)."""
    names = set(table_names(prefix).values())
    for page in client.get_paginator("list_tables").paginate():
        for name in page.get("TableNames", []):
            if name in names:
                client.delete_table(TableName=name)
