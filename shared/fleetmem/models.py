"""Domain records shared by the domain, the ports and both adapter sets.

All timestamps are timezone-aware UTC datetimes truncated to milliseconds (the wire precision;
see `fleetmem.timefmt`). Vectors never appear in a model that reaches the wire: they travel as
`bytes` (float32 little-endian) between the domain and the stores only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fleetmem.protocol import ContentOrigin, FactKind, Scope, TrustTier, Visibility


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Caller(Record):
    """Who is calling. `tenant` comes from the credential only, never from arguments."""

    tenant: str
    client_id: str
    scopes: frozenset[Scope] = frozenset({"read"})
    #: Every MCP/HTTP caller is remote (fail-closed); only the CLI on an open store is trusted-local.
    remote: bool = True
    #: The usage-plan tier its credential names (AWS: the clients table); None: the stage's default.
    tier: str | None = None

    def has_scope(self, needed: Scope) -> bool:
        if "admin" in self.scopes:
            return True
        if needed == "read":
            return bool({"read", "write"} & self.scopes)
        return needed in self.scopes


class Fact(Record):
    tenant: str
    fact_id: str  # opaque string id (remember's `id`, recall's `fact_id`, forget's input)
    seq: int  # per-tenant integer sequence (D9: recall's legacy `facts[].id`)
    text: str
    kind: FactKind = "fact"
    entity_slug: str | None = None
    provenance: str
    visibility: Visibility = "world"
    session_id: str | None = None
    client_id: str  # the authenticated client that wrote it
    created_at: datetime
    valid_until: datetime | None = None  # TTL; read-time expiry (D8)
    expired_at: datetime | None = None  # set by forget or supersession
    expired_reason: str | None = None
    expired_by: str | None = None
    superseded_by: str | None = None
    supersedes: str | None = None
    #: float32 little-endian unit vector and the model that produced it (None: not embedded).
    vector: bytes | None = Field(default=None, repr=False)
    vector_model: str | None = None
    #: remember's `content_origin` (D24); None on facts saved without one (and on older rows)
    content_origin: ContentOrigin | None = None

    def is_active(self, now: datetime) -> bool:
        if self.expired_at is not None or self.superseded_by is not None:
            return False
        return self.valid_until is None or self.valid_until > now

    def status(self, now: datetime) -> FactStatus:
        """The fact's state at `now`: superseded (replaced by another fact), expired (its
        `valid_until` passed before anything else retracted it), forgotten, or active."""
        if self.superseded_by is not None:
            return "superseded"
        if (
            self.valid_until is not None
            and self.valid_until <= now
            and (self.expired_at is None or self.valid_until <= self.expired_at)
        ):
            return "expired"
        return "forgotten" if self.expired_at is not None else "active"


def provenance_matches(provenance: str, needle: str) -> bool:
    """list_facts' `provenance` filter: `needle` is a case-insensitive substring of `provenance`."""
    return needle.casefold() in provenance.casefold()


class Link(Record):
    type: str = "related"
    target: str  # slug of the other page
    context: str | None = None


class TimelineEntry(Record):
    date: str  # ISO date or datetime as written
    text: str


class Page(Record):
    tenant: str
    slug: str
    title: str
    type: str | None = None
    aliases: tuple[str, ...] = ()
    summary: str | None = None
    visibility: Visibility = "world"
    body: str = ""  # markdown without frontmatter
    links: tuple[Link, ...] = ()
    timeline: tuple[TimelineEntry, ...] = ()
    frontmatter: dict[str, Any] = Field(default_factory=dict)  # other frontmatter keys, kept verbatim
    created_at: datetime
    updated_at: datetime
    last_retrieved_at: datetime | None = None
    author: str | None = None  # client id of the last writer


class PageHead(Record):
    """The small projection of a page that lists, resolution and delta need."""

    slug: str
    title: str
    type: str | None = None
    visibility: Visibility = "world"
    updated_at: datetime
    last_retrieved_at: datetime | None = None


class PageTombstone(Record):
    """What a deleted page leaves for delta's followers (retracted[], reason "deleted")."""

    slug: str
    visibility: Visibility = "world"
    deleted_at: datetime


class PageMatch(Record):
    page: PageHead
    via: Literal["alias", "title", "slug", "suffix"]
    key: str = ""  # `alias` way: the stored alias key that matched (a batch of names tells its names apart)


class Backlink(Record):
    source: str  # slug of the page holding the link
    type: str
    context: str | None = None


class Cursor(Record):
    """A delta session cursor keyed (tenant, client_id, session_id)."""

    tenant: str
    client_id: str
    session_id: str
    since: datetime
    slug: str = ""
    touched_at: datetime  # last wake; idle cursors expire after SESSION_IDLE_DAYS
    incomplete_streak: int = 0
    version: int = 0  # optimistic concurrency: advance is conditional on the stored version
    #: D14 exact positions: the page and fact change sequences delivered up to (None: a cursor
    #: written before change sequences existed; the position is then derived from since/slug).
    page_seq: int | None = None
    fact_seq: int | None = None
    #: D19: the TTL-expiry position "<valid_until ISO>#<fact seq>" reported up to (None: derived from since).
    expiry: str | None = None


class ClientRecord(Record):
    """An API credential. Only the SHA-256 of the token is stored."""

    token_hash: str
    token_id: str  # short public handle used by `token list` / `token revoke`
    tenant: str
    client_id: str
    scopes: frozenset[Scope]
    created_at: datetime
    revoked_at: datetime | None = None
    #: The usage-plan tier on an AWS stage (`fleetmem token create --tier`); None: the stage's
    #: default tier. The local server has no usage plans and does not keep it.
    tier: str | None = None
    #: When the token last authenticated a call, recorded at most once a minute per token
    #: (`fleetmem.tokens.ApiTokenAuth`); None: not used since it was recorded.
    last_used_at: datetime | None = None


class IdempotencyRecord(Record):
    tenant: str
    client_id: str
    verb: str
    key: str
    request_hash: str
    result: dict[str, Any] | None = None  # None while the first call is in flight
    created_at: datetime
    expires_at: datetime
    #: In flight, the claim holds the key until then; once it has passed (the call was killed
    #: before its result), a retry with the same arguments takes the key over. None: no lease
    #: (the claim holds the key until `expires_at`).
    lease_until: datetime | None = None
    #: This claim's own id, so a call releasing its claim never drops one that took the key over.
    claim_id: str | None = None
    #: D22 receipt fields. `key` is the request id (a UUID); the id the caller sent when it was not
    #: one, `running` until the write completes (`committed`) or is cancelled (`cancelled`), when
    #: the row last changed, the process that claimed it (local server: host:pid:start; None on
    #: Lambda, whose death cannot be observed), and a small outcome (ids only, never content).
    client_request_id: str | None = None
    state: Literal["running", "committed", "cancelled"] = "running"
    updated_at: datetime | None = None
    holder: str | None = None
    outcome: dict[str, Any] | None = None


class AuditEvent(Record):
    tenant: str
    subject: str  # fact id (or page slug) the event is about
    action: Literal["write", "supersede", "expire", "purge", "put_page", "delete_page"]
    actor: str  # client id
    at: datetime
    reason: str | None = None
    provenance: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class SearchDoc(Record):
    """One unit of the search index: a page chunk or a fact."""

    tenant: str
    doc_id: str  # "chunk:<slug>#<n>" or "fact:<fact_id>"
    kind: Literal["chunk", "fact"]
    slug: str  # page slug for chunks; entity slug ("" when none) for facts
    title: str
    text: str  # the chunk's searchable text (title included) or the fact text
    visibility: Visibility = "world"
    fact_id: str | None = None
    updated_at: datetime
    vector: bytes | None = Field(default=None, repr=False)
    vector_model: str | None = None


def page_docs_problem(tenant: str, slug: str, docs: Sequence[SearchDoc]) -> str | None:
    """Why `docs` cannot replace the chunks of page (tenant, slug), or None when they can."""
    for d in docs:
        if d.tenant != tenant or d.kind != "chunk" or d.slug != slug:
            return f"{d.doc_id!r} is not a chunk of page {slug!r} of this tenant"
    return None


class SearchHit(Record):
    doc_id: str
    kind: Literal["chunk", "fact"]
    slug: str
    title: str
    text: str
    fact_id: str | None = None
    score: float  # BM25-like for keyword hits, cosine for vector hits


class SearchQuery(Record):
    tenant: str
    text: str
    vector: bytes | None = Field(default=None, repr=False)
    vector_model: str | None = None  # only vectors of this model are compared (never mix models)
    kinds: tuple[Literal["chunk", "fact"], ...] = ("chunk",)
    world_only: bool = True
    k: int = 50


class SearchHits(Record):
    keyword: tuple[SearchHit, ...] = ()
    vector: tuple[SearchHit, ...] | None = None  # None: the vector arm did not run
    vector_error: str | None = None  # why the vector arm did not run, when it was asked to


class Completion(Record):
    text: str
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    usd_estimate: float | None = None
    #: the reply was cut at max_tokens (Bedrock `stopReason: max_tokens`, OpenAI `finish_reason: length`)
    truncated: bool = False


# --------------------------------------------------------------------------- wire items
# Shapes that appear inside more than one tool's response (docs/protocol.md, "Responses"). Each
# tool's result model (in its verb module) is built from these; `extra="forbid"` makes a model
# describe its body exactly, so a field added without updating the contract fails validation.

FactStatus = Literal["active", "forgotten", "superseded", "expired"]


class Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    def wire(self) -> dict[str, Any]:
        """The body as it goes on the wire: the fields that were given (an optional one left out
        stays absent, one given as None is null), in the model's field order."""
        return self.model_dump(mode="json", exclude_unset=True)


class BudgetFields(Wire):
    """Present together when the call had `budget_tokens` (§ budgets), absent otherwise."""

    budget_tokens: int | None = None
    budget_used: int | None = None
    dropped_count: int | None = None


class FactItem(Wire):
    """A fact in recall (and trace_fact lineage): the legacy integer `id` (D9) plus the opaque
    `fact_id` forget takes."""

    id: int
    fact_id: str
    fact: str
    kind: FactKind
    entity_slug: str | None
    provenance: str
    visibility: Visibility
    created_at: str
    valid_until: str | None
    session_id: str | None
    # With include_expired: the fact's state and, where they apply, its successor and expiry time.
    status: FactStatus | None = None
    superseded_by: str | None = None
    expired_at: str | None = None


class RecallFact(FactItem):
    """A fact in recall: FactItem plus, on a fact saved with a `content_origin`, its trust stamp (D24)."""

    trust_tier: TrustTier | None = None
    origin: ContentOrigin | None = None


class PackFact(FactItem):
    """A fact as context_pack and delta list it: recall's item (text under `fact`, with `kind`);
    delta marks an item cut to fit its budget with `truncated: true`."""

    truncated: bool | None = None


class OpenThread(Wire):
    kind: Literal["commitment", "recent_event"]
    text: str
    date: str | None


class SlugThread(Wire):
    """An open thread with the entity it belongs to, first (as context_pack and delta list it)."""

    slug: str
    kind: Literal["commitment", "recent_event"]
    text: str
    date: str | None


class Edge(Wire):
    type: str
    direction: Literal["out", "in"]
    slug: str
    context: str | None


class CardEntity(Wire):
    slug: str
    title: str
    type: str | None


class LastTouched(Wire):
    updated_at: str | None
    last_retrieved_at: str | None
    last_timeline_date: str | None


class ReferenceRow(Wire):
    """One page linking to the entity (entity's `referenced_by`, D35)."""

    slug: str
    title: str
    type: str | None
    canonical_type: str
    date: str | None
    date_source: Literal["updated_at"]
    preview: str


class ReferenceGroup(Wire):
    canonical_type: str
    total: int
    rows: list[ReferenceRow]


class RecentFact(Wire):
    id: str
    fact: str
    kind: str
    valid_from: str | None  # fleetmem has no valid_from: the fact's created_at (D35)
    entity_slug: str | None = None


class Coverage(Wire):
    """How complete `referenced_by` is (D35): fleetmem writes a page's links with the page."""

    state: Literal["complete", "pending", "disabled", "type_not_linkable", "failed"]
    pending_pages: int
    last_pass_at: str | None
    degraded: bool | None = None


class Card(Wire):
    """entity's card (§ entity)."""

    entity: CardEntity
    aka: list[str]
    summary: str
    last_touched: LastTouched
    open_threads: list[OpenThread]
    edges: list[Edge]
    backlink_count: int
    active_fact_count: int
    page: bool | None = None  # entity: true for a page's card, false for a fact-only entity
    # the entity verb's reference fields (D35); context_pack's cards leave them out
    referenced_by_count: int | None = None
    referenced_by: list[ReferenceGroup] | None = None
    recent_facts: list[RecentFact] | None = None
    coverage: Coverage | None = None


class PackCard(Card):
    """A context_pack card: the reference's flat card (`slug`, `title`, `type` at the top level, beside
    `summary`, `open_threads`, `edges`, `backlink_count`) plus the entity card's other fields."""

    slug: str
    title: str
    type: str | None


class PageItem(Wire):
    slug: str
    title: str
    type: str | None
    updated_at: str
