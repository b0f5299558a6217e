"""Ports: the small interfaces the domain sees. Tenant first in every data method.

Two adapter sets implement them: `fleetmem.adapters.local` (SQLite + numpy + ONNX MiniLM) and
`fleetmem.adapters.aws` (DynamoDB + OpenSearch + Bedrock). One contract suite per port
(tests/contract/) runs against every implementation.

Conventions every implementation follows:
- datetimes in and out are aware UTC truncated to milliseconds (`fleetmem.timefmt.to_ms`);
- a foreign tenant's item behaves exactly like a missing one;
- SDK exceptions never escape: they become `fleetmem.errors.PortError` subclasses
  (`Unavailable` for throttling/outage, `Conflict` for a lost condition, `TooLarge`);
- "world_only=True" hides every item whose visibility is "private".
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from fleetmem.models import (
    AuditEvent,
    Backlink,
    Caller,
    ClientRecord,
    Completion,
    Cursor,
    Fact,
    IdempotencyRecord,
    Page,
    PageHead,
    PageMatch,
    PageTombstone,
    SearchDoc,
    SearchHits,
    SearchQuery,
)
from fleetmem.protocol import IDEMPOTENCY_LEASE_SECONDS


@dataclass(frozen=True)
class DecisionPool:
    """What one `remember` decision about an entity reads (D20): the active facts it compares the new
    fact with, and the store's opaque token for that state. `FactStore.put(..., decided=pool)`
    commits only while no other decision about the entity committed since the pool was read."""

    facts: list[Fact]
    token: Any


@dataclass(frozen=True)
class FactWrite:
    """What a decision stores: the new fact, the fact it supersedes, their audit trail."""

    fact: Fact
    supersede: Fact | None = None
    audit: Sequence[AuditEvent] = ()


#: list_facts' `state` filter: one FactStatus (`Fact.status`), or "any".
FactState = Literal["active", "superseded", "forgotten", "expired", "any"]


@dataclass(frozen=True)
class FactFilter:
    """What `FactStore.listing` keeps (every field None: no condition). `provenance` is a
    case-insensitive substring (`models.provenance_matches`); the times bound `created_at`
    strictly (created_after < created_at < created_before)."""

    entity_slug: str | None = None
    kind: str | None = None
    state: FactState = "active"
    session_id: str | None = None
    provenance: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


@dataclass(frozen=True)
class FactTallies:
    """memory_stats' fact counts: per `Fact.status`, distinct entities and the busiest ones (by
    active facts), and facts created per UTC day ("YYYY-MM-DD") since the asked day."""

    status: dict[str, int]
    entities: int
    busiest: list[tuple[str, int]]
    per_day: dict[str, int]


@dataclass(frozen=True)
class PageTallies:
    """memory_stats' page counts: every page, and pages by the UTC day of their last write."""

    pages: int
    per_day: dict[str, int]


class FactStore(Protocol):
    def next_seq(self, tenant: str) -> int:
        """Allocate the tenant's next integer fact sequence number (1, 2, 3, ...; atomic)."""
        ...

    def decision_pool(self, tenant: str, entity_slug: str | None, *, now: datetime, limit: int) -> DecisionPool:
        """D20: the active facts (every visibility, newest first) a new fact on `entity_slug` is compared
        with — for None, the unattributed ones among the tenant's `limit` newest active facts — with
        the token `put(..., decided=)` checks."""
        ...

    def put(
        self,
        fact: Fact,
        *,
        supersede: Fact | None = None,
        audit: Sequence[AuditEvent] = (),
        decided: DecisionPool | None = None,
    ) -> None:
        """Insert `fact`. With `supersede`, atomically also mark that stored fact expired at
        `fact.created_at` with `superseded_by = fact.fact_id` (raises Conflict if it is no longer
        active or was changed). Raises Conflict if `fact.fact_id` already exists. The `audit`
        events are written in the same transaction: a fact is never written without its trail.
        With `decided` (the pool the write was decided on, from `decision_pool` for the fact's
        entity), raises Conflict if the pool is no longer current — at least when another decided
        write on that entity committed since, in any process: the caller reads it again and decides
        again."""
        ...

    def put_decided(
        self,
        tenant: str,
        entity_slug: str | None,
        decide: Callable[[DecisionPool], FactWrite | None],
        *,
        now: datetime,
        limit: int,
        pool: DecisionPool | None = None,
    ) -> None:
        """D20: one decision about an entity — `decide` gets the entity's pool and returns what to
        store (None: nothing), which is put conditional on that pool. A store with a lock every
        process takes reads the pool and decides inside it (SQLite: `pool` is not used, the write
        never loses); the others decide on `pool` (read when None) and raise Conflict when another
        decision won: the caller calls again with `pool=None`."""
        ...

    def get(self, tenant: str, fact_id: str) -> Fact | None: ...

    def by_entity(
        self,
        tenant: str,
        entity_slug: str,
        *,
        now: datetime,
        active_only: bool = True,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        """Facts about one entity, newest first (created_at desc, then seq desc)."""
        ...

    def by_session(
        self,
        tenant: str,
        session_id: str,
        *,
        now: datetime,
        active_only: bool = True,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        """Facts written with this session_id, newest first."""
        ...

    def recent(
        self,
        tenant: str,
        *,
        now: datetime,
        after: datetime | None = None,
        active_only: bool = True,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        """Facts with created_at > after (all when None), newest first."""
        ...

    def many(self, tenant: str, fact_ids: Sequence[str]) -> list[Fact]:
        """Batch get; missing ids are skipped; order follows `fact_ids`."""
        ...

    def created_after(
        self,
        tenant: str,
        *,
        after: datetime,
        after_seq: int | None,
        now: datetime,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        """Active facts with (created_at, seq) > (after, after_seq) — `after_seq=None`: created_at >
        after — OLDEST first by (created_at, seq) (delta from a bare `since`). A store whose time
        index is eventually consistent stops at its settle horizon (`now` - settle)."""
        ...

    def count_active(self, tenant: str, entity_slug: str, *, now: datetime, world_only: bool = True) -> int: ...

    def listing(
        self,
        tenant: str,
        *,
        now: datetime,
        world_only: bool,
        where: FactFilter,
        before: tuple[datetime, int] | None = None,
        limit: int = 50,
    ) -> list[Fact]:
        """list_facts: facts in any state that pass `where` (state judged at `now`), newest first
        by (created_at, seq), strictly before the keyset position `before` (None: from the newest)."""
        ...

    def tallies(self, tenant: str, *, now: datetime, world_only: bool, since: datetime, top: int = 10) -> FactTallies:
        """memory_stats: the tenant's fact counts (`FactTallies`; `per_day` from the UTC day of
        `since`, `busiest` the `top` entities by active facts, most first, then by slug)."""
        ...

    def expire(
        self,
        tenant: str,
        fact_id: str,
        *,
        at: datetime,
        reason: str | None,
        actor: str,
        audit: AuditEvent | None = None,
    ) -> bool:
        """Mark a fact expired. True if it was active and is now expired; False if already
        expired/superseded (idempotent). Raises NotFound if it does not exist for the tenant.
        `audit` is written in the same transaction, and only when the fact was expired."""
        ...

    def purge(self, tenant: str, fact_id: str) -> bool:
        """Hard-delete a fact (D12). True if something was deleted."""
        ...

    def changed_after(
        self,
        tenant: str,
        *,
        seq: int,
        now: datetime,
        world_only: bool = True,
        limit: int = 50,
        retracted: bool = False,
    ) -> list[tuple[int, Fact]]:
        """D14: (change_seq, fact) of active facts whose change_seq > seq, ascending. `put` assigns
        the tenant's next fact change_seq inside its own write, in commit order, so a reader that
        has seen change_seq N has seen every fact below N that still exists. A retraction (expire,
        or `put` superseding it) gives the retracted fact the next change_seq in the same write;
        `retracted=True` lists those facts too (not a fact only past its valid_until: that expiry
        is listed by `expired_between`)."""
        ...

    def expired_between(
        self,
        tenant: str,
        *,
        after: datetime,
        after_seq: int | None,
        until: datetime,
        world_only: bool = True,
        limit: int = 50,
    ) -> list[Fact]:
        """D19: facts whose `valid_until` lies in ((after, after_seq), until] — `after_seq=None`:
        valid_until > after — by (valid_until, seq) ascending; facts forgotten or superseded first
        are left out (that retraction is listed by `changed_after`)."""
        ...

    def change_floor(
        self, tenant: str, *, after: datetime | None, walk: bool = False, after_seq: int | None = None
    ) -> int:
        """D14 (`walk` as PageStore.change_floor; `after_seq`: (created_at, seq) > (after, after_seq)):
        the change position a timestamp resumes from: min(current counter, smallest
        change_seq of a fact created strictly after `after`, minus 1); `after=None`: the counter."""
        ...


class PageStore(Protocol):
    def get(self, tenant: str, slug: str) -> Page | None: ...

    def put(self, page: Page, *, expected_updated_at: datetime | Literal[""] | None = None) -> None:
        """Create or replace a page with its aliases, links and timeline (all derived rows replaced).
        `expected_updated_at` makes the write conditional, checked in the same atomic step as the
        write: a time = the stored page's `updated_at` (to the millisecond) must equal it; "" = no
        page may be stored under the slug. Raises Conflict (nothing written) when the condition
        fails. None (the default) writes unconditionally."""
        ...

    def delete(self, tenant: str, slug: str, *, at: datetime | None = None) -> bool:
        """Remove the page and its derived rows, leaving a tombstone deleted at `at` (default now)."""
        ...

    def lookup(
        self,
        tenant: str,
        *,
        aliases: Sequence[str],
        titles: Sequence[str],
        slugs: Sequence[str],
        suffix: str,
        world_only: bool,
        limit: int = 10,
    ) -> builtins.list[PageMatch]:
        """Resolution candidates, one per (page, way) it matched:
        `alias`: a stored alias key (`slugs.match_key` of the alias; `normalize_alias` for pages
        written before it) is one of `aliases`;
        `title`: the stored title key (`match_key` of the title; `str.lower()` before) is one of `titles`;
        `slug`: slug is one of `slugs`;
        `suffix`: slug ends with "/" + `suffix` (skipped when `suffix` is empty).
        The domain ranks them; the store need not sort. At most `limit` per way."""
        ...

    def heads(self, tenant: str, slugs: Sequence[str]) -> builtins.list[PageHead]:
        """Batch head lookup; missing slugs skipped."""
        ...

    def list(
        self,
        tenant: str,
        *,
        world_only: bool,
        limit: int,
        after: str | None = None,
        type: str | None = None,
    ) -> builtins.list[PageHead]:
        """Pages ordered by slug ascending, strictly after `after` (keyset paging)."""
        ...

    def backlinks(
        self, tenant: str, slug: str, *, world_only: bool, limit: int = 10
    ) -> tuple[builtins.list[Backlink], int]:
        """Incoming links from other pages (mentions included in the list, newest source first is
        not required), plus the count of incoming NON-mention links."""
        ...

    def updated_since(
        self,
        tenant: str,
        *,
        since: datetime,
        slug: str,
        world_only: bool,
        limit: int,
        now: datetime | None = None,
    ) -> builtins.list[PageHead]:
        """Keyset page: (updated_at, slug) > (since, slug) ascending, byte order on slug. With `now`,
        a store whose time index is eventually consistent stops at its settle horizon."""
        ...

    def keyword(self, tenant: str, text: str, *, world_only: bool, limit: int = 3) -> builtins.list[PageHead]:
        """Near-misses for an entity miss: pages whose title/slug/aliases share words with `text`,
        or have a word starting with a word of `text` of 3+ characters ("pri" -> "priya")."""
        ...

    def changed_after(
        self, tenant: str, *, seq: int, world_only: bool, limit: int, now: datetime | None = None
    ) -> builtins.list[tuple[int, PageHead]]:
        """D14: (change_seq, head) of pages whose change_seq > seq, ascending. Every
        `put` assigns the page the tenant's next page change_seq inside its own write, in commit
        order, so a reader that has seen N has seen every write below N."""
        ...

    def deleted_after(
        self, tenant: str, *, seq: int, world_only: bool, limit: int
    ) -> builtins.list[tuple[int, PageTombstone]]:
        """(change_seq, tombstone) of deleted pages whose change_seq > seq, ascending: `delete`
        leaves a tombstone carrying the tenant's next page change_seq (the page numbers' own
        sequence, so pages and tombstones interleave in commit order); a later `put` of the slug
        removes it."""
        ...

    def tallies(self, tenant: str, *, world_only: bool, since: datetime) -> PageTallies:
        """memory_stats: how many pages, and pages by the UTC day of `updated_at` from `since`'s day."""
        ...

    def change_floor(self, tenant: str, *, since: datetime | None, slug: str = "", walk: bool = False) -> int:
        """D14: the change position a (since, slug) keyset position resumes from: min(current
        counter, smallest change_seq of a page with (updated_at, slug) > (since, slug), minus 1);
        `since=None`: the counter (everything committed so far). `walk=True` finds that smallest
        number by walking the change order up to the first page after the position (cheap when
        the position is early; the default reads every page after it)."""
        ...


class CursorStore(Protocol):
    def get(self, tenant: str, client_id: str, session_id: str, *, now: datetime) -> Cursor | None:
        """The cursor, or None when missing or idle longer than SESSION_IDLE_DAYS."""
        ...

    def put(self, cursor: Cursor, *, expected_version: int | None) -> Cursor:
        """Write conditionally: `expected_version=None` means "must not exist (or be idle-expired)",
        otherwise the stored version must equal it. Stores version+1 and returns the stored cursor.
        Raises Conflict when the condition fails. Evicts the client's oldest cursors beyond
        SESSIONS_PER_CLIENT."""
        ...

    def count_live(self, tenant: str, *, now: datetime) -> int:
        """How many of the tenant's cursors are live (touched within SESSION_IDLE_DAYS)."""
        ...

    def for_tenant(self, tenant: str, *, now: datetime, limit: int) -> builtins.list[Cursor]:
        """The tenant's live cursors (woken within SESSION_IDLE_DAYS of `now`), most recently woken
        first, at most `limit`: one tenant's key range, never a whole-table read."""
        ...


class ClientStore(Protocol):
    def create(self, record: ClientRecord) -> None: ...
    def by_hash(self, token_hash: str) -> ClientRecord | None: ...
    def list(self, tenant: str | None = None) -> builtins.list[ClientRecord]: ...
    def revoke(self, token_id: str, *, at: datetime, tenant: str | None = None) -> bool:
        """Revoke the live token(s) with this public id (of `tenant` only, when given). True when
        one was revoked now; False when unknown or already revoked."""
        ...


class IdempotencyStore(Protocol):
    def claim(self, record: IdempotencyRecord, *, now: datetime) -> IdempotencyRecord | None:
        """Store `record` (result None = in flight) unless a live record exists for
        (tenant, client_id, verb, key); return that existing record instead (None when claimed).
        A record is not live once `expires_at` has passed, nor when it is an in-flight claim with
        the same request_hash whose `lease_until` has passed (its call died): `record` takes the key
        over. Looking and storing are one atomic step, so of concurrent claims exactly one wins."""
        ...

    def complete(self, tenant: str, client_id: str, verb: str, key: str, result: dict) -> None: ...

    def release(self, tenant: str, client_id: str, verb: str, key: str, claim_id: str | None = None) -> None:
        """Drop an in-flight claim after a failed call so the caller can retry; with `claim_id`,
        only that claim (never one that took the key over after its lease lapsed)."""
        ...


class AuditLog(Protocol):
    def append(self, event: AuditEvent) -> None: ...
    def for_subject(self, tenant: str, subject: str) -> list[AuditEvent]:
        """Oldest first."""
        ...


@runtime_checkable
class SearchIndex(Protocol):
    #: True when writes are indexed synchronously by the domain (search_state "current");
    #: False when an asynchronous indexer feeds the index (AWS streams: "pending").
    write_through: bool

    def upsert(self, docs: Sequence[SearchDoc]) -> None: ...
    def delete(self, tenant: str, doc_ids: Sequence[str]) -> None: ...
    def delete_page(self, tenant: str, slug: str) -> None:
        """Remove every chunk of a page."""
        ...

    def replace_page(self, tenant: str, slug: str, docs: Sequence[SearchDoc]) -> None:
        """Make `docs` (chunks of this page; `page_docs_problem` says when they are not) the
        page's chunks, its other chunks removed. A search never finds the page without chunks
        in between: one transaction where the store has them, new chunks before stale deletes
        where it does not."""
        ...

    def search(self, query: SearchQuery) -> SearchHits:
        """Keyword (BM25) arm and, when `query.vector` is set, the vector arm (cosine), filtered by
        tenant, kinds and visibility. Each arm returns up to `query.k` hits best first. A failing
        vector arm sets `vector_error` and keeps the keyword arm."""
        ...

    def search_many(self, queries: Sequence[SearchQuery]) -> list[SearchHits]:
        """`search` of each query, answers in order: one request where the backend pays a round
        trip per request (OpenSearch: one `_msearch` for every arm of every query), so a recall
        that also searches a question's parts and topic sends no more requests than one that
        does not."""
        ...


@runtime_checkable
class SearchHealth(Protocol):
    """A search index that can tell, without a request, that it is failing fast (OpenSearch's
    breaker): the reason, or None while it answers."""

    def health_problem(self) -> str | None: ...


@runtime_checkable
class PageScan(Protocol):
    """Whole-tenant page reads for memory packs (`fleetmem.pack`): every page, whole, in a stable
    order, in bounded batches. `after` is the opaque position the previous batch returned."""

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[list[Page], str | None]: ...


@runtime_checkable
class FactScan(Protocol):
    """Whole-tenant fact reads for memory packs: every fact in any state, in a stable order."""

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[list[Fact], str | None]: ...

    def raise_seq(self, tenant: str, at_least: int) -> None:
        """Make `next_seq` continue above `at_least` (an import stores facts with their own seq)."""
        ...


@runtime_checkable
class AuditScan(Protocol):
    """Whole-tenant audit reads for memory packs: every event in the order written."""

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[list[AuditEvent], str | None]: ...


class VectorMaintenance(Protocol):
    """Re-embedding for a model switch (`fleetmem reindex`, `fleetmem doctor`): the local adapter
    implements it; on AWS the stream indexer embeds every write, so there is none."""

    def unembedded(self, model_id: str) -> dict[str, int]:
        """How many search docs and facts (all tenants) lack a vector of `model_id`:
        {"docs": n, "facts": n}."""
        ...

    def docs_without_vector(self, model_id: str, limit: int) -> list[SearchDoc]:
        """Docs lacking a `model_id` vector, oldest first, returned without vectors."""
        ...

    def facts_without_vector(self, model_id: str, limit: int) -> list[Fact]: ...

    def set_doc_vectors(self, model_id: str, items: Sequence[tuple[str, str, bytes]]) -> int:
        """Attach (tenant, doc_id, vector) items; returns how many docs were updated."""
        ...

    def set_fact_vectors(self, model_id: str, items: Sequence[tuple[str, str, bytes]]) -> int:
        """Attach (tenant, fact_id, vector) items; returns how many facts were updated."""
        ...


class StoreSet(Protocol):
    """An adapter set's bundle of the seven storage ports (`LocalStores`, `AwsStores`); read-only
    members, so a bundle may declare its own concrete store types."""

    @property
    def facts(self) -> FactStore: ...
    @property
    def pages(self) -> PageStore: ...
    @property
    def cursors(self) -> CursorStore: ...
    @property
    def clients(self) -> ClientStore: ...
    @property
    def idempotency(self) -> IdempotencyStore: ...
    @property
    def audit(self) -> AuditLog: ...
    @property
    def search(self) -> SearchIndex: ...

    def close(self) -> None: ...


class Embedder(Protocol):
    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors, one per text. Raises Unavailable."""
        ...


class LLM(Protocol):
    model_id: str

    def complete(self, system: str, prompt: str, *, max_tokens: int = 800) -> Completion:
        """Raises Unavailable."""
        ...


class Clock(Protocol):
    def now(self) -> datetime:
        """Aware UTC, millisecond precision."""
        ...


class Auth(Protocol):
    """A bearer credential -> the remote caller it stands for (tenant, client, scopes), or None.
    Used by the local server and the Lambda authorizer alike."""

    def verify(self, token: str) -> Caller | None: ...


class IdGen(Protocol):
    def new_id(self, prefix: str) -> str:
        """A fresh opaque id such as `f_01J...` (prefix + unique, sortable text)."""
        ...


@dataclass(frozen=True)
class Diagnostics:
    """Why an optional port is missing: shown in `search_degraded`, in `unavailable` fixes and by
    `fleetmem doctor`."""

    embedder_problem: str | None = None
    llm_problem: str | None = None


@dataclass(frozen=True)
class Policy:
    """How calls run over the ports: deadlines, idempotency waits, concurrency."""

    #: Server-side deadline for context_pack/delta (D10).
    deadline_ms: int = 2000
    #: How long a call waits for an earlier call with its idempotency key to finish (then it is
    #: told the first call is still running).
    idempotency_wait_s: float = 30.0
    #: How long a call's idempotency claim holds its key before a retry may take it over.
    idempotency_lease_s: float = IDEMPOTENCY_LEASE_SECONDS
    #: Runs independent port calls concurrently (network backends); None runs them in order.
    parallel: Callable[[Sequence[Callable[[], Any]]], list[Any]] | None = None


@dataclass(kw_only=True, eq=False)
class Deps:
    """The ports a verb needs, built once per process by `fleetmem.wiring.build_deps`; why an
    optional port is missing (`diagnostics`) and how calls run (`policy`) ride beside them."""

    facts: FactStore
    pages: PageStore
    cursors: CursorStore
    clients: ClientStore
    idempotency: IdempotencyStore
    audit: AuditLog
    search: SearchIndex
    clock: Clock
    ids: IdGen
    embedder: Embedder | None = None
    llm: LLM | None = None
    #: Re-embedding queries (`fleetmem reindex`); None where the backend embeds by itself.
    maintenance: VectorMaintenance | None = None
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    policy: Policy = field(default_factory=Policy)

    PORTS: ClassVar[tuple[str, ...]] = ("facts", "pages", "cursors", "clients", "idempotency", "audit", "search")

    @classmethod
    def over(cls, stores: StoreSet, *, clock: Clock, ids: IdGen, **kw: Any) -> Deps:
        """Deps over an adapter set's stores; a port given as a keyword (e.g. `search=`) replaces
        the store's own."""
        ports = {name: kw.pop(name) if name in kw else getattr(stores, name) for name in cls.PORTS}
        return cls(**ports, clock=clock, ids=ids, **kw)

    def gather(self, *calls: Callable[[], Any]) -> list[Any]:
        """Run independent port calls — concurrently when the backend pays a network round trip
        per call, in order otherwise — and return their results in order (first error re-raised)."""
        parallel = self.policy.parallel
        if parallel is None or len(calls) <= 1:
            return [call() for call in calls]
        return parallel(calls)


class CallContext:
    """Per-call facts that are not arguments: correlation id and the wall-clock deadline."""

    def __init__(
        self,
        correlation_id: str,
        *,
        deadline_at: float | None = None,
        transport: str = "mcp",
        keyed: bool = False,
        surface: str = "full",
    ) -> None:
        self.correlation_id = correlation_id
        self.deadline_at = deadline_at  # time.monotonic() value, or None
        self.transport = transport  # "mcp" | "cli" | "v1" | "http"
        #: The call carries an idempotency key (D2), so it may retry a call killed after storing
        #: its write and before indexing it: a write that finds itself already stored indexes it again.
        self.keyed = keyed
        self.surface = surface  # the surface the call was made on ("verbs" | "full")
