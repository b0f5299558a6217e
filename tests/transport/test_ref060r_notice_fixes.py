"""D28: no notice or error fix names a tool the caller cannot call. The envelope builder is the one
place that drops such a step (`callable_fix`): walk every tool a fix can name (the registry's, which
covers every `mcp`/`verify` step the code builds) on the verbs surface and for a read-only token."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleetmem.contract.envelope import build_envelope
from fleetmem.contract.result import DispatchResult
from fleetmem.errors import Fix, Notice, VerbError
from fleetmem.memory.verbs import REGISTRY
from fleetmem.models import Caller
from fleetmem.transport.dispatch import visible_tools
from fleetmem.transport.mcp_app import to_call_tool_result

CALLERS = {
    "verbs/write": ("verbs", ("read", "write")),
    "full/read": ("full", ("read",)),
    "verbs/read": ("verbs", ("read",)),
}


def named(value: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(value, dict):
        if isinstance(value.get("tool"), str):
            out.add(value["tool"])
        for v in value.values():
            out |= named(v)
    elif isinstance(value, list):
        for v in value:
            out |= named(v)
    return out


def _fix(tool: str) -> Fix:
    step = {"tool": tool, "arguments": {"x": 1}}
    return Fix(why="next step", mcp=step, verify={"mcp": step})


@pytest.mark.parametrize("who", sorted(CALLERS))
@pytest.mark.parametrize("tool", sorted(REGISTRY))
def test_no_notice_or_error_fix_names_a_tool_outside_tools_list(who: str, tool: str) -> None:
    surface, scopes = CALLERS[who]
    caller = Caller(tenant="t", client_id="c", scopes=frozenset(scopes), remote=True)
    listed = {s.name for s in visible_tools(surface, caller)}  # type: ignore[arg-type]
    notice = Notice(code="n", kind="info", why="w", fix=_fix(tool))
    framed = to_call_tool_result(DispatchResult({}, False, [notice], "c"), callable_tools=listed)
    body = json.loads("\n".join(c.text for c in framed.content))  # every block, joined
    err = VerbError("unavailable", "m", "s", fix=_fix(tool), notices=[notice])
    env = build_envelope(err, tool="recall", arguments={}, correlation_id="c", transport="mcp", callable_tools=listed)
    wire = {"body": body, "envelope": env.body()}
    assert named(wire) <= listed
    if tool in listed:  # a step the caller can run is kept
        assert body["notices"][0]["fix"]["mcp"]["tool"] == tool
        assert env.body()["fix"]["mcp"]["tool"] == tool
    else:  # the notice goes without the step; the envelope keeps a fix with nothing to run
        assert "fix" not in body["notices"][0]
        assert env.body()["fix"]["next"] == "report"
        assert tool not in env.body()["suggestion"].split()
