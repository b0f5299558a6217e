"""Where the suite's CPU goes, per test: `-p tests.cpu_report` with FLEETMEM_CPU_REPORT=<file>
appends one tab-separated line per test (node id, wall seconds, the test process's own CPU seconds,
the CPU seconds of the child processes it reaped) — under xdist every worker appends its own
lines. The suite is CPU-bound on two cores, so the CPU a test burns, its subprocesses' included
(servers, CLI runs, function runtimes), is what it costs the run; a server a module-scoped fixture
stops is counted on the module's last test, so sum by module:

    FLEETMEM_CPU_REPORT=/tmp/cpu.tsv scripts/test -p tests.cpu_report
    python -m tests.cpu_report /tmp/cpu.tsv   # the modules that cost the most
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    target = os.environ.get("FLEETMEM_CPU_REPORT")
    if not target:
        yield
        return
    wall, own, children = time.monotonic(), time.process_time(), _children_cpu()
    yield
    line = "\t".join(
        (
            item.nodeid,
            f"{time.monotonic() - wall:.3f}",
            f"{time.process_time() - own:.3f}",
            f"{_children_cpu() - children:.3f}",
        )
    )
    with Path(target).open("a", encoding="utf-8") as out:
        out.write(line + "\n")


def summarise(path: Path, top: int = 40) -> str:
    """The modules by CPU (own + children), with their wall seconds and test counts."""
    by_module: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for row in path.read_text(encoding="utf-8").splitlines():
        nodeid, wall, own, children = row.split("\t")
        total = by_module[nodeid.split("::")[0]]
        total[0] += float(wall)
        total[1] += float(own)
        total[2] += float(children)
        total[3] += 1
    rows = sorted(by_module.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))
    cpu = sum(v[1] + v[2] for v in by_module.values())
    lines = [f"{'cpu s':>8} {'own':>8} {'child':>8} {'wall s':>8} {'tests':>6}  module  (all: {cpu:.0f} cpu s)"]
    for module, (w, o, c, n) in rows[:top]:
        lines.append(f"{o + c:8.1f} {o:8.1f} {c:8.1f} {w:8.1f} {int(n):6d}  {module}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarise(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40))
