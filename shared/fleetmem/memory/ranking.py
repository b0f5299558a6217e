"""Rank fusion shared by every search caller (both backends rank identically because fusion lives here).

Public functions:
- `rrf(arms: list[list[str]], k: int = 60) -> list[tuple[str, float]]`: Reciprocal Rank Fusion.
  Each arm is a list of ids best first; an id scores sum(1 / (k + rank)) over the arms it appears
  in (rank starts at 1; a repeated id within one arm counts once, at its best rank). Returns
  (id, score) best first; ties keep first-seen order (earlier arm, earlier rank), so output is
  deterministic.
"""

from __future__ import annotations

RRF_K = 60


def rrf(arms: list[list[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    scores: dict[str, float] = {}
    for arm in arms:
        seen: set[str] = set()
        for rank, item in enumerate(arm, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))
