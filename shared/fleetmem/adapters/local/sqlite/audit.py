"""The audit log; `_insert_audit` is also called inside other stores' write transactions."""

from __future__ import annotations

import json
import sqlite3

from fleetmem.adapters.local.sqlite.db import Database, dt_of, ms, row_model
from fleetmem.models import AuditEvent
from fleetmem.ports import ActivityFilter

_AUDIT_COLS = "tenant, subject, action, actor, at, reason, provenance, detail"
_event_of = row_model(AuditEvent, _AUDIT_COLS, at=dt_of, detail=json.loads)


def _insert_audit(conn: sqlite3.Connection, event: AuditEvent) -> None:
    """One audit row; called inside the caller's write transaction so a write and its trail commit together."""
    conn.execute(
        f"INSERT INTO audit ({_AUDIT_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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
        rows = self.db.all(
            f"SELECT {_AUDIT_COLS} FROM audit WHERE tenant = ? AND subject = ? ORDER BY at, id", (tenant, subject)
        )
        return [_event_of(r) for r in rows]

    def activity(
        self, tenant: str, *, where: ActivityFilter, before: str | None, limit: int
    ) -> list[tuple[str, AuditEvent]]:
        """Newest first on the `audit_time` index; a position is "<at ms>:<row id>"."""
        sql = f"SELECT {_AUDIT_COLS}, id FROM audit WHERE tenant = ?"
        args: list[object] = [tenant]
        if where.actor is not None:
            sql += " AND actor = ?"
            args.append(where.actor)
        if where.actions is not None:
            sql += f" AND action IN ({', '.join('?' for _ in where.actions)})"
            args += list(where.actions)
        if where.since is not None:
            sql += " AND at > ?"
            args.append(ms(where.since))
        if where.until is not None:
            sql += " AND at < ?"
            args.append(ms(where.until))
        position = _position(before)
        if position is not None:
            sql += " AND (at, id) < (?, ?)"
            args += list(position)
        sql += " ORDER BY at DESC, id DESC LIMIT ?"
        args.append(max(0, int(limit)))
        return [(f"{r[4]}:{r[8]}", _event_of(r[:8])) for r in self.db.all(sql, args)]

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[list[AuditEvent], str | None]:
        """Every audit event of the tenant in the order written, from the opaque position `after`
        (None: the start); the position to continue from, None at the end."""
        n = max(1, int(limit))
        rows = self.db.all(
            f"SELECT {_AUDIT_COLS}, id FROM audit WHERE tenant = ? AND id > ? ORDER BY id LIMIT ?",
            (tenant, int(after or 0), n),
        )
        return [_event_of(r) for r in rows], (str(rows[-1][8]) if len(rows) == n else None)


def _position(text: str | None) -> tuple[int, int] | None:
    """The (at ms, row id) of a position `activity` gave, or None for anything else."""
    at, _, row = (text or "").partition(":")
    return (int(at), int(row)) if at.isdigit() and row.isdigit() else None
