"""Idempotency records.

A claim runs inside one write transaction (the store's single writer, `BEGIN IMMEDIATE` against
other processes), so looking at the key and taking it — fresh, expired, or in flight past its
lease — is atomic: of two retries taking over a lapsed claim, exactly one gets it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from fleetmem.adapters.local.sqlite.db import Database, dt_of, dt_opt, ms, ms_opt, row_model
from fleetmem.models import IdempotencyRecord

_IDEM_COLS = "tenant, client_id, verb, key, request_hash, result, created_at, expires_at, lease_until, claim_id"


_idem_of = row_model(
    IdempotencyRecord,
    _IDEM_COLS,
    result=lambda v: None if v is None else json.loads(v),
    created_at=dt_of,
    expires_at=dt_of,
    lease_until=dt_opt,
)


def _live(row: Sequence[Any], record: IdempotencyRecord, now: int) -> bool:
    """The stored record still holds its key against `record`: unexpired, and not an in-flight
    claim of the same request whose lease has lapsed (that one a retry takes over)."""
    if row[7] <= now:
        return False
    lapsed = row[5] is None and row[8] is not None and row[8] <= now and row[4] == record.request_hash
    return not lapsed


class SqliteIdempotencyStore:
    #: expired records are swept every this many claims (bounded work per call)
    SWEEP_EVERY = 256

    def __init__(self, db: Database) -> None:
        self.db = db
        self._claims = 0

    def claim(self, record: IdempotencyRecord, *, now: datetime) -> IdempotencyRecord | None:
        key = (record.tenant, record.client_id, record.verb, record.key)
        self._claims += 1
        sweep = self._claims % self.SWEEP_EVERY == 0

        def run(conn: sqlite3.Connection) -> IdempotencyRecord | None:
            if sweep:
                conn.execute(
                    "DELETE FROM idempotency WHERE (tenant, client_id, verb, key) IN ("
                    "SELECT tenant, client_id, verb, key FROM idempotency WHERE expires_at <= ? LIMIT 500)",
                    (ms(now),),
                )
            row = conn.execute(
                f"SELECT {_IDEM_COLS} FROM idempotency WHERE tenant = ? AND client_id = ? AND verb = ? AND key = ?",
                key,
            ).fetchone()
            if row is not None and _live(row, record, ms(now)):
                return _idem_of(row)
            conn.execute(
                f"INSERT OR REPLACE INTO idempotency ({_IDEM_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    *key,
                    record.request_hash,
                    None if record.result is None else json.dumps(record.result),
                    ms(record.created_at),
                    ms(record.expires_at),
                    ms_opt(record.lease_until),
                    record.claim_id,
                ),
            )
            return None

        return self.db.write(run)

    def complete(self, tenant: str, client_id: str, verb: str, key: str, result: dict) -> None:
        payload = json.dumps(result, default=str, ensure_ascii=False)
        self.db.run(
            "UPDATE idempotency SET result = ? WHERE tenant = ? AND client_id = ? AND verb = ? AND key = ?",
            (payload, tenant, client_id, verb, key),
        )

    def release(self, tenant: str, client_id: str, verb: str, key: str, claim_id: str | None = None) -> None:
        mine = "" if claim_id is None else " AND claim_id = ?"
        self.db.run(
            "DELETE FROM idempotency WHERE tenant = ? AND client_id = ? AND verb = ? AND key = ? "
            f"AND result IS NULL{mine}",
            (tenant, client_id, verb, key, *(() if claim_id is None else (claim_id,))),
        )
