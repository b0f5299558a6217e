"""`fleetmem bench`: latency and throughput, search quality, and embedding and recall speed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fleetmem.cli.framework import Parser
from fleetmem.console import EXIT_OK, CommandFailed, Output
from fleetmem.lanes import settings_from


def add_commands(sub: Any, common: Parser) -> None:
    p = sub.add_parser(
        "bench",
        parents=[common],
        add_help=False,
        help="latency/throughput benchmark; `bench quality`: search quality; `bench search`: embedding and "
        "hybrid recall speed, vector memory; `bench updates`: update notices on the labelled fact pairs "
        "`bench batch`: one remember of 20 items vs 20 single remembers; `bench remember-pool`: remember on "
        "one entity as it grows; `bench entity-names`: one entity of "
        "50 names vs 5 single entity calls; `bench floor`: the per-call floor of a no-op call against GET /health; "
        "`bench recall-arms`: recall by query's time per arm (embedding, keyword, cosine scan, vector, the rest) "
        "(`fleetmem bench --help`)",
    )
    p.add_argument("rest", nargs=argparse.REMAINDER, help="[latency|quality] and the benchmark's options")
    p.set_defaults(handler=cmd_bench)


#: The benchmarks `fleetmem bench` names (default: latency).
BENCHES = (
    "latency",
    "quality",
    "search",
    "console",
    "updates",
    "batch",
    "remember-pool",
    "entity-names",
    "floor",
    "recall-arms",
)


def cmd_bench(args: argparse.Namespace, out: Output) -> int:
    rest = list(args.rest)
    what = rest.pop(0) if rest and rest[0] in BENCHES else "latency"
    if what == "recall-arms":
        from fleetmem.bench.recall_arms import main as arms_main

        if getattr(args, "data_dir", None) and "--data-dir" not in rest:
            rest += ["--data-dir", str(args.data_dir)]  # the global option took it: it names the corpus
        out.text(arms_main(rest))
        return EXIT_OK
    if what == "floor":
        from fleetmem.bench.floor import main as floor_main

        out.text(floor_main(rest))
        return EXIT_OK
    if what == "batch":
        from fleetmem.bench.batch import main as batch_main

        out.text(batch_main(rest, model_dir=settings_from(args).model_dir, log=Output.err))
        return EXIT_OK
    if what == "remember-pool":
        from fleetmem.bench.remember_pool import main as pool_main

        out.text(pool_main(rest, model_dir=settings_from(args).model_dir, log=Output.err))
        return EXIT_OK
    if what == "entity-names":
        from fleetmem.bench.entity_names import main as names_main

        out.text(names_main(rest, log=Output.err))
        return EXIT_OK
    if what == "updates":
        from fleetmem.bench.updates import main as updates_main

        updates_main(Path(rest[0]) if rest else settings_from(args).model_dir, out=out.text)
        return EXIT_OK
    if what == "console":
        from fleetmem.bench.console import main as console_main

        out.text(console_main(rest, log=Output.err))
        return EXIT_OK
    if what == "search":
        from fleetmem.bench.search import main as search_main

        if getattr(args, "data_dir", None) and "--data-dir" not in rest:
            rest += ["--data-dir", str(args.data_dir)]  # the global option took it: it names where to seed
        out.text(search_main(rest, model_dir=settings_from(args).model_dir, log=Output.err))
        return EXIT_OK
    if what == "quality":
        from fleetmem.bench.quality import run_quality

        model_dir = settings_from(args).model_dir
        if rest[:1] == ["--set"] and rest[1:2] != ["default"]:
            from fleetmem.bench.conversations import SETS, default_set_path, run_conversations

            if rest[1:2] == [] or rest[1] not in SETS:
                raise CommandFailed.usage(
                    f"bench quality --set: unknown set {' '.join(rest[1:2]) or '(none given)'}",
                    f"name one of: default, {', '.join(SETS)} (e.g. `fleetmem bench quality --set conversations`)",
                )
            data = default_set_path(rest[1])
            run_conversations(Path(rest[2]) if len(rest) > 2 else model_dir, data_path=data, out=out.text)
            return EXIT_OK
        if rest[:2] == ["--set", "default"]:
            rest = rest[2:]
        run_quality(Path(rest[0]) if rest else model_dir, out=out.text)
        return EXIT_OK
    from fleetmem.bench import main as bench_main

    return int(bench_main(rest, data_dir=getattr(args, "data_dir", None)) or 0)
