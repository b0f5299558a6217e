"""Re-embedding queries over the local store (`fleetmem.ports.VectorMaintenance`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from fleetmem.adapters.local.sqlite.db import Database
from fleetmem.adapters.local.sqlite.fact_table import _FACT_COLS, _fact_of
from fleetmem.adapters.local.sqlite.search_rows import _DOC_COLS, _bump_gen, _doc_of
from fleetmem.models import Fact, SearchDoc

#: a row lacking a vector of the model bound to `?`
_LACKS = "(vector IS NULL OR vector_model IS NOT ?)"


class SqliteVectorMaintenance:
    """The docs and facts lacking a model's vectors (all tenants), and attaching new vectors."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def unembedded(self, model_id: str) -> dict[str, int]:
        """How many search docs and facts lack a vector of `model_id` (all tenants)."""

        def run(conn: sqlite3.Connection) -> dict[str, int]:
            return {
                table: int(conn.execute(f"SELECT count(*) FROM {table} WHERE {_LACKS}", (model_id,)).fetchone()[0])
                for table in ("docs", "facts")
            }

        return self.db.read(run)

    def docs_without_vector(self, model_id: str, limit: int) -> list[SearchDoc]:
        """Docs (any tenant) lacking a `model_id` vector, oldest row first; returned without vectors."""
        return [_doc_of(r, with_vector=False) for r in self._lacking("docs", _DOC_COLS, "id", model_id, limit)]

    def facts_without_vector(self, model_id: str, limit: int) -> list[Fact]:
        return [_fact_of(r) for r in self._lacking("facts", _FACT_COLS, "rowid", model_id, limit)]

    def _lacking(self, table: str, cols: str, order: str, model_id: str, limit: int) -> list[Any]:
        return self.db.all(
            f"SELECT {cols} FROM {table} WHERE {_LACKS} ORDER BY {order} LIMIT ?", (model_id, max(0, int(limit)))
        )

    def set_doc_vectors(self, model_id: str, items: Sequence[tuple[str, str, bytes]]) -> int:
        """Attach `model_id` vectors to docs; returns how many docs were updated."""
        if not items:
            return 0

        def run(conn: sqlite3.Connection) -> int:
            gens = {t: _bump_gen(conn, t) for t in {i[0] for i in items}}
            n = 0
            for tenant, doc_id, vec in items:
                n += conn.execute(
                    "UPDATE docs SET vector = ?, vector_model = ?, rev = ? WHERE tenant = ? AND doc_id = ?",
                    (vec, model_id, gens[tenant], tenant, doc_id),
                ).rowcount
            return n

        return self.db.write(run)

    def set_fact_vectors(self, model_id: str, items: Sequence[tuple[str, str, bytes]]) -> int:
        if not items:
            return 0

        def run(conn: sqlite3.Connection) -> int:
            n = 0
            for tenant, fact_id, vec in items:
                n += conn.execute(
                    "UPDATE facts SET vector = ?, vector_model = ? WHERE tenant = ? AND fact_id = ?",
                    (vec, model_id, tenant, fact_id),
                ).rowcount
            return n

        return self.db.write(run)
