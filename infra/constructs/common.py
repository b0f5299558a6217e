"""The one way this app makes a Lambda function: its own role, its own log group, JSON logs,
X-Ray, arm64 by default, the shared code asset, and a published version behind the `live` alias.

Everything that calls a function calls the alias (API Gateway, the edge's invokes, the stream and
schedule triggers, Secrets Manager), so a deploy moves every caller to the new version at once, or
gradually when `release.canary` is on (infra/constructs/release.py)."""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs

from constructs import Construct
from fleetmem import __version__
from fleetmem.transport.aws_lambda.runtime import ENV_FUNCTION_GROUP

from ..config import DeployConfig

#: The alias every caller invokes; the edge names `<function>:live` (`qualified_name`).
LIVE_ALIAS = "live"
#: Environment variable holding the fleetmem package version each function runs.
ENV_VERSION = "FLEETMEM_VERSION"

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}
_RUNTIMES = {
    "3.12": lambda_.Runtime.PYTHON_3_12,
    "3.13": lambda_.Runtime.PYTHON_3_13,
    "3.14": lambda_.Runtime.PYTHON_3_14,
}


def retention(config: DeployConfig) -> logs.RetentionDays:
    return _RETENTION.get(config.log_retention_days, logs.RetentionDays.ONE_MONTH)


def acknowledge(scope: Construct, rule: str, reason: str) -> None:
    """Acknowledge one cdk-nag rule on `scope` and everything below it — always with a reason."""
    if not reason.strip():
        raise ValueError("every acknowledgment needs a reason")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason))


def arn_ref(construct: Construct) -> str:
    """How cdk-nag prints `Fn::GetAtt <resource>.Arn` inside a finding id."""
    child = construct.node.default_child or construct
    return f"<{cdk.Stack.of(construct).get_logical_id(child)}.Arn>"  # type: ignore[arg-type]


# The DynamoDB actions each table's adapter calls (shared/fleetmem/adapters/aws), split into what a
# reader and what a writer needs. TransactWriteItems has no IAM action of its own: DynamoDB
# authorises each Put/Update/Delete inside it as PutItem/UpdateItem/DeleteItem on its table.
# Nothing scans (the admin function lists one tenant's clients and cursors through their
# `by_tenant` indexes; only the operator's CLI lists every tenant's) or describes a table.
READ_ACTIONS: dict[str, tuple[str, ...]] = {
    "facts": ("GetItem", "BatchGetItem", "Query"),
    "pages": ("GetItem", "BatchGetItem", "Query"),
    "cursors": ("GetItem", "Query"),
    "audit": ("Query",),
    "clients": ("GetItem", "Query"),
    "idempotency": (),
}
WRITE_ACTIONS: dict[str, tuple[str, ...]] = {
    # a fact is put (and its superseded one updated) in one transaction; the sequence counter is
    # an UpdateItem. Only purge deletes a fact: see PURGE_ACTIONS.
    "facts": ("PutItem", "UpdateItem"),
    # a page put/delete replaces its derived rows (Delete + Put in a transaction, or BatchWriteItem
    # when they do not fit one) and bumps the change counter (Update).
    "pages": ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"),
    "cursors": ("PutItem", "DeleteItem"),  # conditional put; evicting the oldest session
    # claim, complete, release; GetItem because a failed conditional put asks for the stored item
    # back (ReturnValuesOnConditionCheckFailure=ALL_OLD), which is a read of that item
    "idempotency": ("PutItem", "UpdateItem", "DeleteItem", "GetItem"),
    "audit": ("PutItem", "GetItem"),  # rows ride in transactions or a conditional put (ALL_OLD, as above)
    # create_token: a conditional put (ALL_OLD: GetItem, a read grant); revoke_token: an update
    "clients": ("PutItem", "UpdateItem"),
}
PURGE_ACTIONS: dict[str, tuple[str, ...]] = {"facts": ("DeleteItem",)}
# The authorizer records a token's last use on its clients row (a conditional UpdateItem of
# `last_used_at`, at most once a minute per token and sandbox: fleetmem.tokens.ApiTokenAuth).
TOUCH_ACTIONS: dict[str, tuple[str, ...]] = {"clients": ("UpdateItem",)}
# D22 write receipts (get/list/cancel_write_request): read one record, Query the `by_owner` index,
# and mark a running one cancelled (a conditional UpdateItem). No put or delete: receipts are made
# and dropped by the writes themselves.
RECEIPT_ACTIONS: dict[str, tuple[str, ...]] = {"idempotency": ("GetItem", "Query", "UpdateItem")}


def grant_table(table, role: iam.IRole, actions: tuple[str, ...] | list[str]) -> None:
    """Exactly `actions` on one table and its own `index/*` ARN (Query on its GSIs needs it)."""
    if not actions:
        return
    arn = table.table_arn
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=[f"dynamodb:{a}" for a in sorted(set(actions))], resources=[arn, f"{arn}/index/*"])
    )
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{arn_ref(table)}/index/*]",
        "Query on this table's own global secondary indexes (table/index/*); no other table.",
    )


def qualified_name(function_name: str) -> str:
    """The alias-qualified name a caller invokes (`<function>:live`)."""
    return f"{function_name}:{LIVE_ALIAS}"


class LiveFunction(lambda_.Function):
    """A function whose event sources (stream mappings) are attached to its `live` alias, so a
    construct that adds one through the function still triggers the alias."""

    live: lambda_.Alias | None = None

    def add_event_source(self, source: lambda_.IEventSource) -> None:
        if self.live is None:
            raise RuntimeError("the live alias is made with the function (FunctionFactory.make)")
        source.bind(self.live)


@dataclass
class Fn:
    function: lambda_.Function
    role: iam.Role
    log_group: logs.LogGroup
    group: str
    #: The `live` alias of the function's current version: what every caller invokes.
    alias: lambda_.Alias


class FunctionFactory:
    """Holds what every function shares (asset, runtime, base environment)."""

    def __init__(self, config: DeployConfig, base_env: dict[str, str]) -> None:
        self.config = config
        self.base_env = base_env
        self.code = lambda_.Code.from_asset(str(config.asset_path()))
        self.runtime = _RUNTIMES[config.python_runtime]
        self.arch = lambda_.Architecture.ARM_64 if config.architecture == "arm64" else lambda_.Architecture.X86_64

    def make(
        self,
        scope: Construct,
        id: str,
        *,
        group: str,
        handler: str,
        description: str,
        env: dict[str, str] | None = None,
        service: str | None = None,
    ) -> Fn:
        cfg = self.config
        name = f"{cfg.prefix}-{group.replace('_', '-')}"
        role, log_group = self._role_and_logs(scope, id, name)
        size = cfg.size_for(group)
        snap = group in cfg.snap_start_groups()
        function = LiveFunction(
            scope,
            id,
            function_name=name,
            description=description,
            runtime=self.runtime,
            architecture=self.arch,
            handler=handler,
            code=self.code,
            role=role,
            memory_size=size.memory_mb,
            timeout=cdk.Duration.seconds(size.timeout_s),
            reserved_concurrent_executions=size.reserved_concurrency,
            environment={
                **self.base_env,
                ENV_VERSION: __version__,
                "POWERTOOLS_SERVICE_NAME": service or group,
                ENV_FUNCTION_GROUP: group,
                **(env or {}),
            },
            # SnapStart snapshots each published version's init (runtime.prewarm) and restores it
            # per sandbox (runtime.after_restore re-seeds and drops init's clients): config
            # `cold_start`, docs/deploy.md section 4g.
            # A SnapStart version's snapshot is billed while the version exists: the version a
            # deploy replaces is deleted in the deploy's cleanup, after the alias has moved off it
            # (`current_version`'s removal policy stays DESTROY, the default; docs/deploy.md 4g).
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if snap else None,
            tracing=lambda_.Tracing.ACTIVE,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            log_group=log_group,
        )
        if cfg.python_runtime != max(_RUNTIMES):
            acknowledge(
                function,
                "AwsSolutions-L1",
                "The runtime is the newest Python the asset test (tests/functions/test_asset.py) runs "
                "the built asset under on the test machine; see docs/deploy.md section 7.",
            )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "Only X-Ray PutTraceSegments/PutTelemetryRecords use '*': X-Ray has no resource-level permissions.",
        )
        # The version's logical id hashes the function's configuration (code, environment, size), so
        # each deploy that changes any of it publishes a new version and moves the alias to it.
        alias = lambda_.Alias(
            scope,
            f"{id}Live",
            alias_name=LIVE_ALIAS,
            version=function.current_version,
            description=f"fleetmem {__version__}",
            # warm sandboxes are the edge's setting only (FunctionSize.provisioned_concurrency)
            provisioned_concurrent_executions=(size.provisioned_concurrency or None) if group == "mcp" else None,
        )
        function.live = alias
        return Fn(function, role, log_group, group, alias)

    def _role_and_logs(self, scope: Construct, id: str, name: str) -> tuple[iam.Role, logs.LogGroup]:
        """The function's own role and its log group (with the stage's retention), the role
        allowed to write to that group only."""
        role = iam.Role(
            scope,
            f"{id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{name}: only what this function needs",
        )
        log_group = logs.LogGroup(
            scope,
            f"{id}Logs",
            log_group_name=f"/aws/lambda/{name}",
            retention=retention(self.config),
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn]
            )
        )
        return role, log_group
