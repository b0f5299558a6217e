"""Conversational-memory retrieval quality: `scripts/bench quality --set conversations`.

The set is `tests/data/conversations.json` (made by `tests/data/make_conversations.py`; format and
question kinds in tests/data/README.md). Every conversation gets its own tenant and is ingested
twice through the real `dispatch`, with the clock set to each session's date:
- as pages — `put_page` of one page per turn (`turns/<turn id>`), title "<speaker>, <date>", body
  "<speaker> (<date>): <turn text>";
- as facts — `remember` of "<date>: <turn text>" with entity = the speaker (dedup applies: a turn
  that restates an earlier one of the same speaker maps to that fact).

Every question is then asked of both forms under four rankings of the same two arms (one
`SearchIndex.search` call per form, k=30 as recall uses at limit 10, fused four ways): keyword-only, vector-only, plain
RRF (k=60) and the shipped ranking (`fleetmem.memory.ranking.shipped`, what recall uses). Pages are
ranked best chunk per page (as recall shows them), facts by their fact doc.

Every conversation is in one split (`split`: "tuning" or "held-out"); the tables show each kind
once per split, side by side, and the result holds `splits` (per split) next to `results` (all).
Metrics per question kind and overall: any@5 (an evidence turn in the top 5), all@5 (every evidence
turn in the top 5), any@10, MRR (first evidence turn, cut at 10).

`run_conversations(model_dir, open_stores=...)` takes the adapter set as a parameter: a callable
(temporary directory) -> stores; the default is the local SQLite set (`open_local`).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from fleetmem.memory.ranking import RANKINGS

K = 30
FORMS = ("pages", "facts")
KINDS = ("single-hop", "multi-hop", "multi-entity", "aggregate", "temporal", "paraphrase", "adversarial", "all")
#: Every conversation is in one split (its "split" field): rankings are tuned on "tuning" only.
SPLITS = ("tuning", "held-out")
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


#: `scripts/bench quality --set NAME`: the conversational sets, by name (tests/data/README.md).
SETS = {"conversations": "conversations.json", "long-conversations": "long_conversations.json"}


def default_set_path(name: str = "conversations") -> Path:
    return Path(__file__).resolve().parents[3] / "tests" / "data" / SETS[name]


def human(iso_date: str) -> str:
    d = date.fromisoformat(iso_date)
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}"


def load_set(path: Path | None = None) -> dict[str, Any]:
    return json.loads((path or default_set_path()).read_text(encoding="utf-8"))


def _sqlite(tmp: Path) -> Any:
    from fleetmem.wiring import open_local

    return open_local(tmp)


class OnceSearch:
    """A SearchIndex that answers a repeated search from its last result: the rankings of one
    question and form fuse the same arms, so the index is asked once, not once per ranking."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self.write_through = getattr(index, "write_through", False)
        self._last: tuple[Any, Any] | None = None

    def search(self, query: Any) -> Any:
        return self.search_many([query])[0]

    def search_many(self, queries: Any) -> Any:
        asked = list(queries)
        if self._last is not None and self._last[0][: len(asked)] == asked:
            return self._last[1][: len(asked)]  # the whole query alone, after its parts and topic
        self._last = (asked, self.index.search_many(asked))
        return self._last[1]


def ingest(stores: Any, embedder: Any, conv: dict[str, Any]) -> tuple[dict[str, str], dict[str, set[str]]]:
    """Store one conversation as pages and facts; returns (page slug -> turn id, fact id -> turn ids)."""
    from fleetmem.models import Caller
    from fleetmem.ports import Deps
    from fleetmem.transport.dispatch import dispatch
    from fleetmem.wiring import FixedClock, SortableIds

    caller = Caller(tenant=conv["id"], client_id="bench", scopes=frozenset({"read", "write"}), remote=True)
    ids = SortableIds()
    slugs: dict[str, str] = {}
    facts: dict[str, set[str]] = {}
    for turn in conv["turns"]:
        when = datetime.fromisoformat(turn["date"]).replace(hour=20, tzinfo=UTC)
        deps = Deps.over(stores, clock=FixedClock(when), ids=ids, embedder=embedder, llm=None)
        day = human(turn["date"])
        slug = f"turns/{turn['id']}"
        content = f"---\ntitle: {turn['speaker']}, {day}\ntype: note\n---\n{turn['speaker']} ({day}): {turn['text']}\n"
        res = dispatch("put_page", {"slug": slug, "content": content}, caller, deps)
        if res.is_error:
            raise RuntimeError(f"put_page failed: {res.body.get('code')}")
        slugs[slug] = turn["id"]
        res = dispatch(
            "remember",
            {"fact": f"{day}: {turn['text']}", "entity": turn["speaker"], "provenance": "conversation"},
            caller,
            deps,
        )
        if res.is_error:
            raise RuntimeError(f"remember failed: {res.body.get('code')}")
        facts.setdefault(res.body["id"], set()).add(turn["id"])
    return slugs, facts


def _score(ranked: list[set[str]], evidence: Iterable[str]) -> dict[str, float]:
    wanted = set(evidence)

    def covered(k: int) -> set[str]:
        return set().union(*ranked[:k]) & wanted if ranked[:k] else set()

    first = next((i for i, turns in enumerate(ranked[:10], start=1) if turns & wanted), None)
    return {
        "any@5": float(bool(covered(5))),
        "all@5": float(covered(5) == wanted),
        "any@10": float(bool(covered(10))),
        "mrr": 1.0 / first if first else 0.0,
    }


def evaluate(
    deps: Any, tenant: str, question: str, slugs: dict[str, str], facts: dict[str, set[str]], evidence: list[str]
) -> dict[tuple[str, str], dict[str, float]]:
    """Scores of one question per (form, ranking); each form costs one embedding and one search."""
    from fleetmem.memory import search as search_arm

    embedded = search_arm.query_vector(deps, question, tenant=tenant)
    out = {}
    for form in FORMS:
        kinds = ("chunk",) if form == "pages" else ("fact",)
        for ranking in RANKINGS:
            found = search_arm.hybrid_search(
                deps, tenant, question, kinds=kinds, k=K, embedded=embedded, ranking=ranking
            )
            if found.degraded:
                raise RuntimeError(f"search degraded: {found.degraded}")
            if form == "pages":
                ranked = [{slugs[f.hit.slug]} for f in search_arm.best_per_page(found.hits) if f.hit.slug in slugs]
            else:
                ranked = [facts.get(f.hit.fact_id or "", set()) for f in found.hits]
            out[(form, ranking)] = _score(ranked, evidence)
    return out


def run_conversations(
    model_dir: Path | str,
    *,
    open_stores: Callable[[Path], Any] = _sqlite,
    data_path: Path | None = None,
    conversations: Iterable[str] | None = None,
    out: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """Ingest the set, score every question under every ranking and form, print the tables."""
    from fleetmem.ports import Deps
    from fleetmem.wiring import FixedClock, SortableIds, load_local_embedder

    embedder, problem = load_local_embedder(model_dir)
    if embedder is None:
        raise RuntimeError(problem or "the local embedder is unavailable")
    data = load_set(data_path)
    wanted = set(conversations) if conversations is not None else None
    started = time.monotonic()
    sums: dict[tuple[str, str, str, str], dict[str, float]] = {}
    counts: dict[tuple[str, str], int] = {}
    with tempfile.TemporaryDirectory(prefix="fleetmem-conversations-") as tmp:
        stores = open_stores(Path(tmp))
        try:
            deps = Deps.over(
                stores,
                clock=FixedClock(datetime(2026, 12, 31, tzinfo=UTC)),
                ids=SortableIds(),
                embedder=embedder,
                llm=None,
                search=OnceSearch(stores.search),
            )
            for conv in data["conversations"]:
                if wanted is not None and conv["id"] not in wanted:
                    continue
                slugs, facts = ingest(stores, embedder, conv)
                for q in data["questions"]:
                    if q["conversation"] != conv["id"]:
                        continue
                    cells = [(split, kind) for split in (conv["split"], "all") for kind in (q["kind"], "all")]
                    for cell in cells:
                        counts[cell] = counts.get(cell, 0) + 1
                    for (form, ranking), scores in evaluate(
                        deps, conv["id"], q["question"], slugs, facts, q["evidence"]
                    ).items():
                        for split, kind in cells:
                            acc = sums.setdefault((split, form, ranking, kind), {})
                            for m, v in scores.items():
                                acc[m] = acc.get(m, 0.0) + v
        finally:
            close = getattr(stores, "close", None)
            if close:
                close()
    by_split = {split: _means(sums, counts, split) for split in (*SPLITS, "all")}
    splits = {split: by_split[split] for split in SPLITS if (split, "all") in counts}
    table = conversations_table(splits)
    out(table)
    return {
        "results": by_split["all"],
        "splits": splits,
        "table": table,
        "questions": counts.get(("all", "all"), 0),
        "seconds": round(time.monotonic() - started, 1),
    }


def _means(
    sums: dict[tuple[str, str, str, str], dict[str, float]], counts: dict[tuple[str, str], int], split: str
) -> dict[str, Any]:
    """{form: {ranking: {kind: {metric: mean, "n": questions}}}} of one split ("all": every conversation)."""
    return {
        form: {
            ranking: {
                kind: {**{m: v / counts[(split, kind)] for m, v in acc.items()}, "n": counts[(split, kind)]}
                for kind in KINDS
                if (acc := sums.get((split, form, ranking, kind))) is not None
            }
            for ranking in RANKINGS
        }
        for form in FORMS
    }


def conversations_table(splits: dict[str, dict[str, Any]]) -> str:
    """One table per form: a row per kind and split (tuning and held-out side by side)."""
    lines = []
    for form in FORMS:
        lines += [
            f"\n{form}: any@5 / all@5 / any@10 / MRR",
            "",
            "| kind | split | n | " + " | ".join(RANKINGS) + " |",
            "| --- | --- | ---: |" + " --- |" * len(RANKINGS),
        ]
        for kind in KINDS:
            for split, results in splits.items():
                cells = [results[form][r].get(kind) for r in RANKINGS]
                if cells[0] is None:
                    continue
                shown = [f"{s['any@5']:.2f} / {s['all@5']:.2f} / {s['any@10']:.2f} / {s['mrr']:.3f}" for s in cells]
                lines.append(f"| {kind} | {split} | {cells[0]['n']} | " + " | ".join(shown) + " |")
    return "\n".join(lines).lstrip()
