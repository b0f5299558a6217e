"""The `fleetmem` command, one module per command group.

`app` builds the parser from the groups and runs `main` (the console script `fleetmem.cli:main`);
`framework` holds the parser class, the printers of errors and notices and the shared argparse
types; `tools` generates the tool subcommands from the registry (`render` prints their successes).
The groups: `serve` (serve, init), `tokens`, `protocol`, `importer` (import), `doctor`,
`maintenance` (embedder build, reindex), `conformance`, `bench`, `ambient` (profile, hook,
heartbeat), `pack` (export, import --pack, backup, tenant delete), `admin` (a deployed stage).
They act through `fleetmem.lanes` and `fleetmem.remote`, and print through `fleetmem.console`;
nothing beneath the CLI imports it (the `.importlinter` contracts check it).
"""

from fleetmem.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
