"""The heartbeat's size bound: one delivery stays under the 256 KB an SQS message or EventBridge
PutEvents entry may hold, and a delta too large to send never sticks the session cursor.

Runs the heartbeat handler on moto's SQS / EventBridge with the AWS stores on moto's DynamoDB
(conftest `deps`). The services here do not enforce the 256 KB limit, so the tests lower the
delivery's limit (`max_bytes`) to a few KB and measure what was sent against it."""

from __future__ import annotations

import json
import uuid

import boto3
import pytest

from fleetmem.memory import heartbeat as policy
from fleetmem.transport.aws_lambda import runtime

from .conftest import call, load_event
from .test_heartbeat_handler import queue_event  # noqa: F401 (fixture)

pytestmark = pytest.mark.usefixtures("deps")


@pytest.fixture
def bound_event(request: pytest.FixtureRequest) -> tuple[dict, str]:
    """test_heartbeat_handler's SQS event, with its own session and the default budget."""
    event, url = request.getfixturevalue("queue_event")
    event["session_id"] = f"bound-{uuid.uuid4().hex[:8]}"
    event.pop("budget_tokens", None)
    return event, url


def received(url: str) -> list[str]:
    out = boto3.client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    return [m["Body"] for m in out.get("Messages", [])]


def remember(text: str) -> None:
    event = load_event("remember", "invoke")
    event["arguments"] = {"fact": text, "provenance": "bound test"}
    assert call("remember", event)["is_error"] is False


def long_fact(n: int) -> str:
    return f"fact {n} " + " ".join(f"word{n}x{i}" for i in range(180))  # ~1,600 characters


def test_the_schedule_budget_is_bounded():
    assert policy.wake_budget(10**9) == policy.MAX_BUDGET_TOKENS
    assert policy.wake_budget(None) == policy.DEFAULT_BUDGET_TOKENS
    assert policy.wake_budget(1) == policy.MIN_BUDGET_TOKENS
    # 20,000 tokens ~ 80,000 characters, carried twice (items + text): under the 256 KB limit
    assert policy.MAX_BUDGET_TOKENS * 4 * 2 < 256 * 1024


def test_an_oversize_delta_is_fetched_again_with_a_smaller_budget_and_fits(bound_event, clock, deps):
    event, url = bound_event
    call("heartbeat", event)
    clock.advance(minutes=1)
    for n in range(6):
        remember(long_fact(n))
    clock.advance(minutes=1)
    runtime.delivery().max_bytes = 8_000
    out = call("heartbeat", event)
    assert out["status"] == "delivered" and out["truncated"] is False
    assert out["budget_tokens"] < policy.DEFAULT_BUDGET_TOKENS
    (body,) = received(url)
    assert len(body.encode()) <= 8_000
    delta = json.loads(body)["delta"]
    assert 0 < len(delta["facts"]) < 6 and delta["has_more"] is True


def test_a_delta_too_large_even_at_the_floor_is_cut_to_heads_and_the_cursor_moves_on(bound_event, clock, deps):
    event, url = bound_event
    call("heartbeat", event)
    clock.advance(minutes=1)
    # one page with a title at its 300-character limit and a ~1,600-character fact: at the floor
    # budget the message is still over a 900-byte limit, so it is cut
    title = ("Acme renewal " * 23)[:300]
    put = load_event("pages", "invoke_put_page")
    put["arguments"] = {"slug": "companies/acme", "content": f"---\ntitle: {title}\n---\nRenewal notes.\n"}
    assert call("pages", put)["is_error"] is False
    remember(long_fact(1))
    clock.advance(minutes=1)
    runtime.delivery().max_bytes = 900
    before = deps.cursors.get("acme", "planner", event["session_id"], now=clock.now())
    out = call("heartbeat", event)
    assert out["status"] == "delivered" and out["truncated"] is True
    (body,) = received(url)
    assert len(body.encode()) <= 900
    assert json.loads(body)["delta"]["truncated"] is True
    after = deps.cursors.get("acme", "planner", event["session_id"], now=clock.now())
    assert (after.since, after.slug) != (before.since, before.slug)
    clock.advance(minutes=1)
    # not the same oversize delta again: the page is behind the cursor; the fact the floor budget
    # left out comes next (cut to the budget, D14), and then nothing
    assert call("heartbeat", event)["status"] == "delivered"
    (body,) = received(url)
    nxt = json.loads(body)["delta"]
    assert nxt["pages"] == [] and len(nxt["facts"]) == 1
    clock.advance(minutes=1)
    assert call("heartbeat", event)["status"] == "empty"


def test_a_facts_only_change_is_delivered_once_not_on_every_wake(bound_event, clock, deps):
    event, url = bound_event
    call("heartbeat", event)
    clock.advance(minutes=1)
    remember("Acme renewal moved to Friday")
    clock.advance(minutes=1)
    assert call("heartbeat", event)["status"] == "delivered"
    assert len(received(url)) == 1
    clock.advance(minutes=1)
    assert call("heartbeat", event)["status"] == "empty"
    assert received(url) == []


def test_facts_a_smaller_budget_left_out_arrive_on_later_wakes(bound_event, clock, deps):
    """D14 through the heartbeat: a wake that delivers only part of the facts keeps the facts'
    own position, so every fact arrives on some wake (none is skipped when the cursor moves)."""
    event, url = bound_event
    call("heartbeat", event)
    clock.advance(minutes=1)
    for n in range(6):
        remember(long_fact(n))
    clock.advance(minutes=1)
    runtime.delivery().max_bytes = 8_000
    delivered: set[str] = set()
    for _ in range(8):
        out = call("heartbeat", event)
        for body in received(url):
            delivered |= {f["fact"].split()[1] for f in json.loads(body)["delta"]["facts"]}
        clock.advance(minutes=1)
        if out["status"] == "empty":
            break
    assert delivered == {str(n) for n in range(6)}
