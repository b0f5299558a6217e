"""The audit log; `_insert_audit` is also called inside other stores' write transactions."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from fleetmem.adapters.local.sqlite.db import Database, dt_of, ms
from fleetmem.models import (
    AuditEvent,
)


def _insert_audit(conn: sqlite3.Connection, event: AuditEvent) -> None:
    """One audit row; called inside the caller's write transaction so a write and its trail commit together."""
    conn.execute(
        "INSERT INTO audit (tenant, subject, action, actor, at, reason, provenance, detail) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            event.tenant,
            event.subject,
            event.action,
            event.actor,
            ms(event.at),
            event.reason,
            event.provenance,
            json.dumps(event.detail, default=str, ensure_ascii=False),
        ),
    )


class SqliteAuditLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    def append(self, event: AuditEvent) -> None:
        self.db.write(lambda c: _insert_audit(c, event))

    def for_subject(self, tenant: str, subject: str) -> list[AuditEvent]:
        rows = self.db.read(
            lambda c: c.execute(
                "SELECT tenant, subject, action, actor, at, reason, provenance, detail FROM audit "
                "WHERE tenant = ? AND subject = ? ORDER BY at, id",
                (tenant, subject),
            ).fetchall()
        )
        return [_event_of(r) for r in rows]

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[list[AuditEvent], str | None]:
        """Every audit event of the tenant in the order written, from the opaque position `after`
        (None: the start); the position to continue from, None at the end."""
        n = max(1, int(limit))
        rows = self.db.read(
            lambda c: c.execute(
                "SELECT tenant, subject, action, actor, at, reason, provenance, detail, id FROM audit "
                "WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?",
                (tenant, int(after or 0), n),
            ).fetchall()
        )
        return [_event_of(r) for r in rows], (str(rows[-1][8]) if len(rows) == n else None)


def _event_of(r: Sequence[Any]) -> AuditEvent:
    return AuditEvent(
        tenant=r[0],
        subject=r[1],
        action=r[2],
        actor=r[3],
        at=dt_of(r[4]),
        reason=r[5],
        provenance=r[6],
        detail=json.loads(r[7]),
    )
