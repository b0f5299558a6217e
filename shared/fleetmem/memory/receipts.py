"""D22 write receipts: what a keyed write's record says about it, as the caller sees it.

`receipt(record, now)` is the `write_request` object every receipt-bearing answer carries (a write's
success, a pending write's `unavailable`, `get_write_request`, `list_write_requests`,
`cancel_write_request`). A receipt names the request, its state and its timestamps, plus a small
`outcome` (the tool and ids only): never fact text, page content or credentials.

A claim's holder (`process_holder()`, on the local server) is `host:pid:start`; `holder_gone`
says that process is provably gone (same host, and no process with that pid and start time), so
the claim is `recovering` and a retry takes it over at once (the dead-holder rule of D22).
"""

from __future__ import annotations

import os
import socket
from datetime import datetime
from typing import Any

from pydantic import Field

from fleetmem.models import IdempotencyRecord, Wire
from fleetmem.protocol import WriteHealthAction, WriteHealthAssessment, WriteHealthReason, WriteState
from fleetmem.timefmt import iso

#: How long a caller waits before polling a running write again.
POLL_AFTER_MS = 1000
#: The answer fields a receipt's `outcome` keeps (ids and statuses only).
OUTCOME_FIELDS = ("id", "status", "slug", "expired", "deleted")


class WriteDiagnostic(Wire):
    """Why a non-terminal write waits (the reference's WriteDiagnostic; its allowlisted values)."""

    age_ms: int = Field(ge=0)
    assessment: WriteHealthAssessment
    reason: WriteHealthReason
    next_action: WriteHealthAction
    observed_at: str | None = None


class WriteRequest(Wire):
    """A write receipt (`write_request`)."""

    request_id: str
    client_request_id: str | None = None
    state: WriteState
    retry_after_ms: int | None
    outcome: dict[str, Any] | None = None
    persistence: dict[str, Any] | None = None
    created_at: str | None = None
    updated_at: str | None = None
    diagnostic: WriteDiagnostic | None = None


class ReceiptFields(Wire):
    """The receipt fields a receipt-bearing write's success answer carries (all optional)."""

    request_id: str | None = Field(default=None, description="The write's request id (a UUID).")
    client_request_id: str | None = Field(default=None, description="The id the caller sent, when it was not a UUID.")
    state: WriteState | None = None
    retry_after_ms: int | None = None
    persistence: dict[str, Any] | None = None
    created_at: str | None = None
    updated_at: str | None = None
    write_request: WriteRequest | None = None
    idempotent_replay: bool | None = None


def process_holder() -> str:
    """This process as a claim's holder: host, pid and the process's start (clock ticks since boot)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_ticks(os.getpid())}"


def _start_ticks(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return ""
    # the fields after the command name (which may hold spaces) start after its closing ')';
    # a zombie (killed, not yet reaped) runs no more
    fields = stat.rsplit(")", 1)[-1].split()
    return "" if fields[0] == "Z" else fields[19]


def holder_gone(holder: str | None) -> bool:
    """The claim's holder is provably gone: a process of this host that no longer runs (its pid is
    free, or now another process started at another time). Unknown holders are never gone."""
    if not holder:
        return False
    host, _, rest = holder.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit() or not start:
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    return _start_ticks(pid) != start


def read_state(record: IdempotencyRecord, *, now: datetime) -> WriteState:
    """The receipt state of a record: a running claim whose holder is gone is `recovering`."""
    if record.state == "running" and holder_gone(record.holder):
        return "recovering"
    return record.state


def outcome_of(tool: str, body: dict[str, Any]) -> dict[str, Any]:
    """The small outcome a receipt keeps of a write's answer: the tool, ids and statuses only."""
    return {"tool": tool, **{k: body[k] for k in OUTCOME_FIELDS if k in body}}


def receipt(record: IdempotencyRecord, *, now: datetime) -> dict[str, Any]:
    """The `write_request` object of `record` at `now`."""
    state = read_state(record, now=now)
    out: dict[str, Any] = {"request_id": record.key}
    if record.client_request_id is not None:
        out["client_request_id"] = record.client_request_id
    out["state"] = state
    out["retry_after_ms"] = None if state in ("committed", "cancelled") else _retry_ms(state)
    if record.outcome is not None:
        out["outcome"] = record.outcome
    out["persistence"] = {"mode": "database"}
    out["created_at"] = iso(record.created_at)
    out["updated_at"] = iso(record.updated_at or record.created_at)
    if state in ("running", "recovering"):
        out["diagnostic"] = _diagnostic(record, state, now)
    return out


def _retry_ms(state: str) -> int:
    return 0 if state == "recovering" else POLL_AFTER_MS


def _diagnostic(record: IdempotencyRecord, state: str, now: datetime) -> dict[str, Any]:
    """Why a non-terminal write waits, in the reference's words: `pending` while its call runs;
    `recovery_required` once its lease lapsed (its call died: the next retry takes it over);
    `owner_unavailable` when its holder process is gone (`recovering`: a retry takes it over at
    once). The caller polls the receipt, or resends the same write under the same request id."""
    lapsed = record.lease_until is not None and record.lease_until <= now
    assessment: WriteHealthAssessment = "pending"
    reason: WriteHealthReason = "pending"
    if state == "recovering":
        assessment, reason = "stalled", "owner_unavailable"
    elif lapsed:
        assessment, reason = "stalled", "recovery_required"
    action: WriteHealthAction = "poll"
    return {
        "age_ms": max(0, int((now - record.created_at).total_seconds() * 1000)),
        "assessment": assessment,
        "reason": reason,
        "next_action": action,
        "observed_at": iso(now),
    }


def spread(body: dict[str, Any], write_request: dict[str, Any]) -> dict[str, Any]:
    """A success answer with its receipt: `write_request` plus its fields spread at the top level."""
    top = ("request_id", "client_request_id", "state", "retry_after_ms", "persistence", "created_at", "updated_at")
    return {**body, **{k: write_request[k] for k in top if k in write_request}, "write_request": write_request}
