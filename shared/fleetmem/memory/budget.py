"""Server-side budget packing (docs/protocol.md, budgets): a prefix walk, never a knapsack.

Public API:
- `cost(text: str | None) -> int`: ceil(len/4); empty or None -> 0.
- `costs(*texts) -> int`: sum of `cost` over the parts (e.g. title + chunk of a recall result).
- `Packer(budget: int | None)`: walks arms in order. `packer.take(items, cost_fn) -> list` keeps the
  longest prefix whose cumulative cost fits and counts the rest as dropped; once an item did not
  fit, or the remainder is not positive, every later arm is dropped whole. With `budget=None`
  everything is kept and `fields()` is empty.
  `packer.used`, `packer.dropped`, `packer.fields() -> dict` ({budget_tokens, budget_used,
  dropped_count} when a budget was given, else {}). `take(..., arm=name)` also records that arm's
  `ArmTally` in `packer.arms[name]`; `pack(packer, arms, order)` takes named arms in the order given
  (recall's facts-first and query-first are the same walk with the arms swapped).
- `ArmTally`: one arm's {candidates, kept, dropped, used} (candidates = kept + dropped; `used` is the
  kept items' cost).
- `fit_prefix(render, total, budget) -> (shown, text)`: for verbs whose answer is an injectable
  `text` (context_pack, delta): the largest `shown` (0..total) whose `render(shown)` costs at
  most `budget`, and that text; (0, "") when not even the empty block fits; everything when
  `budget` is None. The verb then lists exactly those `shown` items, so its JSON and its text
  agree.
- `text_fields(budget, text, dropped) -> dict`: the budget fields of such a verb: `budget_used`
  is the cost of the text (frame, headings and lines included), `dropped_count` what it left out;
  {} without a budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def cost(text: str | None) -> int:
    return math.ceil(len(text) / 4) if text else 0


def costs(*texts: str | None) -> int:
    return sum(cost(t) for t in texts)


def fit_prefix(render: Callable[[int], str], total: int, budget: int | None) -> tuple[int, str]:
    """Searched from the top down: the first fit is the longest (not always the first miss from
    below: a shown last item can be shorter than the line counting what was left out)."""
    if budget is None:
        return total, render(total)
    for shown in range(total, -1, -1):
        text = render(shown)
        if cost(text) <= budget:
            return shown, text
    return 0, ""


def text_fields(budget: int | None, text: str, dropped: int) -> dict[str, int]:
    if budget is None:
        return {}
    return {"budget_tokens": budget, "budget_used": cost(text), "dropped_count": dropped}


@dataclass(frozen=True)
class ArmTally:
    candidates: int
    kept: int
    dropped: int
    used: int

    def wire(self) -> dict[str, int]:
        return asdict(self)


class Packer:
    def __init__(self, budget: int | None) -> None:
        self.budget = budget
        self.used = 0
        self.dropped = 0
        self._stopped = False
        self.arms: dict[str, ArmTally] = {}

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else self.budget - self.used

    def take(self, items: Sequence[T], cost_fn: Callable[[T], int], *, arm: str | None = None) -> list[T]:
        kept = self._walk(items, cost_fn)
        if arm is not None:
            used = sum(cost_fn(item) for item in kept)
            self.arms[arm] = ArmTally(len(items), len(kept), len(items) - len(kept), used)
        return kept

    def _walk(self, items: Sequence[T], cost_fn: Callable[[T], int]) -> list[T]:
        if self.budget is None:
            return list(items)
        if self._stopped or self.budget - self.used <= 0:
            self._stopped = True
            self.dropped += len(items)
            return []
        kept: list[T] = []
        for i, item in enumerate(items):
            c = cost_fn(item)
            if self.used + c > self.budget:
                self._stopped = True
                self.dropped += len(items) - i
                break
            self.used += c
            kept.append(item)
        return kept

    def fields(self) -> dict[str, int]:
        if self.budget is None:
            return {}
        return {"budget_tokens": self.budget, "budget_used": self.used, "dropped_count": self.dropped}


def pack(
    packer: Packer, arms: Mapping[str, tuple[Sequence[Any], Callable[[Any], int]]], order: Sequence[str]
) -> dict[str, list[Any]]:
    """Each named arm (items, cost) through `packer`, in `order`; the kept prefix per arm name."""
    return {name: packer.take(*arms[name], arm=name) for name in order}
