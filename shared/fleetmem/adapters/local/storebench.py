"""Timing of the local store at scale.

    python -m fleetmem.adapters.local.storebench [--pages N] [--chunks-per-page N] [--runs N]
        [--data-dir DIR]


Seeds a throwaway data dir with synthetic pages (one tenant) and search docs with random unit
vectors, then reports p50/p95 of entity lookup and of the search arms. Not a test: numbers vary
by machine; `scripts/bench` is the place to run it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np

from fleetmem.adapters.local import open_local
from fleetmem.models import Page, SearchDoc, SearchQuery

_WORDS = (
    "alpha beta gamma delta orbit river stone cloud pixel harbor meadow copper falcon lantern quartz "
    "summit timber velvet willow ember glacier hollow island jasper kettle lotus marble nectar onyx "
    "prairie quiver raven saffron tundra umber vortex walnut yonder zephyr acme project meeting launch "
    "budget review design customer contract roadmap deadline release feedback"
).split()
T0 = datetime(2026, 6, 1, tzinfo=UTC)
DIM = 384
MODEL = "bench-384"


_SYLLABLES = "ka lo mi nu pe ra si tu ve zo ba de fi go hu".split()
#: a 20,000-word synthetic vocabulary drawn with Zipf frequencies, like real prose
_VOCAB = [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES]
_VOCAB = (_WORDS + [w + s for s in ("", "n", "s", "r", "l", "t") for w in _VOCAB])[:20_000]
_ZIPF = [1.0 / (rank + 1) for rank in range(len(_VOCAB))]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(_VOCAB, weights=_ZIPF, k=n))


def _query(rng: random.Random) -> str:
    """A short query of mid-frequency words (what a recall question looks like after stopwords)."""
    return " ".join(rng.choice(_VOCAB[50:5000]) for _ in range(3))


def _unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _timed(fn: Callable[[], object], runs: int) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 3),
        "p95_ms": round(samples[int(len(samples) * 0.95) - 1], 3),
    }


def seed(
    stores, *, tenant: str, pages: int, chunks_per_page: int, seed: int = 7, model: str = MODEL, dim: int = DIM
) -> None:
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    batch: list[SearchDoc] = []
    for i in range(pages):
        slug = f"{rng.choice(['people', 'companies', 'projects'])}/{rng.choice(_WORDS)}-{i}"
        title = f"{rng.choice(_WORDS).title()} {rng.choice(_WORDS).title()} {i}"
        when = T0 + timedelta(seconds=i)
        stores.pages.put(
            Page(
                tenant=tenant,
                slug=slug,
                title=title,
                aliases=(f"alias {i}",),
                body=_text(rng, 80),
                created_at=when,
                updated_at=when,
            )
        )
        vecs = _unit(nrng, chunks_per_page, dim)
        for c in range(chunks_per_page):
            batch.append(
                SearchDoc(
                    tenant=tenant,
                    doc_id=f"chunk:{slug}#{c}",
                    kind="chunk",
                    slug=slug,
                    title=title,
                    text=f"{title}\n{_text(rng, 60)}",
                    updated_at=when,
                    vector=vecs[c].astype("<f4").tobytes(),
                    vector_model=model,
                )
            )
        if len(batch) >= 2000:
            stores.search.upsert(batch)
            batch = []
    if batch:
        stores.search.upsert(batch)


def measure(stores, *, pages: int, runs: int) -> dict[str, object]:
    out: dict[str, object] = {}
    rng = random.Random(1)
    nrng = np.random.default_rng(1)

    def qv() -> bytes:
        return _unit(nrng, 1)[0].astype("<f4").tobytes()

    stores.search.drop_cache()
    t = time.perf_counter()
    stores.search.search(SearchQuery(tenant="bench", text="", vector=qv(), vector_model=MODEL))
    out["vector_first_query_ms (matrix load)"] = round((time.perf_counter() - t) * 1000, 1)
    out["lookup"] = _timed(
        lambda: stores.pages.lookup(
            "bench",
            aliases=[f"alias {rng.randrange(max(1, pages))}"],
            titles=["orbit river 12"],
            slugs=["people/orbit-12"],
            suffix=f"{rng.choice(_WORDS)}-{rng.randrange(max(1, pages))}",
            world_only=True,
        ),
        runs,
    )
    out["keyword_search"] = _timed(
        lambda: stores.search.search(SearchQuery(tenant="bench", text=_query(rng), k=50)), runs
    )
    out["keyword_search_common_words"] = _timed(
        lambda: stores.search.search(
            SearchQuery(tenant="bench", text=" ".join(rng.choice(_VOCAB[:20]) for _ in range(3)), k=50)
        ),
        runs,
    )
    out["vector_search"] = _timed(
        lambda: stores.search.search(SearchQuery(tenant="bench", text="", vector=qv(), vector_model=MODEL)),
        runs,
    )

    def hybrid() -> SearchQuery:
        """A query with both arms, as recall sends."""
        return SearchQuery(tenant="bench", text=_query(rng), kinds=("chunk", "fact"), vector=qv(), vector_model=MODEL)

    out["hybrid_search (both arms, as recall)"] = _timed(lambda: stores.search.search(hybrid()), runs)
    counter = iter(range(10**9))

    def write_then_search() -> None:
        i = next(counter)
        stores.search.upsert(
            [
                SearchDoc(
                    tenant="bench",
                    doc_id=f"fact:bench-{i}",
                    kind="fact",
                    slug="",
                    title="",
                    text="new fact " + _query(rng),
                    updated_at=T0,
                    fact_id=f"bench-{i}",
                    vector=qv(),
                    vector_model=MODEL,
                )
            ]
        )
        stores.search.search(hybrid())

    out["upsert_then_hybrid_search"] = _timed(write_then_search, max(10, runs // 4))
    return out


def run(pages: int, chunks_per_page: int, runs: int, data_dir: str | None = None) -> dict[str, object]:
    """Seed (unless `data_dir` already holds a seeded store) and measure."""
    out: dict[str, object] = {"pages": pages, "chunks": pages * chunks_per_page}
    with tempfile.TemporaryDirectory() as tmp:
        stores = open_local(data_dir or tmp)
        if not stores.page_listing.list("bench", world_only=False, limit=1):
            t = time.perf_counter()
            seed(stores, tenant="bench", pages=pages, chunks_per_page=chunks_per_page)
            # a second tenant shows that queries stay within their own tenant's rows
            seed(stores, tenant="other", pages=min(pages, 2000), chunks_per_page=chunks_per_page, seed=8)
            out["seed_s"] = round(time.perf_counter() - t, 2)
        out.update(measure(stores, pages=pages, runs=runs))
        stores.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--pages", type=int, default=20_000)
    ap.add_argument("--chunks-per-page", type=int, default=1)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--data-dir", help="reuse (or create and keep) a seeded store here")
    args = ap.parse_args()
    print(json.dumps(run(args.pages, args.chunks_per_page, args.runs, args.data_dir), indent=2))


if __name__ == "__main__":
    main()
