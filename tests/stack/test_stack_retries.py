"""The edge never retries a verb invoke: on the local stack (tests/stack/stack.py) a throttled verb
and a verb slower than the edge's deadline for it each cost exactly ONE invoke, and the caller gets
the designed `unavailable` envelope with a wait fix (Retry-After) instead of the SDK's retries.

The faults come from the stack's Lambda Invoke API (`InvokeRouter.fault`): THROTTLE answers the
service's 429 `TooManyRequestsException` without running the function; SLOW runs the function and
holds its answer until the test ends the fault, past the edge's deadline for that verb (its
function's timeout plus `INVOKE_MARGIN_S`, `FLEETMEM_INVOKE_DEADLINES_S`). The router counts every
invoke that reaches it per function, so the edge's botocore client cannot retry unseen.
"""

from __future__ import annotations

import uuid

import pytest

from .conftest import mint
from .stack import SLOW, THROTTLE, Stack
from .test_stack_overload import call

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]


def invokes(stack: Stack, group: str) -> int:
    return stack.router.invocations.get(group, 0)


def assert_wait_envelope(body: dict, reason: str) -> None:
    assert body["code"] == "unavailable", body
    assert body["detail"]["reason"] == reason, body
    assert body["fix"]["next"] == "wait" and body["fix"]["retry_after_seconds"] >= 1, body


def test_a_throttled_verb_is_invoked_once_and_answers_unavailable_with_retry_after(stack):
    token = mint(stack, ["read", "write"], tenant=f"retries-{uuid.uuid4().hex[:6]}")
    fact = {"fact": f"The throttled tank {uuid.uuid4().hex[:6]} is in room 2.", "provenance": "t"}
    before = invokes(stack, "remember")
    with stack.router.fault("remember", THROTTLE):
        is_error, body = call(stack, token, "remember", fact)
    assert invokes(stack, "remember") - before == 1
    assert is_error
    assert_wait_envelope(body, "throttled")
    # the call the fix names, made again once the function has room, is done
    is_error, body = call(stack, token, body["fix"]["mcp"]["tool"], body["fix"]["mcp"]["arguments"])
    assert not is_error and body["status"] == "inserted", body


def test_a_verb_slower_than_its_deadline_runs_once_and_answers_unavailable_with_retry_after(stack):
    token = mint(stack, ["read", "write"], tenant=f"retries-{uuid.uuid4().hex[:6]}")
    before, ran = invokes(stack, "entity"), stack.functions["entity"].invocations
    with stack.router.fault("entity", SLOW):
        is_error, body = call(stack, token, "entity", {"name": "projects/slow"})
    assert invokes(stack, "entity") - before == 1
    assert stack.functions["entity"].invocations - ran == 1  # the verb ran once
    assert is_error
    assert_wait_envelope(body, "timeout")
    # the stack keeps answering that verb afterwards
    is_error, body = call(stack, token, "entity", {"name": "projects/slow"})
    assert not is_error, body
