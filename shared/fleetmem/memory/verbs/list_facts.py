"""`list_facts(entity?, kind?, state?, session_id?, client_id?, provenance?, created_after?,
created_before?, fact_id?, limit?, cursor?)` — page through the saved facts, newest first (full surface, read).

Public API: `ListFactsParams`, `ListFactsResult`, `FactRow`, `run(deps, caller, params, ctx) -> Outcome`,
`encode_cursor` / `decode_cursor`, `SPEC` (registered).

Every filter is optional and they combine: `entity` (a slug or a name, resolved exactly as recall's
entity filter resolves it: `entities.filter_slug`), `kind`, `state` (a fact's `status` — active |
superseded | forgotten | expired — or "any"; default "active"), `session_id`, `client_id` (the
writer, exact), `provenance` (case-insensitive substring), `created_after` / `created_before` (ISO
8601, strict bounds on created_at). `fact_id` returns that one fact, whatever its state (the other
filters do not apply), or no fact for an id that is missing or another tenant's. `limit` 1..200
(default 50). `cursor` is the opaque `next_cursor` of the previous call (the last row's
(created_at, seq)); one that does not decode is refused with a fix that starts over without it. Response
`{facts[FactRow], next_cursor (null on the last page), protocol_version}`. Remote callers never see
private facts.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, WithJsonSchema

from fleetmem.errors import Outcome
from fleetmem.memory import cursors, sameness
from fleetmem.memory.common import parse_since, shown_to
from fleetmem.memory.cursors import CURSOR_DESCRIPTION, CursorArg
from fleetmem.memory.entities import filter_slug
from fleetmem.memory.params import DROP, Hint, Limit, Params, Since
from fleetmem.memory.redaction import shown_facts
from fleetmem.memory.registry import read_tool
from fleetmem.memory.vectors import cosine
from fleetmem.memory.verbs.recall import fact_model
from fleetmem.models import Caller, Fact, FactItem, Wire
from fleetmem.ports import CallContext, Deps, FactFilter
from fleetmem.protocol import FACT_KINDS, PROTOCOL_VERSION, FactKind
from fleetmem.timefmt import iso, parse_iso

TOOL = "list_facts"
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
STATES = ("active", "superseded", "forgotten", "expired", "any")


def encode_cursor(fact: Fact) -> str:
    """The opaque `next_cursor` for "after this row" (its keyset position)."""
    return cursors.encode({"t": iso(fact.created_at), "s": fact.seq})


def decode_cursor(cursor: str) -> tuple[datetime, int] | None:
    """The (created_at, seq) a cursor of `encode_cursor` names, or None when it is not one."""
    data = cursors.decode(cursor) or {}
    at, seq = data.get("t"), data.get("s")
    if not isinstance(at, str) or not isinstance(seq, int) or isinstance(seq, bool):
        return None
    try:
        return parse_iso(at), seq
    except (ValueError, OverflowError):
        return None


class ListFactsParams(Params):
    entity: str | None = Field(
        default=None,
        description="Only facts about this entity: its slug or its name, resolved as recall resolves it, e.g. "
        '"people/alice" or "Alice".',
    )
    kind: Annotated[
        FactKind | None,
        WithJsonSchema({"type": "string", "enum": list(FACT_KINDS)}),
        Hint(accepts=f"one of {', '.join(FACT_KINDS)}", fix=DROP),
    ] = Field(default=None, description="Only facts of this kind.")
    state: Annotated[
        Literal["active", "superseded", "forgotten", "expired", "any"] | None,
        WithJsonSchema({"type": "string", "enum": list(STATES)}),
        Hint(accepts=f"one of {', '.join(STATES)}", fix="active"),
    ] = Field(default=None, description='Only facts in this state (default "active"; "any" for every state).')
    session_id: str | None = Field(default=None, description="Only facts saved with this session_id.")
    client_id: str | None = Field(
        default=None, description='Only facts this client (agent) wrote: its client id, e.g. "planner".'
    )
    provenance: str | None = Field(
        default=None, description="Only facts whose provenance contains this text (case-insensitive)."
    )
    created_after: Since = Field(
        default=None, description='Only facts saved after this ISO 8601 time, e.g. "2026-06-01T00:00:00Z".'
    )
    created_before: Since = Field(default=None, description="Only facts saved before this ISO 8601 time.")
    fact_id: str | None = Field(
        default=None, description="Exactly this fact (any state), or no fact when there is none with that id."
    )
    conflicts: bool = Field(
        default=False,
        description="true: also answer `conflicts`, the groups of listed active facts that give one attribute "
        "different values (the pairs remember answers with a probable_update notice), newest first.",
    )
    limit: Limit(DEFAULT_LIMIT, MAX_LIMIT) = Field(  # type: ignore[valid-type]
        default=None, description=f"Facts per call (default {DEFAULT_LIMIT}, 1 to {MAX_LIMIT})."
    )
    cursor: CursorArg(TOOL, "the newest fact", decode_cursor) = Field(  # type: ignore[valid-type]
        default=None, description=CURSOR_DESCRIPTION
    )


class FactRow(FactItem):
    """A fact as list_facts lists it: recall's item with its state always present, its writer,
    why it stopped being live and what it replaced."""

    client_id: str
    expired_reason: str | None
    supersedes: str | None


class ListFactsResult(Wire):
    facts: list[FactRow]
    next_cursor: str | None  # null: the end
    #: only when asked (`conflicts: true`): fact ids, one list per attribute with several values
    conflicts: list[list[str]] | None = None
    protocol_version: int


def conflict_groups(facts: list[Fact], now: datetime) -> list[list[str]]:
    """The active facts (newest first) that give one attribute different values, grouped: each pair
    `sameness.probable_update` reads as a new value of the other's attribute (the detection behind
    remember's `probable_update` notice, on the stored vectors) joins one group; groups of two or
    more, in the order of their newest fact."""
    live = [f for f in facts if f.superseded_by is None and (f.expired_at is None or f.expired_at > now)]
    root = {f.fact_id: f.fact_id for f in live}

    def find(x: str) -> str:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for i, new in enumerate(live):
        for old in live[i + 1 :]:
            a, b = new.vector, old.vector
            similarity = cosine(a, b) if a and b and new.vector_model == old.vector_model else None
            if sameness.probable_update(new.text, new.kind, old.text, old.kind, similarity, attributed=True):
                root[find(new.fact_id)] = find(old.fact_id)
    groups: dict[str, list[str]] = {}
    for f in live:
        groups.setdefault(find(f.fact_id), []).append(f.fact_id)
    return [g for g in groups.values() if len(g) > 1]


def fact_row(f: Fact, now: datetime) -> FactRow:
    item = fact_model(f, now)
    return FactRow(
        **{**item.model_dump(), "superseded_by": f.superseded_by, "expired_at": item.expired_at},
        client_id=f.client_id,
        expired_reason=f.expired_reason,
        supersedes=f.supersedes,
    )


def _text(value: str | None) -> str | None:
    return value.strip() or None if value is not None else None


def _entity_slug(deps: Deps, caller: Caller, name: str | None) -> str | None:
    """The entity filter's slug (None: no filter), resolved as recall resolves it."""
    text = _text(name)
    return None if text is None else filter_slug(deps, TOOL, caller.tenant, text, world_only=caller.remote)


def run(deps: Deps, caller: Caller, params: ListFactsParams, ctx: CallContext) -> Outcome:
    now = deps.clock.now()
    after = parse_since(TOOL, params, "created_after", now)
    before_time = parse_since(TOOL, params, "created_before", now)
    limit = params.limit or DEFAULT_LIMIT
    fact_id = _text(params.fact_id)
    if fact_id is not None:
        fact = shown_to(caller, deps.facts.get(caller.tenant, fact_id))
        shown = [fact] if fact is not None else []
        rows, more = shown, False
    elif (slug := _entity_slug(deps, caller, params.entity)) == "":
        rows, more = [], False  # a name that can name nothing (longer than any slug) matches no fact
    else:
        where = FactFilter(
            entity_slug=slug,
            kind=params.kind,
            state=params.state or "active",
            session_id=_text(params.session_id),
            client_id=_text(params.client_id),
            provenance=_text(params.provenance),
            created_after=after,
            created_before=before_time,
        )
        position = decode_cursor(params.cursor) if params.cursor and params.cursor.strip() else None
        found = deps.fact_listing.listing(
            caller.tenant, now=now, world_only=caller.remote, where=where, before=position, limit=limit + 1
        )
        rows, more = found[:limit], len(found) > limit
    result = ListFactsResult(
        facts=[fact_row(f, now) for f in shown_facts(caller, rows)],  # D25: redacted for a remote caller
        next_cursor=encode_cursor(rows[-1]) if more else None,
        conflicts=conflict_groups(rows, now) if params.conflicts else None,
        protocol_version=PROTOCOL_VERSION,
    )
    body = result.model_dump(mode="json")
    if not params.conflicts:
        del body["conflicts"]  # the answer is unchanged for every caller that does not ask
    return Outcome(body=body)


DESCRIPTION = (
    "List saved facts newest first, 50 per call by default (limit up to 200), filtered by entity, "
    "kind, state (active by default; superseded, forgotten, expired or any), session_id, client_id, provenance "
    "text and created_after/created_before; fact_id returns that one fact. Pass the returned "
    'next_cursor as cursor to continue; null means the end. Example: {"entity": "people/alice", '
    '"state": "any"}.'
)

SPEC = read_tool(TOOL, DESCRIPTION, ListFactsParams, ListFactsResult, run)
