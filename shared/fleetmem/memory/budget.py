"""Server-side budget packing (docs/protocol.md, budgets): a prefix walk, never a knapsack.

Public API:
- `cost(text: str | None) -> int`: ceil(len/4); empty or None -> 0.
- `costs(*texts) -> int`: sum of `cost` over the parts (e.g. title + chunk of a recall result).
- `Packer(budget: int | None)`: walks arms in order. `packer.take(items, cost_fn) -> list` keeps the
  longest prefix whose cumulative cost fits and counts the rest as dropped; once an item did not
  fit, or the remainder is not positive, every later arm is dropped whole. With `budget=None`
  everything is kept and `fields()` is empty.
  `packer.used`, `packer.dropped`, `packer.fields() -> dict` ({budget_tokens, budget_used,
  dropped_count} when a budget was given, else {}).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def cost(text: str | None) -> int:
    return math.ceil(len(text) / 4) if text else 0


def costs(*texts: str | None) -> int:
    return sum(cost(t) for t in texts)


class Packer:
    def __init__(self, budget: int | None) -> None:
        self.budget = budget
        self.used = 0
        self.dropped = 0
        self._stopped = False

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else self.budget - self.used

    def take(self, items: Sequence[T], cost_fn: Callable[[T], int]) -> list[T]:
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
