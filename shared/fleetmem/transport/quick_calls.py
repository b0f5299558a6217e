"""Where an in-process edge runs a call: on a worker thread, or inline on the event loop once that
kind of call has proven quick.

A hand-off to a worker thread and back costs two thread wake-ups (0.1–1.5 ms on two cores), as
much as a read such as `whoami`, a `get_page` miss, `entity` or `recall {entity}` costs itself, and on a
GIL-bound server the thread buys such a call no parallelism. So a call runs inline when its kind
(the tool and the names of its arguments, `kind_of`) has just run `STREAK` times in a row in under
`BUDGET_S` each; every call is timed (inline ones too), and one over the budget sends its kind back
to worker threads until it has a fresh streak. Only reads that wait on nothing outside the store
are eligible (`ToolSpec.writes` and `ToolSpec.calls_out` are never inline), only with an
in-process invoker (an edge that invokes verb functions over the network always hands off), and
the first calls of every kind take the thread. At most `MAX_KINDS` kinds are tracked; calls of
any other kind take the thread. What a caller sees does not change, only which thread answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import anyio.to_thread

from fleetmem.memory.registry import REGISTRY

T = TypeVar("T")

#: A call's own run time under which it counts as quick: the interpreter's switch interval (5 ms),
#: so an inline call holds the loop no longer than a worker thread may hold the GIL before it must
#: pass it on. On two cores a hand-off costs as much as its two wake-ups (0.1–1.5 ms, above): paired
#: in one server (docs/benchmarks.md), entity and recall by entity (1–1.5 ms each) answered ~1.5 ms
#: sooner at p50 inline than with a 1 ms budget, and 32 mixed clients made 9 % more calls.
BUDGET_S = 0.005
#: Quick calls in a row before a kind runs inline.
STREAK = 16
#: Kinds tracked at most (argument names come from callers).
MAX_KINDS = 256


def kind_of(tool: str, arguments: Any, lane: str = "mcp") -> Hashable | None:
    """The kind a call is timed under, or None when it must always take a worker thread: an
    unknown tool, a write, or a tool that waits on a service outside the store (a model)."""
    spec = REGISTRY.get(tool)
    if spec is None or spec.writes or spec.calls_out:
        return None
    names = tuple(sorted(arguments)) if isinstance(arguments, dict) else ()
    return (lane, tool, names)


class QuickCalls:
    """The streak of quick runs per kind, and the run itself (`run`)."""

    def __init__(
        self,
        *,
        budget_s: float | None = None,
        streak: int | None = None,
        max_kinds: int | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.budget_s = BUDGET_S if budget_s is None else budget_s
        self.streak = STREAK if streak is None else streak
        self.max_kinds = MAX_KINDS if max_kinds is None else max_kinds
        self.clock = clock
        self._streaks: dict[Hashable, int] = {}

    def inline(self, kind: Hashable | None) -> bool:
        """Whether the next call of `kind` runs on the event loop."""
        return kind is not None and self._streaks.get(kind, 0) >= self.streak

    def _note(self, kind: Hashable, elapsed: float) -> None:
        streaks = self._streaks
        if kind not in streaks and len(streaks) >= self.max_kinds:
            return
        streaks[kind] = min(streaks.get(kind, 0) + 1, self.streak) if elapsed <= self.budget_s else 0

    def _timed(self, kind: Hashable | None, fn: Callable[..., T], *args: Any) -> T:
        started = self.clock()
        try:
            return fn(*args)
        finally:
            if kind is not None:
                self._note(kind, self.clock() - started)

    async def run(self, kind: Hashable | None, fn: Callable[..., T], *args: Any, limiter: Any = None) -> T:
        """`fn(*args)` inline when its kind has proven quick, else on a worker thread (`limiter`)."""
        if self.inline(kind):
            return self._timed(kind, fn, *args)
        return await anyio.to_thread.run_sync(self._timed, kind, fn, *args, limiter=limiter)
