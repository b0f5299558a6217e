"""The heartbeat handler on its events/heartbeat files: a scheduled delta for one session,
delivered to SQS or to an EventBridge bus (moto's server for both), at least once, with the
session cursor advanced only past what was delivered."""

from __future__ import annotations

import json
import uuid

import boto3
import pytest

from .conftest import call, load_event

pytestmark = pytest.mark.usefixtures("deps")


@pytest.fixture
def queue_event(aws_env) -> tuple[dict, str]:
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"ops-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    event = load_event("heartbeat", "sqs_destination")
    event["destination"]["queue_url"] = url
    return event, url


def received(url: str) -> list[dict]:
    sqs = boto3.client("sqs")
    out = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    return [json.loads(m["Body"]) for m in out.get("Messages", [])]


def put_page(slug: str, text: str) -> None:
    event = load_event("pages", "invoke_put_page")
    event["arguments"] = {"slug": slug, "content": f"---\ntitle: {slug}\n---\n{text}\n"}
    assert call("pages", event)["is_error"] is False


def test_first_wake_establishes_the_cursor_and_sends_nothing(queue_event):
    event, url = queue_event
    assert call("heartbeat", event)["status"] == "established"
    assert received(url) == []


def test_changes_after_the_cursor_are_delivered_once_then_the_cursor_moves(queue_event, clock, deps):
    event, url = queue_event
    call("heartbeat", event)
    clock.advance(minutes=1)
    put_page("companies/acme", "Renewal call on Thursday.")
    clock.advance(minutes=1)
    out = call("heartbeat", event)
    assert out["status"] == "delivered"
    (message,) = received(url)
    assert message["session_id"] == event["session_id"]
    assert [p["slug"] for p in message["delta"]["pages"]] == ["companies/acme"]
    cursor = deps.cursors.get("acme", "planner", event["session_id"], now=clock.now())
    assert cursor.slug == "companies/acme"
    clock.advance(minutes=1)
    assert call("heartbeat", event)["status"] == "empty"
    assert received(url) == []


def test_a_failed_delivery_keeps_the_cursor_so_the_next_wake_delivers_again(queue_event, clock, deps):
    event, url = queue_event
    call("heartbeat", event)
    before = deps.cursors.get("acme", "planner", event["session_id"], now=clock.now())
    clock.advance(minutes=1)
    put_page("companies/acme", "Renewal call on Thursday.")
    clock.advance(minutes=1)
    broken = json.loads(json.dumps(event))
    broken["destination"]["queue_url"] = url + "-missing"
    with pytest.raises(Exception):  # noqa: B017 - the platform retries whatever the SDK raised
        call("heartbeat", broken)
    after = deps.cursors.get("acme", "planner", event["session_id"], now=clock.now())
    assert (after.since, after.slug) == (before.since, before.slug)
    assert call("heartbeat", event)["status"] == "delivered"
    (message,) = received(url)
    assert [p["slug"] for p in message["delta"]["pages"]] == ["companies/acme"]


def test_a_webhook_destination_goes_through_the_event_bus(aws_env, clock):
    events = boto3.client("events")
    sqs = boto3.client("sqs")
    bus = f"fleetmem-test-heartbeat-{uuid.uuid4().hex[:6]}"
    events.create_event_bus(Name=bus)
    tap = sqs.create_queue(QueueName=f"tap-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    tap_arn = sqs.get_queue_attributes(QueueUrl=tap, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    # Stands in for the rule -> API destination the stack creates (moto cannot call HTTPS targets).
    events.put_rule(
        Name="tap",
        EventBusName=bus,
        EventPattern=json.dumps(
            {
                "source": ["fleetmem.heartbeat"],
                "detail-type": ["fleetmem.delta"],
                "detail": {"destination": ["ops-webhook"]},
            }
        ),
    )
    events.put_targets(Rule="tap", EventBusName=bus, Targets=[{"Id": "q", "Arn": tap_arn}])
    event = load_event("heartbeat", "https_destination")
    event["destination"]["bus"] = bus
    call("heartbeat", event)
    clock.advance(minutes=1)
    put_page("projects/atlas", "Kick-off moved to July.")
    clock.advance(minutes=1)
    assert call("heartbeat", event)["status"] == "delivered"
    (raw,) = received(tap)
    detail = raw["detail"]
    assert detail["destination"] == "ops-webhook"
    assert [p["slug"] for p in detail["delta"]["pages"]] == ["projects/atlas"]


@pytest.mark.parametrize("how", ["payload_names_the_session", "unknown_heartbeat", "name_plus_overrides"])
def test_a_wake_that_does_not_name_a_configured_heartbeat_is_refused_and_sends_nothing(queue_event, deps, how):
    """Only the deploy's heartbeat table says whose delta goes where: a payload naming a tenant,
    client or destination itself (anyone allowed `lambda:InvokeFunction` could send one) is refused."""
    from .conftest import schedule_heartbeat

    event, url = queue_event
    if how == "payload_names_the_session":
        forged = event
    elif how == "unknown_heartbeat":
        forged = {"heartbeat": "no-such-heartbeat"}
    else:
        forged = {**schedule_heartbeat({**event, "session_id": "configured"}), **event}
    out = call("heartbeat", forged, sign=False)
    assert out == {"status": "refused", "delivered": False}
    assert received(url) == []
    assert deps.cursors.get("acme", "planner", event["session_id"], now=deps.clock.now()) is None


def test_a_wake_naming_a_configured_heartbeat_runs_it(queue_event):
    from .conftest import schedule_heartbeat

    event, _ = queue_event
    assert call("heartbeat", schedule_heartbeat(event), sign=False)["status"] == "established"


def test_a_deleted_tenants_heartbeat_reads_writes_and_sends_nothing(queue_event, clock, deps):
    """`fleetmem tenant delete` leaves the tenant's tombstone; a wake the deploy config still
    names for it must neither deliver its changes nor create a session cursor."""
    from fleetmem.tokens import mark_tenant_deleted

    event, url = queue_event
    call("heartbeat", event)
    clock.advance(minutes=1)
    put_page("companies/acme", "Renewal call on Thursday.")
    mark_tenant_deleted(deps.clients, clock, event["tenant"])
    clock.advance(minutes=1)
    assert call("heartbeat", event)["status"] == "refused"
    assert received(url) == []
    fresh = {**event, "session_id": f"new-{uuid.uuid4().hex[:8]}"}
    assert call("heartbeat", fresh)["status"] == "refused"
    assert deps.cursors.get(event["tenant"], event["client_id"], fresh["session_id"], now=clock.now()) is None
