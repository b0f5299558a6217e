"""API clients (token hashes).

`by_hash` answers from a per-thread map while the database is unchanged: every lookup first reads
the database's change stamp (`Database.change_stamp`, one PRAGMA), and any commit since the map was
filled (a `fleetmem token revoke` or `create` from another process, a revoke through the server,
any other write) empties it, so a revoke takes effect from the very next request. The map holds
what the table held (the record, or None), never a verdict: `verify_token` still checks
`revoked_at` against the clock on every request.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import datetime

from fleetmem.adapters.local.sqlite.db import Database, dt_of, dt_opt, ms, ms_opt, row_model
from fleetmem.models import ClientRecord

_CLIENT_COLS = "token_hash, token_id, tenant, client_id, scopes, created_at, revoked_at"
_READ_COLS = f"{_CLIENT_COLS}, last_used_at"
_client_of = row_model(
    ClientRecord,
    _READ_COLS,
    scopes=lambda v: frozenset(json.loads(v)),
    created_at=dt_of,
    revoked_at=dt_opt,
    last_used_at=dt_opt,
)


#: Lookups one thread's map keeps before it starts over (a flood of unknown tokens cannot grow it).
LOOKUP_CACHE_SIZE = 4096


class SqliteClientStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._seen = threading.local()

    def create(self, record: ClientRecord) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                f"INSERT INTO clients ({_CLIENT_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    record.token_hash,
                    record.token_id,
                    record.tenant,
                    record.client_id,
                    json.dumps(sorted(record.scopes)),
                    ms(record.created_at),
                    ms_opt(record.revoked_at),
                ),
            )

        self.db.write(run)

    def by_hash(self, token_hash: str) -> ClientRecord | None:
        stamp = self.db.change_stamp()
        seen = self._seen
        if getattr(seen, "stamp", None) != stamp or len(seen.records) >= LOOKUP_CACHE_SIZE:
            seen.stamp, seen.records = stamp, {}
        records: dict[str, ClientRecord | None] = seen.records
        if token_hash in records:
            return records[token_hash]
        row = self.db.one(f"SELECT {_READ_COLS} FROM clients WHERE token_hash = ?", (token_hash,))
        record = None if row is None else _client_of(row)
        records[token_hash] = record
        return record

    def list(self, tenant: str | None = None) -> list[ClientRecord]:
        args: tuple[str, ...] = ()
        if tenant is None:
            sql = f"SELECT {_READ_COLS} FROM clients ORDER BY tenant, created_at, token_id"
        else:
            sql = f"SELECT {_READ_COLS} FROM clients WHERE tenant = ? ORDER BY created_at, token_id"
            args = (tenant,)
        return [_client_of(r) for r in self.db.all(sql, args)]

    def revoke(self, token_id: str, *, at: datetime, tenant: str | None = None) -> bool:
        """True when a live token was revoked now; False when unknown or already revoked."""
        sql = "UPDATE clients SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL"
        if tenant is None:
            return self.db.run(sql, (ms(at), token_id)) > 0
        return self.db.run(sql + " AND tenant = ?", (ms(at), token_id, tenant)) > 0

    def touch(self, token_hash: str, *, at: datetime) -> None:
        self.db.run("UPDATE clients SET last_used_at = ? WHERE token_hash = ?", (ms(at), token_hash))
