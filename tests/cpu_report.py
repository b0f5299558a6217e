"""Where the suite's CPU goes, per test: `-p tests.cpu_report` with FLEETMEM_CPU_REPORT=<file>
appends one tab-separated line per test (node id, wall seconds, the test process's own CPU seconds,
the CPU seconds of the child processes it reaped, the CPU seconds its live descendants burnt meanwhile
— DynamoDB Local's JVM of this worker, the local stack's function processes, servers a fixture
keeps — then the xdist worker and the time the test ended); under xdist every worker appends its own
lines. The suite is CPU-bound on two cores, so the CPU a test burns, its subprocesses' included, is
what it costs the run; a server a module-scoped fixture stops is counted on the module's last test,
so sum by module:

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


def _live_descendants_cpu() -> float:
    """CPU seconds of every process below this one that is still running (Linux /proc)."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            parent[int(entry)] = int(fields[1])
            ticks[int(entry)] = int(fields[11]) + int(fields[12])
    me, total = os.getpid(), 0
    for pid in ticks:
        up = parent.get(pid, 0)
        while up > 1 and up != me:
            up = parent.get(up, 0)
        if up == me:
            total += ticks[pid]
    return total / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    target = os.environ.get("FLEETMEM_CPU_REPORT")
    if not target:
        yield
        return
    wall, own, children, live = time.monotonic(), time.process_time(), _children_cpu(), _live_descendants_cpu()
    yield
    line = "\t".join(
        (
            item.nodeid,
            f"{time.monotonic() - wall:.3f}",
            f"{time.process_time() - own:.3f}",
            f"{_children_cpu() - children:.3f}",
            f"{_live_descendants_cpu() - live:.3f}",
            os.environ.get("PYTEST_XDIST_WORKER", "-"),
            f"{time.time():.1f}",
        )
    )
    with Path(target).open("a", encoding="utf-8") as out:
        out.write(line + "\n")


def summarise(path: Path, top: int = 40) -> str:
    """The modules by CPU (own + reaped children + live descendants), with their wall seconds and
    test counts."""
    by_module: dict[str, list[float]] = defaultdict(lambda: [0.0] * 5)
    for row in path.read_text(encoding="utf-8").splitlines():
        nodeid, *numbers = row.split("\t")
        total = by_module[nodeid.split("::")[0]]
        for i, value in enumerate([*numbers, "0"][:4]):  # lines without the live column count it 0
            total[i] += float(value)
        total[4] += 1
    rows = sorted(by_module.items(), key=lambda kv: -sum(kv[1][1:4]))
    cpu = sum(sum(v[1:4]) for v in by_module.values())
    head = f"{'cpu s':>8} {'own':>8} {'child':>8} {'live':>8} {'wall s':>8} {'tests':>6}  module"
    lines = [f"{head}  (all: {cpu:.0f} cpu s)"]
    for module, (w, o, c, d, n) in rows[:top]:
        lines.append(f"{o + c + d:8.1f} {o:8.1f} {c:8.1f} {d:8.1f} {w:8.1f} {int(n):6d}  {module}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarise(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40))
