"""Per-entity write gate: one `remember` at a time per (tenant, entity) in this process.

`remember` reads an entity's active facts, decides (duplicate / supersede / insert) and writes.
Two concurrent calls on one entity could both decide against the same old state: both insert
(two active facts for one attribute) or both supersede the same fact (one loses with Conflict).
Holding the gate from the decision to the write serialises them, so each decides against the
state the previous one left. The embedding is computed before the gate is taken.

The gate is striped (a fixed set of locks chosen by a hash of the key), so memory stays bounded;
two entities sharing a stripe only wait for each other. Each stripe counts the writes it let
through: a caller that read the facts before taking the gate re-reads them only when a write
went through the stripe meanwhile.

The gate only spares this process's writers a lost race; it is not what makes the decision safe.
Across processes (several Lambda instances, or a CLI next to a server on one data directory) the
store does (docs/protocol.md D20, `FactStore.put_decided`): SQLite decides inside its write lock,
DynamoDB makes the write conditional on the pool it was decided on, and `remember` decides again
when another process won.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from hashlib import blake2b

STRIPES = 256


class WriteGate:
    def __init__(self, stripes: int = STRIPES) -> None:
        self._locks = [threading.Lock() for _ in range(stripes)]
        self._passed = [0] * stripes

    def _stripe(self, tenant: str, key: str | None) -> int:
        digest = blake2b(f"{tenant}\x00{key or ''}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") % len(self._locks)

    def version(self, tenant: str, key: str | None) -> int:
        """How many writes went through the key's stripe so far (read before reading state)."""
        return self._passed[self._stripe(tenant, key)]

    @contextmanager
    def hold(self, tenant: str, key: str | None) -> Iterator[int]:
        """Hold the key's stripe; yields the stripe's version on entry (see `version`)."""
        i = self._stripe(tenant, key)
        with self._locks[i]:
            try:
                yield self._passed[i]
            finally:
                self._passed[i] += 1


#: the process's gate for fact writes, keyed by (tenant, entity slug or None)
FACT_WRITES = WriteGate()
