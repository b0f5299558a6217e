"""Deleting a tenant from the local store (`fleetmem tenant delete`): every table that holds any of
its rows, in one write transaction, so a crash leaves either all of it or none of it.

`TENANT_TABLES` names each table with the condition that selects the tenant's rows; a test walks
the schema so a table added later without an entry here fails it.
"""

from __future__ import annotations

import sqlite3

from fleetmem.adapters.local.sqlite.db import Database, tenant_key

#: (table, WHERE clause with one parameter, which parameter: "tenant" or its FTS "key"). Search
#: docs go first: their delete triggers remove the keyword index rows and leave vector-cache
#: tombstones (docs_gone), which are deleted after them.
TENANT_TABLES: tuple[tuple[str, str, str], ...] = (
    ("docs", "tenant = ?", "tenant"),
    ("docs_gone", "tenant = ?", "tenant"),
    ("search_gen", "tenant = ?", "tenant"),
    ("facts", "tenant = ?", "tenant"),
    ("fact_seq", "tenant = ?", "tenant"),
    ("withdrawn_claims", "tenant = ?", "tenant"),
    ("pages", "tenant = ?", "tenant"),
    ("aliases", "tenant = ?", "tenant"),
    ("link_groups", "tenant = ?", "tenant"),  # before links: their delete trigger then finds nothing to count down
    ("links", "tenant = ?", "tenant"),
    ("timeline", "tenant = ?", "tenant"),
    ("page_names_fts", "tenant_key = ?", "key"),
    ("page_tombstones", "tenant = ?", "tenant"),
    ("change_seq", "tenant = ?", "tenant"),
    ("cursors", "tenant = ?", "tenant"),
    ("idempotency", "tenant = ?", "tenant"),
    ("audit", "tenant = ?", "tenant"),
    ("clients", "tenant = ?", "tenant"),
)
#: Tables that hold no tenant rows of their own: the schema's, and the keyword index, whose rows
#: go with their docs (the docs delete trigger).
NOT_PER_TENANT = frozenset({"meta", "sqlite_sequence", "docs_fts"})


def _arg(tenant: str, which: str) -> str:
    return tenant_key(tenant) if which == "key" else tenant


def count_tenant(db: Database, tenant: str) -> dict[str, int]:
    """Rows the tenant holds, per table."""

    def run(conn: sqlite3.Connection) -> dict[str, int]:
        return {
            table: int(
                conn.execute(f"SELECT count(*) FROM {table} WHERE {where}", (_arg(tenant, which),)).fetchone()[0]
            )
            for table, where, which in TENANT_TABLES
        }

    return db.read(run)


def delete_tenant(db: Database, tenant: str) -> dict[str, int]:
    """Delete every row of the tenant, in one transaction; returns the rows deleted per table."""

    def run(conn: sqlite3.Connection) -> dict[str, int]:
        return {
            table: conn.execute(f"DELETE FROM {table} WHERE {where}", (_arg(tenant, which),)).rowcount
            for table, where, which in TENANT_TABLES
        }

    return db.write(run)
