"""One way to call fleetmem from Python: the console, the hooks, the CLI's remote verbs and the
integrations call tools through `fleetmem.client`, never through a wire of their own.

Read from the source (no import needed): none of those packages imports a way to make a call
around the client: the MCP wire's calls (`fleetmem.remote`'s `call_remote`, `call_remote_async`, and
the lane and reply helpers it used to offer), a lane built by hand (`fleetmem.lanes.LocalLane`), the
`/v1` route builder, or the MCP SDK's client. Resolving an endpoint (`resolve_endpoint`, `Endpoint`)
stays the CLI's own."""

from __future__ import annotations

import ast
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "fleetmem"
#: The callers that must go through the client (the CLI's local verbs act on the store in-process,
#: as the client's own local mode does, and are not a wire: `cli/tools.py` keeps its dispatch).
CALLERS = ["web", "hooks", "cli", "integrations"]
#: (module, name) pairs that make a call without the client.
AROUND_THE_CLIENT = {
    ("fleetmem.remote", "call_remote"),
    ("fleetmem.remote", "call_remote_async"),
    ("fleetmem.remote", "RemoteLane"),
    ("fleetmem.remote", "remote_reply"),
    ("fleetmem.lanes", "LocalLane"),
    ("fleetmem.contract.routes", "v1_tool_path"),
}
MCP_CLIENT = "mcp.client"


def imports_around_the_client(path: Path) -> list[str]:
    found = []
    where = path.relative_to(SHARED)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if (node.module, alias.name) in AROUND_THE_CLIENT or node.module.startswith(MCP_CLIENT):
                    found.append(f"{where}:{node.lineno} {node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            found += [f"{where}:{node.lineno} {a.name}" for a in node.names if a.name.startswith(MCP_CLIENT)]
    return found


def test_the_console_the_hooks_the_cli_and_the_integrations_call_through_the_client() -> None:
    files = [f for package in CALLERS for f in sorted((SHARED / package).rglob("*.py"))]
    assert len(files) > 20  # the packages are where this test looks
    around = [hit for f in files for hit in imports_around_the_client(f)]
    assert around == [], "calls that go around fleetmem.client:\n" + "\n".join(around)
