"""The fact store: writes, reads by id, the sequence, and the whole-tenant reads of memory packs.
The other fact roles are `fact_decisions`, `fact_feed` and `fact_listing` (`fact_table.SqliteFactTable`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Unpack

from fleetmem.adapters.local.sqlite.audit import _insert_audit
from fleetmem.adapters.local.sqlite.db import _batch_get, _increment, _next_change, dt_of, ms
from fleetmem.adapters.local.sqlite.fact_table import (
    _FACT_COLS,
    SqliteFactTable,
    _check_tenant,
    _fact_of,
    _insert,
    _pool_ids,
)
from fleetmem.errors import Conflict, NotFound
from fleetmem.models import Fact
from fleetmem.ports.facts import Expiry, ExpiryOptions, FactPut, FactPutOptions, Withdrawal


class SqliteFactStore(SqliteFactTable):
    def next_seq(self, tenant: str) -> int:
        return self.db.write(lambda c: _increment(c, "fact_seq", "seq", {"tenant": tenant}))

    def put(self, fact: Fact, **opts: Unpack[FactPutOptions]) -> None:
        q = FactPut.of(opts)
        supersede, audit, decided = q.supersede, q.audit, q.decided
        _check_tenant(fact, supersede)

        def run(conn: sqlite3.Connection) -> None:
            if decided is not None:
                # the token is what the decision depended on: the ids of the pool's active facts
                tenant, entity_slug, at, limit, ids = decided.token
                if tenant != fact.tenant or entity_slug != fact.entity_slug:
                    raise Conflict("the decision pool belongs to another entity")
                if _pool_ids(conn, tenant, entity_slug, at, limit) != ids:
                    raise Conflict("the entity's facts changed since the decision")
            _insert(conn, fact, supersede, audit)

        self.db.write(run)

    def get(self, tenant: str, fact_id: str) -> Fact | None:
        row = self.db.one(f"SELECT {_FACT_COLS} FROM facts WHERE tenant = ? AND fact_id = ?", (tenant, fact_id))
        return None if row is None else _fact_of(row)

    def many(self, tenant: str, fact_ids: Sequence[str]) -> list[Fact]:
        found = _batch_get(self.db, f"SELECT {_FACT_COLS} FROM facts", "fact_id", tenant, fact_ids, _fact_of, key=1)
        return [found[i] for i in fact_ids if i in found]

    def expire(self, tenant: str, fact_id: str, **opts: Unpack[ExpiryOptions]) -> bool:
        """A fact already past its `valid_until` at `at` is not active: False, left untouched."""
        q = Expiry.of(opts)

        def run(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT expired_at, superseded_by, valid_until FROM facts WHERE tenant = ? AND fact_id = ?",
                (tenant, fact_id),
            ).fetchone()
            if row is None:
                raise NotFound("no such fact")
            when = ms(q.at)
            if row[0] is not None or row[1] is not None or (row[2] is not None and row[2] <= when):
                return False
            conn.execute(
                "UPDATE facts SET expired_at = ?, expired_reason = ?, expired_by = ?, change_seq = ? "
                "WHERE tenant = ? AND fact_id = ?",
                (when, q.reason, q.actor, _next_change(conn, tenant, "fact"), tenant, fact_id),
            )
            if q.audit is not None:
                _insert_audit(conn, q.audit)
            if q.withdraw is not None:
                w = q.withdraw
                conn.execute(
                    "INSERT OR REPLACE INTO withdrawn_claims "
                    "(tenant, claim, scope, visibility, fact_id, client_id, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (tenant, w.claim, w.entity_slug or "", w.visibility, w.fact_id, w.client_id, ms(w.at)),
                )
            return True

        return self.db.write(run)

    def withdrawals(self, tenant: str, claim: str, *, entity_slug: str | None, visibility: str) -> list[Withdrawal]:
        scopes = ["", *([entity_slug] if entity_slug else [])]
        rows = self.db.all(
            f"SELECT scope, fact_id, client_id, at FROM withdrawn_claims WHERE tenant = ? AND claim = ? "
            f"AND visibility = ? AND scope IN ({', '.join('?' for _ in scopes)}) ORDER BY at DESC",
            (tenant, claim, visibility, *scopes),
        )
        return [Withdrawal(claim, r[0] or None, visibility, r[1], r[2], dt_of(r[3])) for r in rows]

    def reinstate(self, tenant: str, withdrawals: Sequence[Withdrawal]) -> None:
        def run(conn: sqlite3.Connection) -> None:
            for w in withdrawals:
                conn.execute(
                    "DELETE FROM withdrawn_claims WHERE tenant = ? AND claim = ? AND scope = ? AND visibility = ?",
                    (tenant, w.claim, w.entity_slug or "", w.visibility),
                )

        self.db.write(run)

    def purge(self, tenant: str, fact_id: str) -> bool:
        return self.db.write(
            lambda c: c.execute("DELETE FROM facts WHERE tenant = ? AND fact_id = ?", (tenant, fact_id)).rowcount > 0
        )

    # --------------------------------------------------------------- memory packs (fleetmem.pack)

    def scan(self, tenant: str, *, after: str | None, limit: int) -> tuple[list[Fact], str | None]:
        """Every fact of the tenant in any state, by (created_at, seq, fact_id) ascending, from the
        opaque position `after` (None: the start); the position to continue from, None at the end."""
        created, seq, fact_id = (-1, -1, "") if after is None else _scan_position(after)
        sql = (
            f"SELECT {_FACT_COLS} FROM facts WHERE tenant = ? AND (created_at, seq, fact_id) > (?, ?, ?) "
            "ORDER BY created_at, seq, fact_id LIMIT ?"
        )
        n = max(1, int(limit))
        rows = self.db.all(sql, (tenant, created, seq, fact_id, n))
        facts = [_fact_of(r) for r in rows]
        if len(facts) < n:
            return facts, None
        last = facts[-1]
        return facts, f"{ms(last.created_at)}:{last.seq}:{last.fact_id}"

    def raise_seq(self, tenant: str, at_least: int) -> None:
        """Make the tenant's fact sequence continue above `at_least` (facts stored with their own seq)."""
        self.db.write(
            lambda c: c.execute(
                "INSERT INTO fact_seq (tenant, seq) VALUES (?, ?) "
                "ON CONFLICT (tenant) DO UPDATE SET seq = max(seq, excluded.seq)",
                (tenant, int(at_least)),
            )
        )


def _scan_position(after: str) -> tuple[int, int, str]:
    created, seq, fact_id = after.split(":", 2)
    return int(created), int(seq), fact_id
