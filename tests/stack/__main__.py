"""`python -m tests.stack [--port 8766] [--surface full|verbs] [--async-index]` or `... bench [--pages N]`,
`... bench-authorizer [--cold N] [--warm N]` or `... overload [--recalls N]` (run by scripts/stack)."""

from __future__ import annotations

import argparse
import sys

from tests.stack.stack import DEFAULT_PORT, serve


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        from tests.stack.bench import main as bench

        return bench(argv[1:])
    if argv[:1] == ["bench-authorizer"]:
        from tests.stack.bench_authorizer import main as bench_authorizer

        return bench_authorizer(argv[1:])
    if argv[:1] == ["overload"]:
        from tests.stack.overload import main as overload

        return overload(argv[1:])
    p = argparse.ArgumentParser(prog="scripts/stack", description="fleetmem's deployed AWS shape on 127.0.0.1")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"the HTTP front's port (default {DEFAULT_PORT}; 0: a free one)"
    )
    p.add_argument("--surface", choices=("full", "verbs"), default="full", help="FLEETMEM_SURFACE of every function")
    p.add_argument(
        "--async-index",
        action="store_true",
        help="index only from the stream poller (as on AWS); by default each request waits until the "
        "stream is drained, so search sees a write in the next request",
    )
    args = p.parse_args(argv)
    if not 0 <= args.port <= 65535:
        p.error("--port must be within 0-65535")
    return serve(args.port, args.surface, sync_index=not args.async_index)


if __name__ == "__main__":
    sys.exit(main())
