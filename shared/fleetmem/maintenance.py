"""Local maintenance: (re-)embed the search index and facts for the configured embedding model.

Vectors carry the id of the model that produced them and are never compared across models, so
switching models (or installing the model after data was written keyword-only) leaves items
unembedded until `fleetmem reindex` runs. Each batch is committed on its own: an interrupted
reindex resumes where it stopped, because the next run only selects what still lacks a vector.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from fleetmem.memory.vectors import pack
from fleetmem.ports import Embedder, VectorMaintenance

#: progress=True: a text bar on stderr; a stream: the bar on that stream; a callable: (done, total).
ProgressArg = bool | TextIO | Callable[[int, int], Any] | None


class ReindexStalled(RuntimeError):
    """A batch was embedded but none of its rows could be updated (would loop forever)."""


def unembedded(stores: VectorMaintenance, embedder: Embedder) -> dict[str, Any]:
    """How many search docs and facts lack a vector of the embedder's model."""
    counts = stores.unembedded(embedder.model_id)
    return {
        "model_id": embedder.model_id,
        "docs": counts["docs"],
        "facts": counts["facts"],
        "total": counts["docs"] + counts["facts"],
    }


def reindex(
    stores: VectorMaintenance,
    embedder: Embedder,
    *,
    progress: ProgressArg = True,
    batch: int = 64,
) -> dict[str, Any]:
    """Embed every search doc and fact lacking a vector of `embedder.model_id`, batch by batch.

    Returns {"model_id", "docs", "facts" (how many were embedded now), "remaining", "seconds"}.
    Embedder failures (`fleetmem.errors.Unavailable`) propagate; batches already written stay.
    """
    model_id = embedder.model_id
    batch = max(1, int(batch))
    todo = stores.unembedded(model_id)
    total = todo["docs"] + todo["facts"]
    report = _progress_reporter(progress, total)
    started = time.monotonic()
    done = {"docs": 0, "facts": 0}
    try:
        report(0)
        # Search docs and facts are re-embedded the same way; only how each is read and written differs.
        passes: tuple[tuple[str, Any, Any, Any], ...] = (
            ("docs", stores.docs_without_vector, lambda d: d.doc_id, stores.set_doc_vectors),
            ("facts", stores.facts_without_vector, lambda f: f.fact_id, stores.set_fact_vectors),
        )
        for kind, pending, id_of, store in passes:
            while True:
                items = pending(model_id, batch)
                if not items:
                    break
                vectors = _embed(embedder, [item.text for item in items])
                rows = [(item.tenant, id_of(item), v) for item, v in zip(items, vectors, strict=True)]
                if store(model_id, rows) == 0:
                    raise ReindexStalled(f"{kind} could not be updated")
                done[kind] += len(items)
                report(done["docs"] + done["facts"])
    finally:
        report(None)
    left = stores.unembedded(model_id)
    return {
        "model_id": model_id,
        "docs": done["docs"],
        "facts": done["facts"],
        "remaining": left["docs"] + left["facts"],
        "seconds": round(time.monotonic() - started, 3),
    }


def _embed(embedder: Embedder, texts: list[str]) -> list[bytes]:
    vectors = embedder.embed(texts)
    if len(vectors) != len(texts) or any(len(v) != embedder.dim for v in vectors):
        raise ValueError(f"embedder {embedder.model_id} returned vectors of the wrong shape")
    return [pack(v) for v in vectors]


def _progress_reporter(progress: ProgressArg, total: int) -> Callable[[int | None], None]:
    """A function called with the done count, and with None once at the end."""
    if not progress:
        return lambda _done: None
    if callable(progress) and not hasattr(progress, "write"):
        fn = progress

        def call(done: int | None) -> None:
            if done is not None:
                fn(done, total)

        return call
    stream: TextIO = sys.stderr if progress is True else progress  # type: ignore[assignment]
    return _TextBar(stream, total).update


class _TextBar:
    """`[#########.........]  450/1000 items  45%` redrawn in place; one final newline."""

    WIDTH = 30

    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream = stream
        self.total = total
        self.drawn = False

    def update(self, done: int | None) -> None:
        if done is None:
            if self.drawn:
                self.stream.write("\n")
                self.stream.flush()
            return
        total = max(self.total, done, 1)
        filled = int(self.WIDTH * done / total)
        pct = 100 if self.total == 0 else int(100 * done / total)
        self.stream.write(
            f"\rreindex [{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{self.total} items {pct:3d}%"
        )
        self.stream.flush()
        self.drawn = True
