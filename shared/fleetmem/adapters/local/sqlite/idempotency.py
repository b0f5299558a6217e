"""Idempotency records: the claims and durable receipts of keyed writes (D2, D22).

A record is keyed by (tenant, client_id, request id): one id names one write, whatever the tool
(the tool is part of the request hash). A claim runs inside one write transaction (the store's
single writer, `BEGIN IMMEDIATE` against other processes), so looking at the key and taking it —
fresh, expired, cancelled, or in flight past its lease or from a holder known dead — is atomic: of
two retries taking over a lapsed claim, exactly one gets it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from fleetmem.adapters.local.sqlite.db import Database, dt_of, dt_opt, ms, ms_opt, row_model
from fleetmem.models import IdempotencyRecord

_IDEM_COLS = (
    "tenant, client_id, verb, key, request_hash, result, created_at, expires_at, lease_until, claim_id, "
    "client_request_id, state, updated_at, holder, outcome"
)


def _json_opt(value: Any) -> Any:
    return None if value is None else json.loads(value)


_idem_of = row_model(
    IdempotencyRecord,
    _IDEM_COLS,
    result=_json_opt,
    created_at=dt_of,
    expires_at=dt_of,
    lease_until=dt_opt,
    updated_at=dt_opt,
    outcome=_json_opt,
)


def _live(row: Sequence[Any], record: IdempotencyRecord, now: int, take_over: str | None) -> bool:
    """The stored record still holds its key against `record`: unexpired, not cancelled, and not
    an in-flight claim of the same request whose lease has lapsed or that `take_over` names (its
    holder is known dead): that one a retry takes over."""
    if row[7] <= now or row[11] == "cancelled":
        return False
    in_flight_same = row[5] is None and row[4] == record.request_hash
    lapsed = in_flight_same and row[8] is not None and row[8] <= now
    taken = in_flight_same and take_over is not None and row[9] == take_over
    return not (lapsed or taken)


class SqliteIdempotencyStore:
    #: expired records are swept every this many claims (bounded work per call)
    SWEEP_EVERY = 256

    def __init__(self, db: Database) -> None:
        self.db = db
        self._claims = 0

    def claim(
        self, record: IdempotencyRecord, *, now: datetime, take_over: str | None = None
    ) -> IdempotencyRecord | None:
        key = (record.tenant, record.client_id, record.key)
        self._claims += 1
        sweep = self._claims % self.SWEEP_EVERY == 0

        def run(conn: sqlite3.Connection) -> IdempotencyRecord | None:
            if sweep:
                conn.execute(
                    "DELETE FROM idempotency WHERE (tenant, client_id, key) IN ("
                    "SELECT tenant, client_id, key FROM idempotency WHERE expires_at <= ? LIMIT 500)",
                    (ms(now),),
                )
            row = conn.execute(
                f"SELECT {_IDEM_COLS} FROM idempotency WHERE tenant = ? AND client_id = ? AND key = ?", key
            ).fetchone()
            if row is not None and _live(row, record, ms(now), take_over):
                return _idem_of(row)
            conn.execute(
                f"INSERT OR REPLACE INTO idempotency ({_IDEM_COLS}) VALUES ({', '.join('?' * 15)})",
                (
                    record.tenant,
                    record.client_id,
                    record.verb,
                    record.key,
                    record.request_hash,
                    None if record.result is None else json.dumps(record.result),
                    ms(record.created_at),
                    ms(record.expires_at),
                    ms_opt(record.lease_until),
                    record.claim_id,
                    record.client_request_id,
                    record.state,
                    ms_opt(record.updated_at or record.created_at),
                    record.holder,
                    None if record.outcome is None else json.dumps(record.outcome),
                ),
            )
            return None

        return self.db.write(run)

    def complete(
        self,
        tenant: str,
        client_id: str,
        verb: str,
        key: str,
        result: dict,
        *,
        outcome: dict[str, Any] | None = None,
        at: datetime | None = None,
    ) -> None:
        payload = json.dumps(result, default=str, ensure_ascii=False)
        self.db.run(
            "UPDATE idempotency SET result = ?, state = 'committed', outcome = ?, updated_at = COALESCE(?, updated_at) "
            "WHERE tenant = ? AND client_id = ? AND key = ?",
            (payload, None if outcome is None else json.dumps(outcome), ms_opt(at), tenant, client_id, key),
        )

    def release(self, tenant: str, client_id: str, verb: str, key: str, claim_id: str | None = None) -> None:
        mine = "" if claim_id is None else " AND claim_id = ?"
        self.db.run(
            f"DELETE FROM idempotency WHERE tenant = ? AND client_id = ? AND key = ? AND result IS NULL{mine}",
            (tenant, client_id, key, *(() if claim_id is None else (claim_id,))),
        )

    def get(self, tenant: str, client_id: str, key: str, *, now: datetime) -> IdempotencyRecord | None:
        row = self.db.one(
            f"SELECT {_IDEM_COLS} FROM idempotency WHERE tenant = ? AND client_id = ? AND key = ? AND expires_at > ?",
            (tenant, client_id, key, ms(now)),
        )
        return None if row is None else _idem_of(row)

    def recent(
        self,
        tenant: str,
        client_id: str,
        *,
        now: datetime,
        limit: int,
        state: str | None = None,
        before: tuple[datetime, str] | None = None,
    ) -> list[IdempotencyRecord]:
        sql = f"SELECT {_IDEM_COLS} FROM idempotency WHERE tenant = ? AND client_id = ? AND expires_at > ?"
        args: list[Any] = [tenant, client_id, ms(now)]
        if state is not None:
            sql += " AND state = ?"
            args.append(state)
        if before is not None:
            sql += " AND (created_at < ? OR (created_at = ? AND key < ?))"
            args += [ms(before[0]), ms(before[0]), before[1]]
        sql += " ORDER BY created_at DESC, key DESC LIMIT ?"
        return [_idem_of(r) for r in self.db.all(sql, (*args, limit))]

    def cancel(self, tenant: str, client_id: str, key: str, *, at: datetime) -> None:
        self.db.run(
            "UPDATE idempotency SET state = 'cancelled', updated_at = ? "
            "WHERE tenant = ? AND client_id = ? AND key = ? AND result IS NULL AND state = 'running'",
            (ms(at), tenant, client_id, key),
        )
