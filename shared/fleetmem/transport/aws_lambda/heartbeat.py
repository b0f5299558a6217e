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
from fleetmem.timefmt import iso
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
    from fleetmem.tokens import tenant_deleted

    d = deps or runtime.get_deps()
    out = send or runtime.delivery()
    tenant, client_id = str(payload["tenant"]), str(payload["client_id"])
    if tenant_deleted(d.clients, tenant):
        # `fleetmem tenant delete` left the tenant's tombstone: nothing is read, written or sent
        log.warning("heartbeat of a deleted tenant refused", extra={"event": "heartbeat_tenant_deleted"})
        return {"status": "refused", "delivered": False}
    wake = _Wake(d, out, tenant, client_id, str(payload["session_id"])[:200], payload["destination"])
    cursor = d.cursors.get(tenant, client_id, wake.session_id, now=wake.now)
    if cursor is None:
        return wake.establish()
    fetched = wake.fitting_delta(cursor, policy.wake_budget(payload.get("budget_tokens")))
    if isinstance(fetched, dict):
        return fetched
    body, message, budget, truncated = fetched
    delivered = policy.has_changes(body)
    if delivered:
        out.send(wake.destination, message)
    moved = wake.advance(cursor, body, delivered)
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


#: A delta that fits one message: (body, message, budget_tokens it was fetched with, cut to fit).
Fetched = tuple[dict[str, Any], dict[str, Any], Any, bool]


class _Wake:
    """The steps of one wake of one session (tenant, client, session) to its destination, at one `now`."""

    def __init__(self, d: Deps, out: Any, tenant: str, client_id: str, session_id: str, destination: Any) -> None:
        self.d, self.out = d, out
        self.tenant, self.client_id, self.session_id = tenant, client_id, session_id
        self.destination = destination
        self.now = d.clock.now()

    def establish(self) -> dict[str, Any]:
        """The first wake: a cursor at the current change counters, like delta's first wake, so
        later wakes resume exactly (D14); nothing is delivered."""
        from fleetmem.errors import Conflict

        d, tenant = self.d, self.tenant
        page_seq, fact_seq = d.gather(
            lambda: d.page_feed.change_floor(tenant, since=None), lambda: d.fact_feed.change_floor(tenant, after=None)
        )
        fresh = Cursor(
            tenant=tenant,
            client_id=self.client_id,
            session_id=self.session_id,
            since=self.now,
            slug="",
            touched_at=self.now,
            page_seq=page_seq,
            fact_seq=fact_seq,
            expiry=iso(self.now),
        )
        try:
            d.cursors.put(fresh, expected_version=None)
        except Conflict:
            pass  # another wake created it first; either way the session starts now
        return {"status": "established", "delivered": False}

    def fitting_delta(self, cursor: Cursor, budget: Any) -> Fetched | dict[str, Any]:
        """`delta` from the cursor, fetched again with a smaller budget while it is too large for one
        message; at the floor the last over-size delta is cut to fit. A failed delta is the wake's
        answer (the cursor stays, the next wake retries from the same place)."""
        from fleetmem.transport.dispatch import dispatch

        caller = Caller(tenant=self.tenant, client_id=self.client_id, scopes=frozenset({"read"}), remote=True)
        too_large: tuple[dict[str, Any], dict[str, Any]] | None = None  # last (body, message) over the limit
        while True:
            arguments = policy.delta_arguments(cursor, budget)
            result = dispatch("delta", arguments, caller, self.d, surface="verbs", transport="http")
            if result.is_error:
                log.warning("heartbeat delta failed", extra={"event": "heartbeat_delta_error", "code": result.code})
                return {"status": "error", "code": result.code, "delivered": False}
            body = result.body
            message = {
                "tenant": self.tenant,
                "client_id": self.client_id,
                "session_id": self.session_id,
                "correlation_id": result.correlation_id,
                "delta": body,
            }
            if not policy.has_changes(body) and too_large is None:
                return body, message, budget, False  # nothing changed
            if policy.has_changes(body) and self.out.size_of(self.destination, message) <= self.out.max_bytes:
                return body, message, budget, False  # fits
            if policy.has_changes(body):
                too_large = (body, message)
            smaller = policy.smaller_budget(budget)
            if smaller is not None and policy.has_changes(body):
                budget = smaller
                continue
            assert too_large is not None
            return (*self._cut_to_fit(too_large), budget, True)

    def _cut_to_fit(self, too_large: tuple[dict[str, Any], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The floor (or a budget so small it drops everything) is still too large: the last
        over-size delta goes out cut to item heads, then to counts, so the cursor moves on."""
        body, message = too_large
        for heads in (True, False):
            message = {**message, "delta": policy.truncate(body, heads=heads)}
            if self.out.size_of(self.destination, message) <= self.out.max_bytes:
                break
        log.warning("heartbeat delta cut to fit one message", extra={"event": "heartbeat_truncated"})
        return body, message

    def advance(self, cursor: Cursor, body: dict[str, Any], delivered: bool) -> Cursor:
        """The cursor moved past what was delivered; a race with another wake is lost quietly."""
        from fleetmem.errors import Conflict

        moved = policy.advance(cursor, body, delivered=delivered, now=self.now)
        try:
            self.d.cursors.put(moved, expected_version=cursor.version)
        except Conflict:
            log.info("heartbeat cursor moved concurrently", extra={"event": "heartbeat_cursor_race"})
        return moved
