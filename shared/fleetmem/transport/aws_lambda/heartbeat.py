"""A scheduled wake: `delta` for one session from its stored cursor, delivered to SQS or the
stage's event bus, and only then the cursor advanced to what was delivered. The budget bound, the
size fitting and the cursor policy are the domain's (`fleetmem.memory.heartbeat`).

A wake names its heartbeat only (`{"heartbeat": "<name>"}`, the schedule's input); tenant, client,
session and destination come from the stage's own heartbeat table, set at deploy
(`FLEETMEM_HEARTBEATS`). So whoever may invoke the function can at most run a configured wake early;
a payload naming a tenant, client or destination itself is refused."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fleetmem.memory import heartbeat as policy
from fleetmem.models import Caller, Cursor
from fleetmem.ports import Deps
from fleetmem.transport.aws_lambda import runtime

log = logging.getLogger("fleetmem.lambda")


#: The one key of a wake event.
WAKE_FIELD = "heartbeat"


def handle_wake(event: Mapping[str, Any], deps: Deps | None = None, send: Any = None) -> dict[str, Any]:
    """The scheduler's event -> the configured heartbeat it names -> `run_heartbeat`; anything
    else is refused (logged, nothing read or sent; not raised, so the platform does not retry)."""
    name = event.get(WAKE_FIELD) if isinstance(event, Mapping) else None
    spec = None
    if isinstance(name, str) and set(event) == {WAKE_FIELD}:
        spec = runtime.job_settings().heartbeats.get(name)
    if spec is None:
        log.warning("heartbeat wake refused", extra={"event": "heartbeat_wake_refused"})
        return {"status": "refused", "delivered": False}
    return run_heartbeat(spec, deps, send)


def run_heartbeat(payload: Mapping[str, Any], deps: Deps | None = None, send: Any = None) -> dict[str, Any]:
    """One wake. At-least-once: if delivery fails the exception propagates (the platform retries)
    and the cursor stays put; a cursor race with another wake is lost quietly (the other wake
    advanced it). First wake of a session: the cursor is created at now and nothing is delivered,
    exactly like `delta` with a new session_id. A delta too large for one message is fetched
    again with a smaller budget, and cut to item heads at the floor, so it never sticks. A deleted
    tenant's wake is refused (`fleetmem.tokens.tenant_deleted`: one lookup)."""
    from fleetmem.errors import Conflict
    from fleetmem.timefmt import iso
    from fleetmem.tokens import tenant_deleted
    from fleetmem.transport.dispatch import dispatch

    d = deps or runtime.get_deps()
    out = send or runtime.delivery()
    tenant, client_id = str(payload["tenant"]), str(payload["client_id"])
    if tenant_deleted(d.clients, tenant):
        # `fleetmem tenant delete` left the tenant's tombstone: nothing is read, written or sent
        log.warning("heartbeat of a deleted tenant refused", extra={"event": "heartbeat_tenant_deleted"})
        return {"status": "refused", "delivered": False}
    session_id = str(payload["session_id"])[:200]
    destination = payload["destination"]
    now = d.clock.now()
    cursor = d.cursors.get(tenant, client_id, session_id, now=now)
    if cursor is None:
        # at the current change counters, like delta's first wake: later wakes resume exactly (D14)
        page_seq, fact_seq = d.gather(
            lambda: d.page_feed.change_floor(tenant, since=None), lambda: d.fact_feed.change_floor(tenant, after=None)
        )
        fresh = Cursor(
            tenant=tenant,
            client_id=client_id,
            session_id=session_id,
            since=now,
            slug="",
            touched_at=now,
            page_seq=page_seq,
            fact_seq=fact_seq,
            expiry=iso(now),
        )
        try:
            d.cursors.put(fresh, expected_version=None)
        except Conflict:
            pass  # another wake created it first; either way the session starts now
        return {"status": "established", "delivered": False}

    caller = Caller(tenant=tenant, client_id=client_id, scopes=frozenset({"read"}), remote=True)
    budget = policy.wake_budget(payload.get("budget_tokens"))
    truncated = False
    too_large: tuple[dict[str, Any], dict[str, Any]] | None = None  # last (body, message) over the limit
    while True:
        arguments = policy.delta_arguments(cursor, budget)
        result = dispatch("delta", arguments, caller, d, surface="verbs", transport="http")
        if result.is_error:
            # Leave the cursor; the next wake retries from the same place.
            log.warning(
                "heartbeat delta failed", extra={"event": "heartbeat_delta_error", "code": result.body.get("code")}
            )
            return {"status": "error", "code": result.body.get("code"), "delivered": False}
        body = result.body
        message = {
            "tenant": tenant,
            "client_id": client_id,
            "session_id": session_id,
            "correlation_id": result.correlation_id,
            "delta": body,
        }
        if not policy.has_changes(body) and too_large is None:
            break  # nothing changed
        if policy.has_changes(body) and out.size_of(destination, message) <= out.max_bytes:
            break  # fits
        if policy.has_changes(body):
            too_large = (body, message)
        smaller = policy.smaller_budget(budget)
        if smaller is not None and policy.has_changes(body):
            budget = smaller
            continue
        # The floor (or a budget so small it drops everything) is still too large: the last
        # over-size delta goes out cut to item heads, then to counts, so the cursor moves on.
        assert too_large is not None
        body, message = too_large
        for heads in (True, False):
            message = {**message, "delta": policy.truncate(body, heads=heads)}
            if out.size_of(destination, message) <= out.max_bytes:
                break
        truncated = True
        log.warning("heartbeat delta cut to fit one message", extra={"event": "heartbeat_truncated"})
        break
    delivered = policy.has_changes(body)
    if delivered:
        out.send(destination, message)
    moved = policy.advance(cursor, body, delivered=delivered, now=now)
    try:
        d.cursors.put(moved, expected_version=cursor.version)
    except Conflict:
        log.info("heartbeat cursor moved concurrently", extra={"event": "heartbeat_cursor_race"})
    status = "delivered" if delivered else ("incomplete" if body.get("has_more") else "empty")
    return {
        "status": status,
        "delivered": delivered,
        "truncated": truncated,
        "budget_tokens": budget,
        "next_cursor": {
            "since": iso(moved.since),
            "slug": moved.slug,
            "page_seq": moved.page_seq,
            "fact_seq": moved.fact_seq,
        },
    }
