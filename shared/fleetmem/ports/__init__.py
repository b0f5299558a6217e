"""Ports: the small interfaces the domain sees. Tenant first in every data method.

Two adapter sets implement them: `fleetmem.adapters.local` (SQLite + numpy + ONNX MiniLM) and
`fleetmem.adapters.aws` (DynamoDB + OpenSearch + Bedrock). One contract suite per port
(tests/contract/) runs against every implementation. The fact and page ports are split by role
(`fleetmem.ports.facts`, `fleetmem.ports.pages`); `Ports` is the one list of the storage ports.

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
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from fleetmem.models import (
    AuditEvent,
    Caller,
    ClientRecord,
    Completion,
    Cursor,
    Fact,
    IdempotencyRecord,
    SearchDoc,
    SearchHits,
    SearchQuery,
)
from fleetmem.ports.facts import (
    DecisionPool,
    EntityFacts,
    FactDecisions,
    FactFeed,
    FactFilter,
    FactListing,
    FactScan,
    FactState,
    FactStore,
    FactTallies,
    FactWrite,
    Withdrawal,
)
from fleetmem.ports.pages import PageFeed, PageListing, PageScan, PageStore, PageTallies
from fleetmem.protocol import CORE_CHARS_DEFAULT, IDEMPOTENCY_LEASE_SECONDS


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

    def touch(self, token_hash: str, *, at: datetime) -> None:
        """Record `at` as the credential's last use (an existing credential only; nothing else
        changes). Callers bound how often they call it (`fleetmem.tokens.ApiTokenAuth`)."""
        ...


class IdempotencyStore(Protocol):
    """Claims and durable receipts of keyed writes (D2, D22), keyed by (tenant, client_id, request
    id) — `key` is the request id; `verb` is recorded, never part of the key."""

    def claim(
        self, record: IdempotencyRecord, *, now: datetime, take_over: str | None = None
    ) -> IdempotencyRecord | None:
        """Store `record` (result None = in flight) unless a live record exists for
        (tenant, client_id, key); return that existing record instead (None when claimed).
        A record is not live once `expires_at` has passed, once cancelled, nor when it is an
        in-flight claim with the same request_hash whose `lease_until` has passed (its call died)
        or whose `claim_id` is `take_over` (its holder is known dead): `record` takes the key
        over. Looking and storing are one atomic step, so of concurrent claims exactly one wins."""
        ...

    def complete(
        self,
        tenant: str,
        client_id: str,
        verb: str,
        key: str,
        result: dict[str, Any],
        *,
        outcome: dict[str, Any] | None = None,
        at: datetime | None = None,
    ) -> None:
        """Store the call's answer: the record is `committed` (at `at`, with its small `outcome`)."""
        ...

    def release(self, tenant: str, client_id: str, verb: str, key: str, claim_id: str | None = None) -> None:
        """Drop an in-flight claim after a failed call so the caller can retry; with `claim_id`,
        only that claim (never one that took the key over after its lease lapsed)."""
        ...

    def get(self, tenant: str, client_id: str, key: str, *, now: datetime) -> IdempotencyRecord | None:
        """The unexpired record of this client's request id, or None."""
        ...

    def recent(
        self,
        tenant: str,
        client_id: str,
        *,
        now: datetime,
        limit: int,
        state: str | None = None,
        before: tuple[datetime, str] | None = None,
    ) -> list[IdempotencyRecord]:
        """This client's unexpired records, newest first (created_at, then key, descending), at
        most `limit`, only those in stored `state` when given, only those after `before`."""
        ...

    def cancel(self, tenant: str, client_id: str, key: str, *, at: datetime) -> None:
        """Mark an in-flight (running) record `cancelled`; a completed one is left as it is."""
        ...


@dataclass(frozen=True)
class ActivityFilter:
    """What `AuditLog.activity` keeps (None: no condition): the events of one actor (client id),
    of these actions, at times strictly between `since` and `until`."""

    actor: str | None = None
    actions: tuple[str, ...] | None = None
    since: datetime | None = None
    until: datetime | None = None


class AuditLog(Protocol):
    def append(self, event: AuditEvent) -> None: ...
    def for_subject(self, tenant: str, subject: str) -> list[AuditEvent]:
        """Oldest first."""
        ...

    def activity(
        self, tenant: str, *, where: ActivityFilter, before: str | None, limit: int
    ) -> list[tuple[str, AuditEvent]]:
        """The tenant's events that `where` keeps, newest first, at most `limit`, each with its
        opaque position; `before` (a position given before) continues after that event. One
        tenant's key range, never a whole-table read."""
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


@dataclass(kw_only=True, eq=False)
class Ports:
    """The storage ports, by role: the one list of them. An adapter set's bundle (`LocalStores`,
    `AwsStores`) is a `Ports` with its own extras; `Deps` is a `Ports` with the rest a verb needs.
    Adding a port is one field here and its two adapters."""

    facts: FactStore
    fact_decisions: FactDecisions
    fact_feed: FactFeed
    fact_listing: FactListing
    pages: PageStore
    page_feed: PageFeed
    page_listing: PageListing
    cursors: CursorStore
    clients: ClientStore
    idempotency: IdempotencyStore
    audit: AuditLog
    search: SearchIndex

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The port fields' names, in order."""
        return tuple(f.name for f in fields(Ports))

    def ports(self) -> dict[str, Any]:
        """Every port of this bundle by name."""
        return {name: getattr(self, name) for name in Ports.names()}


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


class PackTransfer(Protocol):
    """Memory packs over the tools (`export_pack`, `import_pack`): the pack format and its checks
    sit above the domain (`fleetmem.pack_transfer`), so the tools reach them through this port.
    Both raise `VerbError` (invalid_params with the pack check's message and fix)."""

    def export(
        self,
        deps: Deps,
        *,
        tenant: str,
        entity: str | None,
        since: datetime | None,
        state: str | None,
        world_only: bool,
        max_bytes: int,
    ) -> tuple[bytes, dict[str, int]]: ...

    def load(
        self, deps: Deps, *, tenant: str, data: bytes, from_tenant: str | None, dry_run: bool
    ) -> dict[str, Any]: ...


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
    #: D22: claims record the process that holds them (host:pid:start), so a retry that meets a
    #: claim whose holder is provably gone takes it over at once. On for the local server only:
    #: a killed Lambda cannot be observed, so there the lease decides.
    claim_holders: bool = False
    #: D30: synthesize checks the answer's quoted spans against the evidence (FLEETMEM_QUOTE_CHECK)
    quote_check: bool = True
    #: D32: the most characters of context_pack's core block (0: core memory off)
    core_chars: int = CORE_CHARS_DEFAULT


@dataclass(kw_only=True, eq=False)
class Deps(Ports):
    """The ports a verb needs, built once per process by `fleetmem.wiring.build_deps`; why an
    optional port is missing (`diagnostics`) and how calls run (`policy`) ride beside them."""

    clock: Clock
    ids: IdGen
    embedder: Embedder | None = None
    llm: LLM | None = None
    #: Re-embedding queries (`fleetmem reindex`); None where the backend embeds by itself.
    maintenance: VectorMaintenance | None = None
    #: Memory packs over the tools; None where no pack code is wired (the tools answer unavailable).
    packs: PackTransfer | None = None
    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    policy: Policy = field(default_factory=Policy)

    @classmethod
    def over(cls, stores: Ports, *, clock: Clock, ids: IdGen, **kw: Any) -> Deps:
        """Deps over an adapter set's stores; a port given as a keyword (e.g. `search=`) replaces
        the store's own."""
        ports = {name: kw.pop(name) if name in kw else port for name, port in stores.ports().items()}
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
        meta_session_id: str | None = None,
    ) -> None:
        self.correlation_id = correlation_id
        self.deadline_at = deadline_at  # time.monotonic() value, or None
        self.transport = transport  # "mcp" | "cli" | "v1" | "http"
        #: The call carries an idempotency key (D2), so it may retry a call killed after storing
        #: its write and before indexing it: a write that finds itself already stored indexes it again.
        self.keyed = keyed
        self.surface = surface  # the surface the call was made on ("verbs" | "full")
        #: the transport's `_meta.session_id` (MCP request `_meta`, a `/v1` body's `_meta`): the
        #: session of a write whose `session_id` argument is absent (D24)
        self.meta_session_id = meta_session_id


__all__ = [
    "ActivityFilter",
    "DecisionPool",
    "EntityFacts",
    "FactDecisions",
    "FactFeed",
    "FactFilter",
    "FactListing",
    "FactScan",
    "FactState",
    "FactStore",
    "FactTallies",
    "FactWrite",
    "PageFeed",
    "PageListing",
    "PageScan",
    "PageStore",
    "PageTallies",
    "Withdrawal",
]
