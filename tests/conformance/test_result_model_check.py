"""`fleetmem conformance` validates every successful response body against the tool's result model:
a body that strays from the contract fails its case even when every case-specific check passes."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from fleetmem.conformance.runner import CallOutcome, CaseFailed, check_call

FORGET_BODY = {"id": "f_1", "expired": True, "reason": None, "protocol_version": 1}


def outcome(tool: str, body: dict, *, is_error: bool = False) -> CallOutcome:
    """A tools/call result as the `mcp` client returns it: one text block, structured mirror."""
    result = SimpleNamespace(
        is_error=is_error,
        content=[SimpleNamespace(text=json.dumps(body))],
        structured_content=body,
        meta=None,
    )
    return CallOutcome(tool, {}, result)


def test_a_body_that_matches_its_model_passes() -> None:
    check_call(outcome("forget", FORGET_BODY), {"ok": True})


@pytest.mark.parametrize(
    "body",
    [
        {**FORGET_BODY, "extra": 1},  # an undeclared field
        {k: v for k, v in FORGET_BODY.items() if k != "reason"},  # a field dropped
        {**FORGET_BODY, "expired": "yes"},  # a wrong type
    ],
)
def test_a_body_that_strays_from_its_model_fails_the_case(body: dict) -> None:
    with pytest.raises(CaseFailed, match="does not match ForgetResult"):
        check_call(outcome("forget", body), {"ok": True})


def test_error_envelopes_and_dry_runs_are_not_tool_results() -> None:
    dry = {"dry_run": True, "tool": "forget", "ran": False, "arguments": {"id": "x"}, "protocol_version": 1}
    check_call(outcome("forget", dry), {"ok": True})
    # no result-model check on an expected error (the envelope has its own checks)
    with pytest.raises(CaseFailed, match="expected error"):
        check_call(outcome("forget", FORGET_BODY), {"error": "not_found"})
