"""Benchmarks: `fleetmem bench` (latency/throughput on a seeded corpus) and `fleetmem bench quality`
(search quality, in `fleetmem.bench.quality`)."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str], *, data_dir: str | None = None) -> int:
    from fleetmem.bench.runner import parser, prepare, run

    args = parser().parse_args(list(argv))
    if args.data_dir is None and data_dir is not None:
        args.data_dir = data_dir
    base, sizes = prepare(args)
    if args.mixed:
        from fleetmem.bench.mixed import run_mixed_bench

        print(run_mixed_bench(args, base, sizes), end="")
    else:
        print(run(args, base, sizes), end="")
    return 0
