"""`scripts/bench updates`: how often `remember` notices a change of value, on labelled fact pairs.

Every pair of `tests/data/fact_pairs.json` (the set the rule is tuned on) and
`tests/data/fact_pairs_heldout.json` (written before the `probable_update` rule and never used to
tune it) goes through the real `remember` verb (one `dispatch` per fact) on SQLite with the real
all-MiniLM-L6-v2 model: the first fact is saved, then the second, on an entity of its own. The
second answer is the decision: its `status` and whether it carries a `probable_update` notice
naming the first fact.

Per set: update recall (an `update` pair `superseded`, or `inserted` with a `probable_update`
notice), of which superseded and noticed; distinct merged (a `distinct` pair `superseded` or
`duplicate`: must stay 0) and distinct noticed (a `distinct` pair given a notice it should not have).

Public API: `load_pairs(name)`, `decide_pairs(pairs, model_dir) -> dict[id, Decision]`,
`score(decisions) -> dict`, `table(rows) -> str`, `main(model_dir, out)`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: `scripts/bench updates`: the labelled sets, by name (tests/data/README.md).
SETS = {"tuning": "fact_pairs.json", "held-out": "fact_pairs_heldout.json"}


def set_path(name: str) -> Path:
    return Path(__file__).resolve().parents[3] / "tests" / "data" / SETS[name]


def load_pairs(name: str) -> list[dict[str, Any]]:
    return json.loads(set_path(name).read_text(encoding="utf-8"))["pairs"]


@dataclass(frozen=True)
class Decision:
    pair: dict[str, Any]
    status: str
    #: the second answer's `probable_update` notice named the first fact
    noticed: bool
    #: the second answer carried a `probable_update` notice at all
    any_notice: bool


def decide_pairs(pairs: Iterable[dict[str, Any]], model_dir: Path | str) -> dict[str, Decision]:
    """Each pair through `remember` twice on a fresh in-memory SQLite store (one entity per pair)."""
    from datetime import UTC, datetime

    from fleetmem.models import Caller
    from fleetmem.ports import Deps
    from fleetmem.transport.dispatch import dispatch
    from fleetmem.wiring import FixedClock, MiniLMEmbedder, SortableIds, open_local

    caller = Caller(tenant="t1", client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)
    clock = FixedClock(datetime(2026, 6, 11, 9, 30, tzinfo=UTC))
    stores = open_local(":memory:")
    deps = Deps.over(stores, clock=clock, ids=SortableIds(), embedder=MiniLMEmbedder(model_dir), llm=None)
    out: dict[str, Decision] = {}
    try:
        for pair in pairs:
            entity = f"{pair['entity']}-{pair['id']}"  # one entity per pair: pairs never meet
            first = dispatch(
                "remember",
                {"fact": pair["first"], "provenance": "pairs", "entity": entity, "kind": pair["kind"]},
                caller,
                deps,
            )
            if first.is_error or first.body["status"] != "inserted":
                raise AssertionError((pair["id"], first.body))
            clock.advance(minutes=1)
            args = {
                "fact": pair["second"],
                "provenance": "pairs",
                "entity": entity,
                "kind": pair.get("second_kind", pair["kind"]),
            }
            second = dispatch("remember", args, caller, deps)
            if second.is_error or "degraded_dedup" in second.body:
                raise AssertionError((pair["id"], second.body))
            notices = [n for n in second.notices if n.code == "probable_update"]
            named = any(
                (n.fix and (n.fix.mcp or {}).get("arguments", {}).get("supersedes") == first.body["id"])
                for n in notices
            )
            out[pair["id"]] = Decision(pair, second.body["status"], named, bool(notices))
    finally:
        stores.close()
    return out


def score(decisions: dict[str, Decision]) -> dict[str, Any]:
    updates = [d for d in decisions.values() if d.pair["label"] == "update"]
    distinct = [d for d in decisions.values() if d.pair["label"] == "distinct"]
    superseded = sum(1 for d in updates if d.status == "superseded")
    noticed = sum(1 for d in updates if d.status == "inserted" and d.noticed)
    return {
        "updates": len(updates),
        "superseded": superseded,
        "noticed": noticed,
        "update_recall": (superseded + noticed) / len(updates) if updates else 1.0,
        "distinct": len(distinct),
        "distinct_merged": sum(1 for d in distinct if d.status != "inserted"),
        "distinct_noticed": sum(1 for d in distinct if d.any_notice),
    }


def table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    lines = [
        "| set | update pairs | superseded | noticed (probable_update) | update recall | distinct pairs "
        "| distinct merged | distinct noticed |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, m in rows:
        lines.append(
            f"| {name} | {m['updates']} | {m['superseded']} | {m['noticed']} | {m['update_recall']:.3f} "
            f"| {m['distinct']} | {m['distinct_merged']} | {m['distinct_noticed']} |"
        )
    return "\n".join(lines)


def misses(decisions: dict[str, Decision]) -> list[str]:
    out = []
    for d in decisions.values():
        p = d.pair
        if p["label"] == "update" and d.status != "superseded" and not d.noticed:
            out.append(f"  missed update {p['id']} ({d.status}): {p['first']!r} -> {p['second']!r}")
        if p["label"] == "distinct" and (d.status != "inserted" or d.any_notice):
            what = d.status if d.status != "inserted" else "noticed"
            out.append(f"  distinct {what} {p['id']}: {p['first']!r} -> {p['second']!r}")
    return out


def main(model_dir: Path | str, out: Callable[[str], None] = print) -> None:
    rows = []
    for name in SETS:
        decisions = decide_pairs([p for p in load_pairs(name) if p["label"] in ("update", "distinct")], model_dir)
        rows.append((name, score(decisions)))
        for line in misses(decisions):
            out(f"{name}:{line}")
    out(table(rows))
