"""The public edge: a regional REST API with `POST /mcp` (the MCP edge function) and
`POST /v1/<tool>` (straight to that tool's function), a cached Lambda REQUEST authorizer, one API
key per configured client (plus a shared default key) in per-tier usage plans, and access logs.

The authorizer returns each caller's API key as `usageIdentifierKey`, so throttles and quotas
follow the credential, not the network. Its 401 carries `WWW-Authenticate` through the gateway
response; throttling and quota answer 429 in the protocol's error-envelope shape.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as sm

from constructs import Construct
from fleetmem.config import (
    ENV_AUTHORIZATION_SERVER,
    ENV_COGNITO_CLIENTS,
    ENV_COGNITO_ISSUER,
    ENV_COGNITO_RESOURCE_SERVER,
    ENV_PUBLIC_URL,
    ENV_USAGE_KEY_SECRETS,
)
from fleetmem.lambda_routes import TOOL_FUNCTIONS_ENV
from fleetmem.transport.aws_lambda.proxy import gateway_error_body, www_authenticate

from ..config import DeployConfig
from .client_auth import RESOURCE_SERVER, ClientAuth
from .common import Fn, FunctionFactory, acknowledge, grant_table, retention
from .tables import Tables
from .tool_functions import ToolFunctions

DEFAULT_KEY = "*"


def _envelope(code: str, message: str) -> str:
    return json.dumps(gateway_error_body(code, message, correlation_id="$context.requestId"))


class Edge(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: DeployConfig,
        factory: FunctionFactory,
        tables: Tables,
        tools: ToolFunctions,
        auth: ClientAuth,
    ) -> None:
        super().__init__(scope, id)
        stack = cdk.Stack.of(self)

        # -- per-client API keys (values generated into Secrets Manager, never in the template) --
        self.key_secrets: dict[str, sm.Secret] = {}
        self.keys: dict[str, apigw.ApiKey] = {}
        key_owners = [(c.client_id, c.tier) for c in config.clients] + [(DEFAULT_KEY, config.default_tier)]
        for client_id, _tier in key_owners:
            label = "Default" if client_id == DEFAULT_KEY else client_id
            secret = sm.Secret(
                self,
                f"UsageKey-{label}",
                description=f"{config.prefix} API Gateway usage key for {label}",
                generate_secret_string=sm.SecretStringGenerator(exclude_punctuation=True, password_length=40),
            )
            acknowledge(
                secret,
                "AwsSolutions-SMG4",
                "A usage-plan key is a metering identifier, not a credential (callers never see it; the "
                "authorizer attaches it). Rotate by re-deploying; see docs/operate.md.",
            )
            self.key_secrets[client_id] = secret
            self.keys[client_id] = apigw.ApiKey(
                self,
                f"Key-{label}",
                api_key_name=f"{config.prefix}-{label if label != 'Default' else 'default'}",
                value=secret.secret_value.unsafe_unwrap(),
                enabled=True,
            )

        # -- functions ------------------------------------------------------------------------
        self.edge: Fn = factory.make(
            self,
            "Mcp",
            group="mcp",
            handler="functions.mcp.handler.handler",
            description="fleetmem MCP edge (streamable HTTP, stateless JSON)",
            env={
                TOOL_FUNCTIONS_ENV: stack.to_json_string(tools.tool_function_names),
                ENV_AUTHORIZATION_SERVER: auth.issuer,
                **({ENV_PUBLIC_URL: config.public_url.rstrip("/")} if config.public_url else {}),
            },
        )
        for fn in tools.by_group.values():
            # Only the edge may invoke tool functions (exact ARNs, no version wildcard).
            self.edge.role.add_to_principal_policy(
                iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[fn.function.function_arn])
            )

        self.authorizer_fn: Fn = factory.make(
            self,
            "Authorizer",
            group="authorizer",
            handler="functions.authorizer.handler.handler",
            description="fleetmem REQUEST authorizer: API token or Cognito access token",
            env={
                ENV_COGNITO_ISSUER: auth.issuer,
                ENV_COGNITO_CLIENTS: auth.clients_by_app_id(config),
                ENV_COGNITO_RESOURCE_SERVER: RESOURCE_SERVER,
                ENV_USAGE_KEY_SECRETS: stack.to_json_string(
                    {cid: s.secret_arn for cid, s in self.key_secrets.items()}
                ),
            },
        )
        grant_table(tables["clients"], self.authorizer_fn.role)
        for secret in self.key_secrets.values():
            secret.grant_read(self.authorizer_fn.role)

        # -- the REST API ----------------------------------------------------------------------
        access_logs = logs.LogGroup(
            self, "AccessLogs", retention=retention(config), removal_policy=cdk.RemovalPolicy.DESTROY
        )
        self.api = apigw.RestApi(
            self,
            "Api",
            rest_api_name=config.prefix,
            description="fleetmem: remote MCP memory for agent fleets",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            api_key_source_type=apigw.ApiKeySourceType.AUTHORIZER,
            cloud_watch_role=True,
            cloud_watch_role_removal_policy=cdk.RemovalPolicy.DESTROY,
            deploy_options=apigw.StageOptions(
                stage_name=config.stage,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=False,
                ),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                metrics_enabled=True,
                tracing_enabled=True,
            ),
        )
        acknowledge(
            self.api,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AmazonAPIGatewayPushToCloudWatchLogs]",
            "API Gateway's account-level CloudWatch role uses the AWS-managed "
            "AmazonAPIGatewayPushToCloudWatchLogs policy, the documented way to enable execution logs.",
        )
        acknowledge(
            self.api,
            "AwsSolutions-APIG3",
            "No WAF by default: every route needs a credential checked by the authorizer and is "
            "throttled per client by usage plans; attach a WebACL per stage if the threat model needs it.",
        )
        acknowledge(
            self.api,
            "AwsSolutions-COG4",
            "Callers present either a fleetmem API token or a Cognito access token; one Lambda REQUEST "
            "authorizer verifies both (JWT signature, issuer, expiry, client and scopes), which a "
            "Cognito-only authorizer cannot.",
        )
        self.authorizer = apigw.RequestAuthorizer(
            self,
            "RequestAuthorizer",
            handler=self.authorizer_fn.function,
            identity_sources=[apigw.IdentitySource.header("Authorization")],
            results_cache_ttl=cdk.Duration.minutes(5),
            authorizer_name=f"{config.prefix}-authorizer",
        )
        validator = self.api.add_request_validator(
            "Validator", validate_request_body=True, validate_request_parameters=True
        )
        secured = dict(authorizer=self.authorizer, api_key_required=True, request_validator=validator)

        mcp = self.api.root.add_resource("mcp")
        warm = config.size_for("mcp").provisioned_concurrency
        edge_target: lambda_.IFunction = self.edge.function
        if warm:
            edge_target = lambda_.Alias(
                self,
                "McpLive",
                alias_name="live",
                version=self.edge.function.current_version,
                provisioned_concurrent_executions=warm,
            )
        edge_integration = apigw.LambdaIntegration(edge_target, proxy=True)
        # GET/DELETE reach the edge so it can answer 405 itself (the SDK would stream GET forever).
        for method in ("POST", "GET", "DELETE"):
            mcp.add_method(method, edge_integration, **secured)

        v1 = self.api.root.add_resource("v1")
        for tool, fn in tools.by_tool.items():
            v1.add_resource(tool).add_method(
                "POST", apigw.LambdaIntegration(fn.function, proxy=True), **secured
            )

        # -- 401 with WWW-Authenticate; 429 in the envelope's shape --------------------------
        base_url = cdk.Fn.join(
            "",
            [
                "https://",
                self.api.rest_api_id,
                ".execute-api.",
                stack.region,
                ".",
                stack.url_suffix,
                f"/{config.stage}",
            ],
        )
        www = f"'{www_authenticate(config.public_url.rstrip('/') if config.public_url else base_url)}'"
        json_type = "application/json"
        self.api.add_gateway_response(
            "Unauthorized",
            type=apigw.ResponseType.UNAUTHORIZED,
            status_code="401",
            response_headers={"WWW-Authenticate": www, "Content-Type": f"'{json_type}'"},
            templates={
                json_type: _envelope("unauthorized", "Missing, unknown, expired or revoked credential.")
            },
        )
        self.api.add_gateway_response(
            "AccessDenied",
            type=apigw.ResponseType.ACCESS_DENIED,
            status_code="401",
            response_headers={"WWW-Authenticate": www, "Content-Type": f"'{json_type}'"},
            templates={json_type: _envelope("unauthorized", "Credential not accepted.")},
        )
        for rt, label in (
            (apigw.ResponseType.THROTTLED, "Throttled"),
            (apigw.ResponseType.QUOTA_EXCEEDED, "Quota"),
        ):
            self.api.add_gateway_response(
                label,
                type=rt,
                status_code="429",
                response_headers={"Retry-After": "'60'", "Content-Type": f"'{json_type}'"},
                templates={
                    json_type: _envelope("rate_limited", "This client's rate limit or quota is used up.")
                },
            )

        # Public by design: the OAuth protected-resource metadata (RFC 9728) tells a client where to
        # get a credential, and /health answers load balancers and uptime checks; neither holds data.
        well_known = self.api.root.add_resource(".well-known").add_resource("oauth-protected-resource")
        public = [
            well_known.add_method("GET", edge_integration, request_validator=validator),
            well_known.add_resource("mcp").add_method("GET", edge_integration, request_validator=validator),
            self.api.root.add_resource("health").add_method(
                "GET", edge_integration, request_validator=validator
            ),
        ]
        for method in public:
            acknowledge(
                method,
                "AwsSolutions-APIG4",
                "Public by design: OAuth protected-resource metadata (clients read it to learn where "
                "to get a credential) or the health check; neither exposes memory data.",
            )
            acknowledge(
                method,
                "AwsSolutions-COG4",
                "Public metadata/health route; no authorizer by design (RFC 9728).",
            )

        # -- usage plans: one per tier, each client's key in its tier ---------------------------
        self.plans: dict[str, apigw.UsagePlan] = {}
        for tier, t in config.tiers.items():
            self.plans[tier] = self.api.add_usage_plan(
                f"Plan-{tier}",
                name=f"{config.prefix}-{tier}",
                throttle=apigw.ThrottleSettings(rate_limit=t.rate_per_second, burst_limit=t.burst),
                quota=apigw.QuotaSettings(limit=t.quota_per_day, period=apigw.Period.DAY),
                api_stages=[apigw.UsagePlanPerApiStage(api=self.api, stage=self.api.deployment_stage)],
            )
        for client_id, tier in key_owners:
            self.plans[tier].add_api_key(self.keys[client_id])

        self.base_url = base_url
        self.mcp_url = cdk.Fn.join("", [base_url, "/mcp"])
