"""Every successful tool response must match its tool's result model (`ToolSpec.result`, the
shapes docs/protocol.md describes). `check_body` is the assertion; `validate_every_dispatch` wraps
THE dispatch pipeline so each success it returns during a test is checked, whatever the transport
(in-process MCP, HTTP served from this process, the CLI)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from fleetmem.memory.verbs import REGISTRY
from fleetmem.transport import dispatch as dispatch_module


def mismatch(tool: str, body: dict[str, Any]) -> str | None:
    """Why `body` (a success of `tool`) does not match the tool's result model, or None."""
    if body.get("dry_run") is True and body.get("ran") is False:
        return None  # a dry run answers for dispatch, not for the tool
    spec = REGISTRY[tool]
    try:
        spec.validate_result(body)
    except ValidationError as exc:
        return f"{tool} answered a body that does not match {spec.result.__name__}:\n{exc}\nbody: {body}"
    return None


def check_body(tool: str, body: dict[str, Any]) -> None:
    """Fails the test when `body` (a success) does not match `tool`'s result model."""
    problem = mismatch(tool, body)
    if problem:
        pytest.fail(problem)


class DispatchChecks:
    """What `validate_every_dispatch` saw: the tools whose successes were checked, and mismatches."""

    def __init__(self) -> None:
        self.checked: list[str] = []
        self.problems: list[str] = []

    def assert_clean(self) -> None:
        if self.problems:
            pytest.fail("\n\n".join(self.problems))


def validate_every_dispatch(monkeypatch: pytest.MonkeyPatch) -> DispatchChecks:
    """Checks every successful dispatch in this test (any thread of this process) against its result
    model. Mismatches are collected, not raised, so a server thread still answers; call
    `assert_clean()` at the end of the test."""
    checks = DispatchChecks()
    original = dispatch_module._Call.pipeline

    def run(self: Any) -> Any:
        result = original(self)
        if not result.is_error and isinstance(self.tool, str) and self.tool in REGISTRY:
            checks.checked.append(self.tool)
            problem = mismatch(self.tool, result.body)
            if problem:
                checks.problems.append(problem)
        return result

    monkeypatch.setattr(dispatch_module._Call, "pipeline", run)
    return checks
