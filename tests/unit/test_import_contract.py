"""The import graph keeps its contracts (`[tool.importlinter]` in pyproject.toml): nothing beneath
the CLI (remote, lanes, hooks, transport, memory, adapters, ...) imports `fleetmem.cli`, directly or
through another module; the call contract (`fleetmem.contract`) imports no transport, adapter or
CLI, and no adapter imports a transport; and the domain reaches no AWS SDK, OpenSearch client or
MCP. `lint-imports` builds the graph with grimp, which sees imports inside functions too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    assert lint.is_file(), f"{lint} is missing: install the dev extra (import-linter)"
    run = subprocess.run(
        [str(lint), "--config", str(ROOT / "pyproject.toml"), "--no-cache", "--no-logo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"lint-imports found a broken import contract:\n{run.stdout}\n{run.stderr}"
    assert "0 broken" in run.stdout
