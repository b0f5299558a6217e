"""Session cursors."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta

from fleetmem.adapters.local.sqlite.db import Database, dt_of, ms, row_model
from fleetmem.errors import Conflict
from fleetmem.models import Cursor
from fleetmem.protocol import SESSION_IDLE_DAYS, SESSIONS_PER_CLIENT
from fleetmem.timefmt import to_ms

_CURSOR_COLS = (
    "tenant, client_id, session_id, since, slug, touched_at, incomplete_streak, version, page_seq, fact_seq, expiry"
)
_cursor_of = row_model(Cursor, _CURSOR_COLS, since=dt_of, touched_at=dt_of)


class SqliteCursorStore:
    def __init__(
        self,
        db: Database,
        *,
        sessions_per_client: int = SESSIONS_PER_CLIENT,
        idle_days: int = SESSION_IDLE_DAYS,
    ) -> None:
        self.db = db
        self.sessions_per_client = sessions_per_client
        self.idle = timedelta(days=idle_days)

    def count_live(self, tenant: str, *, now: datetime) -> int:
        row = self.db.one(
            "SELECT count(*) FROM cursors WHERE tenant = ? AND touched_at >= ?", (tenant, ms(now - self.idle))
        )
        return int(row[0]) if row else 0

    def get(self, tenant: str, client_id: str, session_id: str, *, now: datetime) -> Cursor | None:
        row = self.db.one(
            f"SELECT {_CURSOR_COLS} FROM cursors WHERE tenant = ? AND client_id = ? AND session_id = ?",
            (tenant, client_id, session_id),
        )
        if row is None or now - dt_of(row[5]) > self.idle:
            return None
        return _cursor_of(row)

    def for_tenant(self, tenant: str, *, now: datetime, limit: int) -> list[Cursor]:
        rows = self.db.all(
            f"SELECT {_CURSOR_COLS} FROM cursors WHERE tenant = ? AND touched_at >= ? "
            "ORDER BY touched_at DESC, client_id, session_id LIMIT ?",
            (tenant, ms(now - self.idle), max(0, limit)),
        )
        return [_cursor_of(r) for r in rows]

    def put(self, cursor: Cursor, *, expected_version: int | None) -> Cursor:
        """Idle expiry on write is judged at `cursor.touched_at` (the time of this wake)."""
        key = (cursor.tenant, cursor.client_id, cursor.session_id)

        def run(conn: sqlite3.Connection) -> Cursor:
            row = conn.execute(
                "SELECT version, touched_at FROM cursors WHERE tenant = ? AND client_id = ? AND session_id = ?",
                key,
            ).fetchone()
            if expected_version is None:
                if row is not None and cursor.touched_at - dt_of(row[1]) <= self.idle:
                    raise Conflict("the session cursor already exists")
            elif row is None or row[0] != expected_version:
                raise Conflict("the session cursor changed")
            version = (row[0] if row is not None else 0) + 1
            stored = cursor.model_copy(
                update={
                    "version": version,
                    "since": to_ms(cursor.since),
                    "touched_at": to_ms(cursor.touched_at),
                }
            )
            conn.execute(
                f"INSERT INTO cursors ({_CURSOR_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant, client_id, session_id) DO UPDATE SET since = excluded.since, "
                "slug = excluded.slug, touched_at = excluded.touched_at, "
                "incomplete_streak = excluded.incomplete_streak, version = excluded.version, "
                "page_seq = excluded.page_seq, fact_seq = excluded.fact_seq, expiry = excluded.expiry",
                (
                    *key,
                    ms(stored.since),
                    stored.slug,
                    ms(stored.touched_at),
                    stored.incomplete_streak,
                    version,
                    stored.page_seq,
                    stored.fact_seq,
                    stored.expiry,
                ),
            )
            if row is None:
                # only a new session can push the client over its limit: evict the least recently woken
                conn.execute(
                    "DELETE FROM cursors WHERE tenant = ? AND client_id = ? AND session_id IN ("
                    "SELECT session_id FROM cursors WHERE tenant = ? AND client_id = ? "
                    "ORDER BY touched_at DESC, session_id DESC LIMIT -1 OFFSET ?)",
                    (
                        cursor.tenant,
                        cursor.client_id,
                        cursor.tenant,
                        cursor.client_id,
                        max(1, self.sessions_per_client),
                    ),
                )
            return stored

        return self.db.write(run)
