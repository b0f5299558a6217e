"""Alarms and one dashboard. Every alarm notifies one encrypted SNS topic, which every non-dev
stage's config must give a subscriber (`alarms.subscribers` / `alarms.email`, infra/config.py).
What each alarm means and what to do is in docs/operate.md.

Beside each function's errors, throttles and p99: the indexer's stream iterator age, the indexing
failures it reports (partial batch failures never count as Lambda errors), and on a managed search
domain its cluster status, free storage and JVM memory pressure. The dashboard shows the search lag
the indexer reports and the indexing failures next to what was kept for replay.

The limits a request meets (docs/deploy.md, "Limits, in the order they apply") each have an alarm:
WAF blocks (all rules, and any block by the flood guard), the API's 4xx share and its 429s, every
DynamoDB table's and index's throttle events, and Bedrock's throttles per model id used. API Gateway
publishes no 429 metric for a REST API and counts a gateway response whose status was changed (the
authorizer's 503) as 4XXError, so the 429s and the 5xx actually sent are counted from the access log
by metric filters (namespace `fleetmem/<stage>`)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs

from constructs import Construct

from ..config import AlarmSubscriber, DeployConfig
from .common import Fn
from .search import Search
from .tables import Tables
from .waf import FLOOD_METRIC

METRICS_NAMESPACE = "fleetmem"
AUTHORIZER_DENIED = "AuthorizerDenied"
#: Metrics the indexer function emits (Powertools, dimension service=indexer).
INDEXING_FAILURES = "IndexingFailures"
SEARCH_LAG_SECONDS = "SearchLagSeconds"
REPLAY_KEPT = "ReplayKept"
#: Metrics counted from the API's access log (per stage: the namespace is `fleetmem/<stage>`).
API_THROTTLED = "ApiThrottled"
API_SERVER_ERRORS = "ApiServerErrors"
FIVE_MIN = cdk.Duration.minutes(5)
ONE_MIN = cdk.Duration.minutes(1)


def subscription(scope: Construct, index: int, s: AlarmSubscriber) -> sns.ITopicSubscription:
    """The SNS subscription for one configured alarm subscriber."""
    if s.type == "email":
        return subs.EmailSubscription(s.endpoint)
    if s.type == "https":
        return subs.UrlSubscription(s.endpoint, protocol=sns.SubscriptionProtocol.HTTPS)
    if s.type == "sms":
        return subs.SmsSubscription(s.endpoint)
    if s.type == "sqs":
        return subs.SqsSubscription(sqs.Queue.from_queue_arn(scope, f"SubscriberQueue{index}", s.endpoint))
    return subs.LambdaSubscription(lambda_.Function.from_function_arn(scope, f"SubscriberFunction{index}", s.endpoint))


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
        search: Search,
        tables: Tables,
        access_logs: logs.ILogGroup,
        web_acl_name: str | None,
    ) -> None:
        super().__init__(scope, id)
        self.config = config
        self._alarm_topic(config)
        self.alarms: list[cw.Alarm] = []
        #: label -> (function, its error alarm): the rollback trigger of a canary release.
        self.error_alarms: dict[str, tuple[Fn, cw.Alarm]] = {}
        every_fn = {
            **{f"tool-{g}": f for g, f in tool_fns.items()},
            "edge": edge,
            "authorizer": authorizer,
            "indexer": indexer,
            "heartbeat": heartbeat,
        }
        error_metrics, latency_widgets = self._function_alarms(config, every_fn)
        for label, q in dlqs.items():
            self.alarm(
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
        self.alarm(
            "authorizer-denials",
            denied,
            config.alarms.authorizer_denials_per_5min,
            "Many rejected credentials: a misconfigured client, a revoked token still in use, or probing.",
        )
        api_5xx, limit_widgets = self._api_alarms(config, api_name, access_logs)
        if web_acl_name is not None:
            limit_widgets.append(self._waf_alarms(config, web_acl_name, self.alarm))
        limit_widgets.append(self._dynamodb_alarms(config, tables, self.alarm))
        limit_widgets.append(self._bedrock_alarms(config, self.alarm))
        search_widgets = self._search_alarms(config, indexer, search)

        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=config.prefix)
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Function errors", left=error_metrics, width=12),
            cw.GraphWidget(title="Authorizer denials / API 5xx", left=[denied], right=[api_5xx], width=12),
        )
        self.dashboard.add_widgets(*search_widgets)
        self.dashboard.add_widgets(*limit_widgets)
        self.dashboard.add_widgets(*latency_widgets)
        self.dashboard.add_widgets(cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24))

    def _alarm_topic(self, config: DeployConfig) -> None:
        """The encrypted SNS topic every alarm notifies, with the configured subscribers.

        A customer-managed key: CloudWatch alarms cannot publish to a topic encrypted with the
        AWS-managed SNS key (its policy cannot be changed to let cloudwatch.amazonaws.com use it)."""
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
        for i, subscriber in enumerate(config.alarms.all_subscribers()):
            self.topic.add_subscription(subscription(self, i, subscriber))
        self._action = cw_actions.SnsAction(self.topic)

    def alarm(
        self,
        id: str,
        metric: cw.IMetric,
        threshold: float,
        description: str,
        op: cw.ComparisonOperator = cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        periods: int = 1,
    ) -> cw.Alarm:
        """An alarm named `<prefix>-<id>` that notifies the topic (missing data is not breaching)."""
        a = cw.Alarm(
            self,
            id,
            alarm_name=f"{self.config.prefix}-{id}",
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            comparison_operator=op,
            alarm_description=description,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        a.add_alarm_action(self._action)
        self.alarms.append(a)
        return a

    def _function_alarms(
        self, config: DeployConfig, every_fn: dict[str, Fn]
    ) -> tuple[list[cw.IMetric], list[cw.IWidget]]:
        """Each function's errors and throttles; the p99 of the verbs and the edge. Returns the
        error metrics and the latency widgets for the dashboard."""
        latency_widgets: list[cw.IWidget] = []
        error_metrics: list[cw.IMetric] = []
        for label, fn in every_fn.items():
            f = fn.function
            errors = f.metric_errors(period=FIVE_MIN, statistic="Sum")
            error_metrics.append(errors.with_(label=label))
            self.error_alarms[label] = (
                fn,
                self.alarm(
                    f"{label}-errors", errors, 1, f"{f.function_name} raised unhandled errors (not tool errors)."
                ),
            )
            self.alarm(
                f"{label}-throttles",
                f.metric_throttles(period=FIVE_MIN, statistic="Sum"),
                1,
                f"{f.function_name} was throttled: concurrency limit reached.",
            )
            if label.startswith("tool-") or label == "edge":
                group = fn.group
                p99 = f.metric_duration(period=FIVE_MIN, statistic="p99")
                self.alarm(
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
        return error_metrics, latency_widgets

    def _api_alarms(
        self, config: DeployConfig, api_name: str, access_logs: logs.ILogGroup
    ) -> tuple[cw.IMetric, list[cw.IWidget]]:
        """The API's 5xx (as sent), its 4xx share and its 429s. Returns the 5xx metric and the
        limit widgets for the dashboard."""

        def api_metric(name: str) -> cw.Metric:
            return cw.Metric(
                namespace="AWS/ApiGateway",
                metric_name=name,
                dimensions_map={"ApiName": api_name, "Stage": config.stage},
                period=FIVE_MIN,
                statistic="Sum",
            )

        sent_5xx = self._from_access_log(access_logs, "Api5xxSent", API_SERVER_ERRORS, "5*")
        api_5xx = cw.MathExpression(
            expression="MAX([FILL(gateway, 0), FILL(sent, 0)])",
            using_metrics={"gateway": api_metric("5XXError"), "sent": sent_5xx},
            label="API 5xx",
            period=FIVE_MIN,
        )
        self.alarm(
            "api-5xx",
            api_5xx,
            5,
            "The API answered 5xx: integration failures, or the authorizer failed, timed out or was throttled "
            "(503 unavailable).",
        )
        api_4xx_share = cw.MathExpression(
            expression=f"IF(n >= {config.alarms.api_4xx_min_requests}, FILL(e, 0) / n, 0)",
            using_metrics={"e": api_metric("4XXError"), "n": api_metric("Count")},
            label="API 4xx share",
            period=FIVE_MIN,
        )
        self.alarm(
            "api-4xx-rate",
            api_4xx_share,
            config.alarms.api_4xx_rate,
            f"At least {config.alarms.api_4xx_rate:.0%} of {config.alarms.api_4xx_min_requests} or more API "
            "requests in 5 minutes answered 4xx (refused credentials, unconfigured clients, throttling).",
        )
        throttled = self._from_access_log(access_logs, "Api429", API_THROTTLED, "429")
        self.alarm(
            "api-429",
            throttled,
            config.alarms.api_429_per_5min,
            "The API answered 429: a client's usage plan (rate or daily quota) or the stage throttle refused requests.",
        )
        return api_5xx, [cw.GraphWidget(title="API 429 / 4xx share", left=[throttled], right=[api_4xx_share], width=12)]

    def _from_access_log(self, access_logs: logs.ILogGroup, id: str, metric_name: str, status: str) -> cw.Metric:
        """What the access log saw: the status each caller got, whatever API Gateway's own metrics
        count it as. Its `status` field is a JSON string (AccessLogFormat.json_with_standard_fields)."""
        f = logs.MetricFilter(
            self,
            id,
            log_group=access_logs,
            metric_namespace=f"{METRICS_NAMESPACE}/{self.config.stage}",
            metric_name=metric_name,
            filter_pattern=logs.FilterPattern.string_value("$.status", "=", status),
            metric_value="1",
        )
        return f.metric(period=FIVE_MIN, statistic="Sum")

    def _search_alarms(self, config: DeployConfig, indexer: Fn, search: Search) -> list[cw.IWidget]:
        """The search index: is the indexer keeping up, and is the cluster healthy."""

        def indexer_metric(name: str, statistic: str) -> cw.Metric:
            return cw.Metric(
                namespace=METRICS_NAMESPACE,
                metric_name=name,
                dimensions_map={"service": "indexer"},
                period=FIVE_MIN,
                statistic=statistic,
            )

        # IteratorAge of the function (all its versions and aliases): how old the newest stream
        # record the indexer has just read was, in milliseconds.
        iterator_age = indexer.function.metric("IteratorAge", period=FIVE_MIN, statistic="Maximum")
        self.alarm(
            "indexer-iterator-age",
            iterator_age,
            config.alarms.iterator_age_s * 1000,
            f"The indexer trails its streams by {config.alarms.iterator_age_s} s or more: search misses recent writes.",
        )
        failures = indexer_metric(INDEXING_FAILURES, "Sum")
        self.alarm(
            "indexing-failures",
            failures,
            0,
            "Stream records could not be indexed (partial batch failures; they are retried, then kept for "
            "replay): search misses them until they index.",
            cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        search_widgets: list[cw.IWidget] = [
            cw.GraphWidget(
                title="Search lag (s) / stream iterator age (ms)",
                left=[indexer_metric(SEARCH_LAG_SECONDS, "Maximum")],
                right=[iterator_age],
                width=12,
            ),
            cw.GraphWidget(
                title="Indexing failures / kept for replay",
                left=[failures, indexer_metric(REPLAY_KEPT, "Sum")],
                width=12,
            ),
        ]
        if search.flavour == "domain":
            search_widgets.append(self._domain_alarms(config, search, self.alarm))
        return search_widgets

    def _waf_alarms(self, config: DeployConfig, acl: str, alarm) -> cw.IWidget:
        """Requests the web ACL blocked, all rules together, and any block by the flood guard (an
        address sending well-formed credentials beyond the stage's rate)."""
        region = cdk.Stack.of(self).region

        def blocked(rule: str) -> cw.Metric:
            return cw.Metric(
                namespace="AWS/WAFV2",
                metric_name="BlockedRequests",
                dimensions_map={"WebACL": acl, "Region": region, "Rule": rule},
                period=FIVE_MIN,
                statistic="Sum",
            )

        every, flood = blocked("ALL"), blocked(FLOOD_METRIC)
        alarm(
            "waf-blocked",
            every,
            config.alarms.waf_blocked_per_5min,
            f"WAF blocked {config.alarms.waf_blocked_per_5min} or more requests in 5 minutes (per-IP limits "
            "and the managed rule groups together).",
        )
        alarm(
            "waf-flood-guard",
            flood,
            1,
            "WAF's flood guard blocked an address sending well-formed credentials faster than the stage allows "
            f"({config.waf_flood_limit()} per 5 minutes): a fleet outgrowing the stage, or made-up tokens.",
        )
        return cw.GraphWidget(title="WAF blocked: all rules / flood guard", left=[every], right=[flood], width=12)

    @staticmethod
    def _dynamodb_alarms(config: DeployConfig, tables: Tables, alarm) -> cw.IWidget:
        """Read and write throttle events per table and per global secondary index. A throttled
        index also throttles the writes to its table (its writes back up), so both alarm."""

        def throttles(label: str, dims: dict[str, str]) -> cw.MathExpression:
            def m(name: str) -> cw.Metric:
                return cw.Metric(
                    namespace="AWS/DynamoDB", metric_name=name, dimensions_map=dims, period=FIVE_MIN, statistic="Sum"
                )

            # ids unique per table: the dashboard graphs every table's expression together
            r, w = f"r_{dims['TableName'].replace('-', '_')}", f"w_{dims['TableName'].replace('-', '_')}"
            return cw.MathExpression(
                expression=f"FILL({r}, 0) + FILL({w}, 0)",
                using_metrics={r: m("ReadThrottleEvents"), w: m("WriteThrottleEvents")},
                label=label,
                period=FIVE_MIN,
            )

        threshold = config.alarms.dynamodb_throttles_per_5min
        per_table = []
        for logical, spec in tables.specs.items():
            name = spec.physical_name(config.prefix)
            table = throttles(logical, {"TableName": name})
            per_table.append(table)
            alarm(
                f"ddb-{logical}-throttles",
                table,
                threshold,
                f"DynamoDB throttled {threshold} or more reads/writes of {name} in 5 minutes: callers wait on "
                "SDK retries, then get unavailable.",
            )
            for gsi in spec.gsis:
                alarm(
                    f"ddb-{logical}-{gsi.name}-throttles",
                    throttles(f"{logical}/{gsi.name}", {"TableName": name, "GlobalSecondaryIndexName": gsi.name}),
                    threshold,
                    f"DynamoDB throttled {threshold} or more reads/writes of index {gsi.name} of {name} in 5 "
                    "minutes (an index's write throttling also throttles writes to its table).",
                )
        return cw.GraphWidget(title="DynamoDB throttle events per table", left=per_table, width=12)

    @staticmethod
    def _bedrock_alarms(config: DeployConfig, alarm) -> cw.IWidget:
        """Bedrock InvocationThrottles per model id the stage calls: the embedding model (every write
        and recall) and the LLM of synthesize when one is configured."""
        models = {"embedding": config.embedding.model, **({"llm": config.llm.model} if config.llm.model else {})}
        threshold = config.alarms.bedrock_throttles_per_5min
        metrics = []
        for role, model in models.items():
            m = cw.Metric(
                namespace="AWS/Bedrock",
                metric_name="InvocationThrottles",
                dimensions_map={"ModelId": model},
                period=FIVE_MIN,
                statistic="Sum",
                label=model,
            )
            metrics.append(m)
            alarm(
                f"bedrock-{role}-throttles",
                m,
                threshold,
                f"Bedrock throttled {threshold} or more calls to {model} in 5 minutes: "
                + (
                    "writes index late and recall answers degraded (search_degraded)."
                    if role == "embedding"
                    else "synthesize answers with its extractive fallback."
                ),
            )
        return cw.GraphWidget(title="Bedrock throttles per model", left=metrics, width=12)

    @staticmethod
    def _domain_alarms(config: DeployConfig, search: Search, alarm) -> cw.IWidget:
        """Cluster status red / yellow, free storage, JVM memory pressure of the managed domain (an
        OpenSearch Serverless collection manages nodes, storage and heap itself and publishes none
        of these: there the indexing-failure and iterator-age alarms watch the index)."""
        domain = search.domain
        red = domain.metric_cluster_status_red(period=ONE_MIN, statistic="Maximum")
        yellow = domain.metric_cluster_status_yellow(period=ONE_MIN, statistic="Maximum")
        alarm(
            "search-cluster-red",
            red,
            1,
            "At least one primary shard is unassigned: searches miss documents and the indexer's writes to it fail.",
        )
        alarm(
            "search-cluster-yellow",
            yellow,
            1,
            "At least one replica shard is unassigned for 5 minutes: a node loss would lose search data.",
            periods=5,
        )
        free_mb = config.search.volume_gb * 1024 * config.alarms.free_storage_fraction
        free = domain.metric_free_storage_space(period=FIVE_MIN, statistic="Minimum")
        alarm(
            "search-free-storage",
            free,
            free_mb,
            f"A data node has less than {free_mb:.0f} MB ({config.alarms.free_storage_fraction:.0%} of "
            f"{config.search.volume_gb} GB) free: at 5 % free OpenSearch blocks writes.",
            cw.ComparisonOperator.LESS_THAN_THRESHOLD,
        )
        jvm = domain.metric_jvm_memory_pressure(period=FIVE_MIN, statistic="Maximum")
        alarm(
            "search-jvm-pressure",
            jvm,
            config.alarms.jvm_memory_pressure_pct,
            f"JVM memory pressure above {config.alarms.jvm_memory_pressure_pct} % for 15 minutes: the "
            "cluster is close to refusing requests (circuit breakers) or to out-of-memory.",
            cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            periods=3,
        )
        return cw.GraphWidget(
            title="Search cluster: red / yellow, JVM pressure (%)",
            left=[red, yellow],
            right=[jvm],
            width=12,
        )
