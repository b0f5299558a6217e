"""The fact ports, by role: `FactStore` (writes and reads by id), `FactDecisions` (D20), `FactFeed`
(what delta reads), `FactListing` (reads by entity, session, time and filter), `FactScan` (packs).
Conventions: `fleetmem.ports`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NotRequired, Protocol, TypedDict, TypeVar, Unpack, runtime_checkable

from fleetmem.models import AuditEvent, Fact
from fleetmem.ports.options import Options

T = TypeVar("T")


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


#: What `FactDecisions.put_decided` decides with: the entity's pool in, what to store (None: nothing) out.
Decide = Callable[[DecisionPool], FactWrite | None]

#: list_facts' `state` filter: one FactStatus (`Fact.status`), or "any".
FactState = Literal["active", "superseded", "forgotten", "expired", "any"]


@dataclass(frozen=True)
class FactFilter:
    """What `FactListing.listing` keeps (every field None: no condition). `provenance` is a
    case-insensitive substring (`models.provenance_matches`); the times bound `created_at`
    strictly (created_after < created_at < created_before)."""

    entity_slug: str | None = None
    kind: str | None = None
    state: FactState = "active"
    session_id: str | None = None
    provenance: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    client_id: str | None = None  # the writer's client id (exact)


@dataclass(frozen=True)
class FactTallies:
    """memory_stats' fact counts: per `Fact.status`, distinct entities and the busiest ones (by
    active facts), and facts created per UTC day ("YYYY-MM-DD") since the asked day."""

    status: dict[str, int]
    entities: int
    busiest: list[tuple[str, int]]
    per_day: dict[str, int]


@dataclass(frozen=True)
class EntityFacts:
    """One entity's facts as the entity index shows them (`FactListing.entity_tallies`): how many
    are active, and the latest time one of them changed — written (`created_at`), forgotten or
    superseded (`expired_at`), or lapsed (a `valid_until` already passed) — None with no fact."""

    active: int = 0
    changed_at: datetime | None = None


# -- each method's keyword options, written once (`fleetmem.ports.options`) ------------------------


class FactPutOptions(TypedDict):
    supersede: NotRequired[Fact | None]
    audit: NotRequired[Sequence[AuditEvent]]
    decided: NotRequired[DecisionPool | None]


@dataclass(frozen=True)
class FactPut(Options):
    """`FactStore.put`'s options."""

    supersede: Fact | None = None
    audit: Sequence[AuditEvent] = ()
    decided: DecisionPool | None = None


@dataclass(frozen=True)
class Withdrawal:
    """D23: a claim `forget` withdrew — `claim` is `claim_key` of the fact's text — for one entity
    (None: for every entity) and one visibility; `fact_id` and `client_id` are the forgotten fact's."""

    claim: str
    entity_slug: str | None
    visibility: str
    fact_id: str
    client_id: str
    at: datetime


class ExpiryOptions(TypedDict):
    at: datetime
    reason: str | None
    actor: str
    audit: NotRequired[AuditEvent | None]
    withdraw: NotRequired[Withdrawal | None]


@dataclass(frozen=True)
class Expiry(Options):
    """`FactStore.expire`'s options."""

    at: datetime
    reason: str | None
    actor: str
    audit: AuditEvent | None = None
    withdraw: Withdrawal | None = None


class DecisionOptions(TypedDict):
    now: datetime
    limit: int


@dataclass(frozen=True)
class Decision(Options):
    """`FactDecisions.decision_pool`'s options."""

    now: datetime
    limit: int


class DecidedOptions(DecisionOptions):
    pool: NotRequired[DecisionPool | None]


@dataclass(frozen=True)
class Decided(Decision):
    """`FactDecisions.put_decided`'s options: the pool's, and the pool already read (None: read it)."""

    pool: DecisionPool | None = None


class FactChangesOptions(TypedDict):
    seq: int
    now: datetime
    world_only: NotRequired[bool]
    limit: NotRequired[int]
    retracted: NotRequired[bool]


@dataclass(frozen=True)
class FactChanges(Options):
    """`FactFeed.changed_after`'s options."""

    seq: int
    now: datetime
    world_only: bool = True
    limit: int = 50
    retracted: bool = False


class FactSinceOptions(TypedDict):
    after: datetime
    after_seq: int | None
    world_only: NotRequired[bool]
    limit: NotRequired[int]


@dataclass(frozen=True)
class FactSince(Options):
    """`FactFeed.created_after` and `expired_between`'s options: the (time, seq) position after which."""

    after: datetime
    after_seq: int | None
    world_only: bool = True
    limit: int = 50


class FactListOptions(TypedDict):
    now: datetime
    world_only: bool
    where: FactFilter
    before: NotRequired[tuple[datetime, int] | None]
    limit: NotRequired[int]


@dataclass(frozen=True)
class FactList(Options):
    """`FactListing.listing`'s options."""

    now: datetime
    world_only: bool
    where: FactFilter
    before: tuple[datetime, int] | None = None
    limit: int = 50


class FactReadOptions(TypedDict):
    now: datetime
    active_only: NotRequired[bool]
    world_only: NotRequired[bool]
    limit: NotRequired[int]
    with_origin: NotRequired[bool]
    after: NotRequired[datetime | None]
    newest: NotRequired[int | None]


@dataclass(frozen=True)
class FactRead(Options):
    """`FactListing.by_entity`, `by_session` and `recent`'s options."""

    now: datetime
    active_only: bool = True
    world_only: bool = True
    limit: int = 50
    #: each fact's `content_origin` too (D24; recall's trust stamps): a store whose index leaves it
    #: out reads it from the facts themselves, so only the readers that show it pay for it.
    with_origin: bool = False
    #: only facts created strictly after this instant (None: no bound), cut in the store's range
    #: read before `limit` counts, so `limit` newest facts after it come back (D31)
    after: datetime | None = None
    #: of the `limit` newest facts, only the first `newest` and the commitments among the rest (a
    #: card's recent facts and open threads: `keep_card_facts`); None: all of them
    newest: int | None = None


def keep_card_facts(rows: Sequence[T], newest: int | None, kind_of: Callable[[T], str]) -> list[T]:
    """`FactRead.newest`: the first `newest` of `rows` (newest first) and the commitments among the
    rest; every row when `newest` is None. Stores apply it to their raw rows, before building facts."""
    if newest is None:
        return list(rows)
    return [r for i, r in enumerate(rows) if i < newest or kind_of(r) == "commitment"]


class FactStore(Protocol):
    """A tenant's facts by id: the sequence, the writes (`put`, `expire`, `purge`) and reads by id."""

    def next_seq(self, tenant: str) -> int:
        """Allocate the tenant's next integer fact sequence number (1, 2, 3, ...; atomic)."""
        ...

    def put(self, fact: Fact, **opts: Unpack[FactPutOptions]) -> None:
        """Insert `fact`. With `supersede`, atomically also mark that stored fact expired at
        `fact.created_at` with `superseded_by = fact.fact_id` (raises Conflict if it is no longer
        active or was changed). Raises Conflict if `fact.fact_id` already exists. The `audit`
        events are written in the same transaction: a fact is never written without its trail.
        With `decided` (the pool the write was decided on, from `FactDecisions.decision_pool`
        for the fact's entity), raises Conflict if the pool is no longer current — at least when another decided
        write on that entity committed since, in any process: the caller reads it again and decides
        again."""
        ...

    def get(self, tenant: str, fact_id: str) -> Fact | None: ...

    def many(self, tenant: str, fact_ids: Sequence[str]) -> list[Fact]:
        """Batch get; missing ids are skipped; order follows `fact_ids`."""
        ...

    def expire(self, tenant: str, fact_id: str, **opts: Unpack[ExpiryOptions]) -> bool:
        """Mark a fact expired. True if it was active and is now expired; False if already
        expired/superseded (idempotent). Raises NotFound if it does not exist for the tenant.
        `audit` is written in the same transaction, and only when the fact was expired; so is
        `withdraw` (D23: the record replaces one with the same claim, entity and visibility)."""
        ...

    def withdrawals(self, tenant: str, claim: str, *, entity_slug: str | None, visibility: str) -> list[Withdrawal]:
        """D23: the withdrawals of `claim` that cover a fact on `entity_slug` with `visibility` — the
        one for that entity (none for None) and the one for every entity — by key reads only."""
        ...

    def reinstate(self, tenant: str, withdrawals: Sequence[Withdrawal]) -> None:
        """D23: delete these withdrawal records (a claim deliberately remembered again)."""
        ...

    def purge(self, tenant: str, fact_id: str) -> bool:
        """Hard-delete a fact (D12). True if something was deleted."""
        ...


class FactDecisions(Protocol):
    """D20: what a `remember` decision about an entity reads, and the decided write."""

    def decision_pool(self, tenant: str, entity_slug: str | None, **opts: Unpack[DecisionOptions]) -> DecisionPool:
        """D20: the active facts (every visibility, newest first) a new fact on `entity_slug` is compared
        with — for None, the unattributed ones among the tenant's `limit` newest active facts — with
        the token `put(..., decided=)` checks."""
        ...

    def put_decided(self, tenant: str, entity_slug: str | None, decide: Decide, **opts: Unpack[DecidedOptions]) -> None:
        """D20: one decision about an entity — `decide` gets the entity's pool and returns what to
        store (None: nothing), which is put conditional on that pool. A store with a lock every
        process takes reads the pool and decides inside it (SQLite: `pool` is not used, the write
        never loses); the others decide on `pool` (read when None) and raise Conflict when another
        decision won: the caller calls again with `pool=None`."""
        ...

    def count_active(self, tenant: str, entity_slug: str, *, now: datetime, world_only: bool = True) -> int: ...


class FactFeed(Protocol):
    """What delta reads about facts: change numbers, expiries and creations after a position."""

    def changed_after(self, tenant: str, **opts: Unpack[FactChangesOptions]) -> list[tuple[int, Fact]]:
        """D14: (change_seq, fact) of active facts whose change_seq > seq, ascending. `put` assigns
        the tenant's next fact change_seq inside its own write, in commit order, so a reader that
        has seen change_seq N has seen every fact below N that still exists. A retraction (expire,
        or `put` superseding it) gives the retracted fact the next change_seq in the same write;
        `retracted=True` lists those facts too (not a fact only past its valid_until: that expiry
        is listed by `expired_between`)."""
        ...

    def expired_between(self, tenant: str, *, until: datetime, **opts: Unpack[FactSinceOptions]) -> list[Fact]:
        """D19: facts whose `valid_until` lies in ((after, after_seq), until] — `after_seq=None`:
        valid_until > after — by (valid_until, seq) ascending; facts forgotten or superseded first
        are left out (that retraction is listed by `changed_after`)."""
        ...

    def change_floor(
        self, tenant: str, *, after: datetime | None, walk: bool = False, after_seq: int | None = None
    ) -> int:
        """D14 (`walk` as PageFeed.change_floor; `after_seq`: (created_at, seq) > (after, after_seq)):
        the change position a timestamp resumes from: min(current counter, smallest
        change_seq of a fact created strictly after `after`, minus 1); `after=None`: the counter."""
        ...

    def created_after(self, tenant: str, *, now: datetime, **opts: Unpack[FactSinceOptions]) -> list[Fact]:
        """Active facts with (created_at, seq) > (after, after_seq) — `after_seq=None`: created_at >
        after — OLDEST first by (created_at, seq) (delta from a bare `since`). A store whose time
        index is eventually consistent stops at its settle horizon (`now` - settle)."""
        ...


class FactListing(Protocol):
    """Facts by entity, session, time and filter (recall, context_pack, list_facts, memory_stats)."""

    def listing(self, tenant: str, **opts: Unpack[FactListOptions]) -> list[Fact]:
        """list_facts: facts in any state that pass `where` (state judged at `now`), newest first
        by (created_at, seq), strictly before the keyset position `before` (None: from the newest)."""
        ...

    def tallies(self, tenant: str, *, now: datetime, world_only: bool, since: datetime, top: int = 10) -> FactTallies:
        """memory_stats: the tenant's fact counts (`FactTallies`; `per_day` from the UTC day of
        `since`, `busiest` the `top` entities by active facts, most first, then by slug)."""
        ...

    def entity_tallies(
        self, tenant: str, slugs: Sequence[str], *, now: datetime, world_only: bool
    ) -> dict[str, EntityFacts]:
        """list_pages(with_counts): `EntityFacts` of each slug (at `now`; `world_only` leaves private
        facts out of the count and the time), in one read for all of them; a slug without a fact
        the caller may see is missing from the answer."""
        ...

    def by_entity(self, tenant: str, entity_slug: str, **opts: Unpack[FactReadOptions]) -> list[Fact]:
        """Facts about one entity (created_at > `after` when given), newest first (created_at desc,
        then seq desc)."""
        ...

    def by_session(self, tenant: str, session_id: str, **opts: Unpack[FactReadOptions]) -> list[Fact]:
        """Facts written with this session_id (created_at > `after` when given), newest first."""
        ...

    def recent(self, tenant: str, **opts: Unpack[FactReadOptions]) -> list[Fact]:
        """Facts with created_at > after (all when None), newest first."""
        ...


@runtime_checkable
class FactScan(Protocol):
    """Whole-tenant fact reads for memory packs: every fact in any state, in a stable order."""

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[list[Fact], str | None]: ...

    def raise_seq(self, tenant: str, at_least: int) -> None:
        """Make `next_seq` continue above `at_least` (an import stores facts with their own seq)."""
        ...
