"""Alarms and one dashboard. Every alarm notifies one encrypted SNS topic (optionally e-mailed).
What each alarm means and what to do is in docs/operate.md."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs

from constructs import Construct

from ..config import DeployConfig
from .common import Fn

METRICS_NAMESPACE = "fleetmem"
AUTHORIZER_DENIED = "AuthorizerDenied"
FIVE_MIN = cdk.Duration.minutes(5)


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: DeployConfig,
        tool_fns: dict[str, Fn],
        edge: Fn,
        authorizer: Fn,
        indexer: Fn,
        heartbeat: Fn,
        dlqs: dict[str, sqs.IQueue],
        api_name: str,
    ) -> None:
        super().__init__(scope, id)
        # A customer-managed key: CloudWatch alarms cannot publish to a topic encrypted with the
        # AWS-managed SNS key (its policy cannot be changed to let cloudwatch.amazonaws.com use it).
        self.key = kms.Key(
            self,
            "AlarmTopicKey",
            description=f"{config.prefix}: encrypts the alarm topic; CloudWatch may use it to publish",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN if config.tables.retain_on_delete else cdk.RemovalPolicy.DESTROY,
            pending_window=cdk.Duration.days(7),
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy "*" means this key
                conditions={"StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account}},
            )
        )
        self.topic = sns.Topic(
            self,
            "Alarms",
            topic_name=f"{config.prefix}-alarms",
            enforce_ssl=True,
            master_key=self.key,
        )
        if config.alarms.email:
            self.topic.add_subscription(subs.EmailSubscription(config.alarms.email))
        action = cw_actions.SnsAction(self.topic)
        self.alarms: list[cw.Alarm] = []

        def alarm(
            id: str,
            metric: cw.IMetric,
            threshold: float,
            description: str,
            op: cw.ComparisonOperator = cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            periods: int = 1,
        ) -> cw.Alarm:
            a = cw.Alarm(
                self,
                id,
                alarm_name=f"{config.prefix}-{id}",
                metric=metric,
                threshold=threshold,
                evaluation_periods=periods,
                comparison_operator=op,
                alarm_description=description,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
            a.add_alarm_action(action)
            self.alarms.append(a)
            return a

        every_fn = {
            **{f"tool-{g}": f for g, f in tool_fns.items()},
            "edge": edge,
            "authorizer": authorizer,
            "indexer": indexer,
            "heartbeat": heartbeat,
        }
        latency_widgets: list[cw.IWidget] = []
        error_metrics: list[cw.IMetric] = []
        for label, fn in every_fn.items():
            f = fn.function
            errors = f.metric_errors(period=FIVE_MIN, statistic="Sum")
            error_metrics.append(errors.with_(label=label))
            alarm(
                f"{label}-errors", errors, 1, f"{f.function_name} raised unhandled errors (not tool errors)."
            )
            alarm(
                f"{label}-throttles",
                f.metric_throttles(period=FIVE_MIN, statistic="Sum"),
                1,
                f"{f.function_name} was throttled: concurrency limit reached.",
            )
            if label.startswith("tool-") or label == "edge":
                group = fn.group
                p99 = f.metric_duration(period=FIVE_MIN, statistic="p99")
                alarm(
                    f"{label}-p99",
                    p99,
                    config.p99_ms_for(group),
                    f"{f.function_name} p99 duration above {config.p99_ms_for(group)} ms.",
                    cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    periods=3,
                )
                latency_widgets.append(
                    cw.GraphWidget(
                        title=f"{group} duration",
                        width=6,
                        left=[f.metric_duration(period=FIVE_MIN, statistic=s) for s in ("p50", "p99")],
                    )
                )
        for label, q in dlqs.items():
            alarm(
                f"{label}-dlq",
                q.metric_approximate_number_of_messages_visible(period=FIVE_MIN, statistic="Max"),
                1,
                f"Messages are waiting in {label}: records that could not be processed.",
            )
        denied = cw.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=AUTHORIZER_DENIED,
            dimensions_map={"service": "authorizer"},
            period=FIVE_MIN,
            statistic="Sum",
        )
        alarm(
            "authorizer-denials",
            denied,
            config.alarms.authorizer_denials_per_5min,
            "Many rejected credentials: a misconfigured client, a revoked token still in use, or probing.",
        )
        api_5xx = cw.Metric(
            namespace="AWS/ApiGateway",
            metric_name="5XXError",
            dimensions_map={"ApiName": api_name, "Stage": config.stage},
            period=FIVE_MIN,
            statistic="Sum",
        )
        alarm("api-5xx", api_5xx, 5, "The API answered 5xx (integration or authorizer failures).")

        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=config.prefix)
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Function errors", left=error_metrics, width=12),
            cw.GraphWidget(title="Authorizer denials / API 5xx", left=[denied], right=[api_5xx], width=12),
        )
        self.dashboard.add_widgets(*latency_widgets)
        self.dashboard.add_widgets(cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24))
