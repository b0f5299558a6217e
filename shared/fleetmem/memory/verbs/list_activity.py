"""`list_activity(client_id?, action?, entity?, since?, until?, limit?, cursor?)` — who wrote what:
the tenant's fact audit events, newest first (full surface, read).

Public API: `ListActivityParams`, `ListActivityResult`, `ActivityRow`, `run`, `SPEC` (registered).

Each row is one audit event about a fact: `write` (saved), `supersede` (replaced by a newer fact),
`expire` (forgotten, or retired as restated) or `purge` (deleted for good), with the client that
did it (`actor`), when, the reason and provenance given, and the fact's entity and text (none for a
purged fact). Filters combine: `client_id` (exact), `action`, `entity` (a slug or a name, resolved as
list_facts resolves it), `since` / `until` (ISO 8601, strict bounds). `limit` 1..200 (default 50);
`cursor` is the opaque `next_cursor` of the previous call. A page may hold fewer than `limit` rows
while `next_cursor` is not null (rows the caller may not see were passed over): continue until it
is null.

Scope read: it shows what list_facts already shows a reader (each fact's writer, state, reason and
provenance), event by event. The tenant is the credential's; another tenant's client id lists
nothing. Remote callers never see an event about a private fact (a purge is shown to them only
when it recorded that the fact was world); their text, reason and provenance are redacted (D25).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, WithJsonSchema

from fleetmem.errors import Outcome
from fleetmem.memory import cursors
from fleetmem.memory.common import parse_since, shown_to
from fleetmem.memory.cursors import CURSOR_DESCRIPTION, CursorArg
from fleetmem.memory.entities import filter_slug
from fleetmem.memory.params import Hint, Limit, Params, Since
from fleetmem.memory.redaction import redact_opt
from fleetmem.memory.registry import read_tool
from fleetmem.models import AuditEvent, Caller, Fact, Wire
from fleetmem.ports import ActivityFilter, CallContext, Deps
from fleetmem.protocol import PROTOCOL_VERSION
from fleetmem.timefmt import iso

TOOL = "list_activity"
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
#: the audit actions about facts, the ones listed
ACTIONS = ("write", "supersede", "expire", "purge")
#: events read from the store per round: the page asked for (at least MIN_BATCH, so filtered-out
#: events cost few rounds), at most BATCH; a call reads at most MAX_EVENTS (then `next_cursor` resumes)
BATCH = 201
MIN_BATCH = 20
MAX_EVENTS = 1000


def encode_cursor(position: str) -> str:
    return cursors.encode({"a": position})


def decode_cursor(cursor: str) -> str | None:
    position = (cursors.decode(cursor) or {}).get("a")
    return position if isinstance(position, str) and position else None


class ListActivityParams(Params):
    client_id: str | None = Field(
        default=None, description='Only what this client (agent) did: its client id, e.g. "planner".'
    )
    action: Annotated[
        Literal["write", "supersede", "expire", "purge"] | None,
        WithJsonSchema({"type": "string", "enum": list(ACTIONS)}),
        Hint(accepts=f"one of {', '.join(ACTIONS)}", fix="write"),
    ] = Field(default=None, description="Only events of this action (expire: forgotten).")
    entity: str | None = Field(
        default=None, description='Only events about facts of this entity: its slug or name, e.g. "people/alice".'
    )
    since: Since = Field(default=None, description='Only events after this ISO 8601 time, e.g. "2026-06-01".')
    until: Since = Field(default=None, description="Only events before this ISO 8601 time.")
    limit: Limit(DEFAULT_LIMIT, MAX_LIMIT) = Field(  # type: ignore[valid-type]
        default=None, description=f"Events per call (default {DEFAULT_LIMIT}, 1 to {MAX_LIMIT})."
    )
    cursor: CursorArg(TOOL, "the newest event", decode_cursor) = Field(  # type: ignore[valid-type]
        default=None, description=CURSOR_DESCRIPTION
    )


class ActivityRow(Wire):
    at: str
    action: str
    actor: str = Field(description="The client id that did it.")
    fact_id: str
    entity_slug: str | None
    fact: str | None = Field(description="The fact's text; null for a purged fact.")
    reason: str | None
    provenance: str | None


class ListActivityResult(Wire):
    events: list[ActivityRow]
    next_cursor: str | None  # null: the end
    protocol_version: int


def _text(value: str | None) -> str | None:
    return value.strip() or None if value is not None else None


def _shown(caller: Caller, event: AuditEvent, fact: Fact | None, slug: str | None) -> bool:
    """Whether the caller may see this event and it is about the entity asked for (when one is)."""
    if fact is not None:
        entity = fact.entity_slug
        if shown_to(caller, fact) is None:
            return False
    else:  # purged (the fact is gone): what the purge recorded decides
        if event.action != "purge" or (caller.remote and event.detail.get("visibility") != "world"):
            return False
        entity = event.detail.get("entity_slug")
    return slug is None or entity == slug


def _row(caller: Caller, event: AuditEvent, fact: Fact | None) -> ActivityRow:
    hide = redact_opt if caller.remote else (lambda v: v)
    return ActivityRow(
        at=iso(event.at) or "",
        action=event.action,
        actor=event.actor,
        fact_id=event.subject,
        entity_slug=fact.entity_slug if fact is not None else event.detail.get("entity_slug"),
        fact=hide(fact.text) if fact is not None else None,
        reason=hide(event.reason),
        provenance=hide(event.provenance),
    )


def _page(
    deps: Deps, caller: Caller, where: ActivityFilter, slug: str | None, start: str | None, limit: int
) -> tuple[list[ActivityRow], str | None]:
    """Up to `limit` rows the caller may see from `start` on, and where the next page starts."""
    shown: list[tuple[str, ActivityRow]] = []
    position = start
    size = min(BATCH, max(limit + 1, MIN_BATCH))  # one more than shown tells whether a next page exists
    for _ in range(-(-MAX_EVENTS // size)):
        batch = deps.audit.activity(caller.tenant, where=where, before=position, limit=size)
        ids = list(dict.fromkeys(e.subject for _, e in batch))
        facts = {f.fact_id: f for f in deps.facts.many(caller.tenant, ids)} if ids else {}
        for pos, event in batch:
            fact = facts.get(event.subject)
            if fact is not None and fact.tenant != caller.tenant:
                continue
            if _shown(caller, event, fact, slug):
                if len(shown) == limit:
                    return [r for _, r in shown], shown[-1][0]
                shown.append((pos, _row(caller, event, fact)))
            position = pos
        if len(batch) < size:
            return [r for _, r in shown], None
    return [r for _, r in shown], position  # the rounds ran out: the next call goes on from here


def run(deps: Deps, caller: Caller, params: ListActivityParams, ctx: CallContext) -> Outcome:
    now = deps.clock.now()
    since = parse_since(TOOL, params, "since", now)
    until = parse_since(TOOL, params, "until", now)
    limit = params.limit or DEFAULT_LIMIT
    entity = _text(params.entity)
    slug = None if entity is None else filter_slug(deps, TOOL, caller.tenant, entity, world_only=caller.remote)
    rows: list[ActivityRow]
    position: str | None
    if slug == "":
        rows, position = [], None  # a name that can name nothing matches no event
    else:
        where = ActivityFilter(
            actor=_text(params.client_id),
            actions=(params.action,) if params.action else ACTIONS,
            since=since,
            until=until,
        )
        start = decode_cursor(params.cursor) if params.cursor and params.cursor.strip() else None
        rows, position = _page(deps, caller, where, slug, start, limit)
    result = ListActivityResult(
        events=rows,
        next_cursor=encode_cursor(position) if position is not None else None,
        protocol_version=PROTOCOL_VERSION,
    )
    return Outcome(body=result.model_dump(mode="json"))


DESCRIPTION = (
    "List who wrote what: this memory's fact events newest first (write, supersede, expire = "
    "forgotten, purge), each with the client that did it, when, the reason and the fact, filtered by "
    "client_id, action, entity and since/until; 50 per call by default (limit up to 200). Pass "
    'next_cursor as cursor to continue; null means the end. Example: {"client_id": "planner", '
    '"since": "2026-06-01"}.'
)

SPEC = read_tool(TOOL, DESCRIPTION, ListActivityParams, ListActivityResult, run)
