"""Heartbeat schedules: EventBridge Scheduler invokes the heartbeat function naming one configured
heartbeat; the function runs `delta` and delivers non-empty results to an SQS queue or, for HTTPS
webhooks, to an event bus whose rule forwards to an EventBridge API destination (retries + DLQ).

The schedule's input is the heartbeat's name only: tenant, client, session, budget and destination
reach the function in its environment (`FLEETMEM_HEARTBEATS`, from this config), so an invoke payload
cannot choose them (`fleetmem.transport.aws_lambda.heartbeat.handle_wake`)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from aws_cdk import aws_secretsmanager as sm
from aws_cdk import aws_sqs as sqs

from constructs import Construct
from fleetmem.config import ENV_HEARTBEATS
from fleetmem.transport.aws_lambda.heartbeat import WAKE_FIELD

from ..config import DeployConfig, DestinationConfig
from .common import READ_ACTIONS, WRITE_ACTIONS, Fn, FunctionFactory, acknowledge, grant_table
from .tables import Tables

DETAIL_TYPE = "fleetmem.delta"
SOURCE = "fleetmem.heartbeat"


def _queue(scope: Construct, id: str, name: str, dlq: sqs.IQueue | None = None) -> sqs.Queue:
    q = sqs.Queue(
        scope,
        id,
        queue_name=name,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=cdk.Duration.days(14),
        dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=5) if dlq else None,
    )
    if dlq is None:
        acknowledge(q, "AwsSolutions-SQS3", "This queue is itself a dead-letter queue.")
    return q


class Heartbeat(Construct):
    def __init__(
        self, scope: Construct, id: str, *, config: DeployConfig, factory: FunctionFactory, tables: Tables
    ) -> None:
        super().__init__(scope, id)
        self.dlq = _queue(self, "Dlq", f"{config.prefix}-heartbeat-dlq")
        self.fn: Fn = factory.make(
            self,
            "Fn",
            group="heartbeat",
            handler="functions.heartbeat.handler.handler",
            description="fleetmem heartbeat: scheduled delta -> SQS / webhook",
        )
        for logical in ("facts", "pages"):
            grant_table(tables[logical], self.fn.role, READ_ACTIONS[logical])
        grant_table(tables["cursors"], self.fn.role, READ_ACTIONS["cursors"] + WRITE_ACTIONS["cursors"])

        self.queues: dict[str, sqs.Queue] = {}
        self.bus: events.EventBus | None = None
        payload_dest: dict[str, dict[str, str]] = {}
        for name, d in config.destinations.items():
            if d.type == "sqs":
                q = _queue(self, f"Queue-{name}", f"{config.prefix}-{name}", dlq=self.dlq)
                q.grant_send_messages(self.fn.role)
                self.queues[name] = q
                payload_dest[name] = {"type": "sqs", "queue_url": q.queue_url, "name": name}
            else:
                payload_dest[name] = self._webhook(config, name, d)

        table = {
            h.name: {
                "tenant": h.tenant,
                "client_id": h.client_id,
                "session_id": h.session_id,
                "budget_tokens": h.budget_tokens,
                "destination": payload_dest[h.destination],
            }
            for h in config.heartbeats
        }
        self.fn.function.add_environment(ENV_HEARTBEATS, cdk.Stack.of(self).to_json_string(table))

        self.schedules = self._schedules(config)
        self.all_queues = [self.dlq, *self.queues.values()]

    def _webhook(self, config: DeployConfig, name: str, d: DestinationConfig) -> dict[str, str]:
        """An HTTPS destination: the heartbeat bus (made once), the shared secret the receiver
        checks, an API destination and the rule that sends this destination's events to it."""
        if self.bus is None:
            self.bus = events.EventBus(self, "Bus", event_bus_name=f"{config.prefix}-heartbeat")
            self.bus.grant_put_events_to(self.fn.role)
        secret = sm.Secret(
            self,
            f"WebhookSecret-{name}",
            description=f"Shared secret sent as X-Fleetmem-Key to {name}",
            generate_secret_string=sm.SecretStringGenerator(exclude_punctuation=True, password_length=40),
        )
        acknowledge(
            secret,
            "AwsSolutions-SMG4",
            "Webhook shared secret: rotate together with the receiver (see docs/operate.md).",
        )
        conn = events.Connection(
            self,
            f"Conn-{name}",
            authorization=events.Authorization.api_key("X-Fleetmem-Key", secret.secret_value),
        )
        dest = events.ApiDestination(
            self,
            f"Dest-{name}",
            connection=conn,
            endpoint=d.url,
            http_method=events.HttpMethod.POST,
            rate_limit_per_second=d.rate_per_second,
        )
        events.Rule(
            self,
            f"Rule-{name}",
            event_bus=self.bus,
            event_pattern=events.EventPattern(
                source=[SOURCE], detail_type=[DETAIL_TYPE], detail={"destination": [name]}
            ),
            targets=[
                targets.ApiDestination(
                    dest,
                    dead_letter_queue=self.dlq,
                    retry_attempts=10,
                    max_event_age=cdk.Duration.hours(24),
                    event=events.RuleTargetInput.from_event_path("$.detail"),
                )
            ],
        )
        return {"type": "https", "bus": self.bus.event_bus_name, "name": name}

    def _schedules(self, config: DeployConfig) -> list[scheduler.Schedule]:
        """One EventBridge schedule per configured heartbeat, waking the function with its name."""
        schedules: list[scheduler.Schedule] = []
        for h in config.heartbeats:
            expr = scheduler.ScheduleExpression.expression(
                h.schedule, cdk.TimeZone.of(h.timezone) if h.timezone else None
            )
            schedules.append(
                scheduler.Schedule(
                    self,
                    f"Schedule-{h.name}",
                    schedule_name=config.heartbeat_schedule_name(h.name),
                    schedule=expr,
                    target=scheduler_targets.LambdaInvoke(
                        self.fn.alias,
                        input=scheduler.ScheduleTargetInput.from_object({WAKE_FIELD: h.name}),
                        dead_letter_queue=self.dlq,
                        retry_attempts=3,
                        max_event_age=cdk.Duration.hours(1),
                    ),
                    description=f"heartbeat {h.name}: delta for {h.tenant}/{h.client_id}/{h.session_id}",
                )
            )
        return schedules
