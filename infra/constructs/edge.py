"""The public edge: a regional REST API with `POST /mcp` (the MCP edge function),
`POST /v1/<tool>` (straight to that tool's function), `GET /v1/tools` and `GET /v1/openapi.json`
(the edge function), a cached Lambda REQUEST authorizer, one usage plan and one API key per tier,
access logs and execution logs with retention.

Clients are data, not template: each credential's tier lives with it in the clients table (an API
token's item, a Cognito app client's mapping), and the authorizer returns that tier's API key as
`usageIdentifierKey`, so the tier's throttle and quota apply to the tier's clients together. A
stage with 1,000 clients synthesizes to the same template as one with 1; a client minted at run
time works on its next request. A credential in a tier the stage has no plan for gets the default
tier's key. Its 401 carries `WWW-Authenticate` through the gateway response; throttling and quota
answer 429 in the protocol's error-envelope shape, a failing authorizer 503 `unavailable`.

Usage keys are versioned (`api.usage_key_version`): a new version creates a new secret and a new
key per tier in the same deploy that points the authorizer at the new secrets, so the key API
Gateway knows and the key the authorizer hands out cannot diverge; the previous version's keys
stay in the plans so authorizer answers cached before the deploy keep working.

Unauthenticated routes (/health, the OAuth metadata) are throttled at the stage, and the other
routes at the stage too, sized from the tiers (`DeployConfig.stage_rate`). An optional WAF web ACL
rate-limits per source IP the requests that carry no well-formed credential, and, far higher, those
that do (a flood guard at the stage's rate); docs/deploy.md, "Limits, in the order they apply".
"""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as sm
from aws_cdk import aws_wafv2 as wafv2

from constructs import Construct
from fleetmem.config import (
    ENV_AUTHORIZATION_SERVER,
    ENV_AUTHORIZER_CACHE_TTL_S,
    ENV_COGNITO_ISSUER,
    ENV_COGNITO_RESOURCE_SERVER,
    ENV_DEFAULT_TIER,
    ENV_INVOKE_DEADLINES_S,
    ENV_INVOKE_READ_TIMEOUT_S,
    ENV_MCP_INSTRUCTIONS,
    ENV_OAUTH_ISSUER,
    ENV_OAUTH_JWKS_URL,
    ENV_OAUTH_RESOURCE,
    ENV_PUBLIC_URL,
    ENV_USAGE_KEY_SECRETS,
)
from fleetmem.contract.routes import MCP_GATEWAY_METHODS, MCP_PATH, OPENAPI_PATH, PUBLIC_PATHS, TOOLS_PATH, V1_PREFIX
from fleetmem.lambda_routes import TOOL_FUNCTIONS_ENV
from fleetmem.transport.aws_lambda.proxy import (
    FORBIDDEN_MESSAGE,
    GATEWAY_RETRY_AFTER_S,
    authorizer_busy_body,
    gateway_error_body,
    www_authenticate,
)

from ..config import DeployConfig
from .client_auth import RESOURCE_SERVER, ClientAuth
from .common import READ_ACTIONS, TOUCH_ACTIONS, Fn, FunctionFactory, acknowledge, grant_table, retention
from .signing import InvokeSigning
from .tables import Tables
from .tool_functions import ToolFunctions
from .waf import MANAGED_RULE_GROUPS as MANAGED_RULE_GROUPS
from .waf import web_acl

#: `GET /v1/<part>` routes the edge function answers (`fleetmem.contract.routes`).
V1_EDGE_PATHS = (TOOLS_PATH.rsplit("/", 1)[1], OPENAPI_PATH.rsplit("/", 1)[1])


def _envelope(code: str, message: str) -> str:
    return json.dumps(gateway_error_body(code, message, correlation_id="$context.requestId"))


def _authorizer_busy() -> str:
    return json.dumps(authorizer_busy_body(correlation_id="$context.requestId"))


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
        signing: InvokeSigning,
    ) -> None:
        super().__init__(scope, id)
        self._usage_keys(config)
        self._edge_function(config, factory, tools, auth, signing)
        self._authorizer_function(config, factory, tables, auth, signing)
        self._rest_api(config)
        validator = self._guard(config)
        edge_integration = self._routes(config, tools, validator)
        base_url = self._base_url(config)
        self._people_sign_in(config, base_url)
        self._gateway_responses(config, base_url)
        self._public_routes(edge_integration, validator)
        self._usage_plans(config)

        self.base_url = base_url
        self.mcp_url = cdk.Fn.join("", [base_url, "/mcp"])

    def _usage_keys(self, config: DeployConfig) -> None:
        """Every tier's usage-plan key, this version's and the one before."""
        # -- one API key per tier (values generated into Secrets Manager, never in the template) --
        # keys[version][tier]; the authorizer reads the current version's secrets only.
        version = config.api.usage_key_version
        self.key_secrets: dict[str, sm.Secret] = {}
        self.keys: dict[int, dict[str, apigw.ApiKey]] = {}
        for v in sorted({max(1, version - 1), version}):
            self.keys[v] = {}
            for tier in config.tiers:
                secret, key = self._usage_key(config, tier, v)
                self.keys[v][tier] = key
                if v == version:
                    self.key_secrets[tier] = secret

    def _edge_function(
        self,
        config: DeployConfig,
        factory: FunctionFactory,
        tools: ToolFunctions,
        auth: ClientAuth,
        signing: InvokeSigning,
    ) -> None:
        """The MCP edge function, the only caller allowed to invoke the tool functions."""
        stack = cdk.Stack.of(self)
        # -- functions ------------------------------------------------------------------------
        self.edge: Fn = factory.make(
            self,
            "Mcp",
            group="mcp",
            handler="functions.mcp.handler.handler",
            description="fleetmem MCP edge (streamable HTTP, stateless JSON)",
            env={
                TOOL_FUNCTIONS_ENV: stack.to_json_string(tools.tool_function_names),
                # the protected-resource metadata names people's authorization server when there is one
                ENV_AUTHORIZATION_SERVER: config.oauth.issuer.rstrip("/") if config.oauth else auth.issuer,
                ENV_INVOKE_READ_TIMEOUT_S: str(config.api.invoke_read_timeout_s),
                ENV_INVOKE_DEADLINES_S: json.dumps(config.invoke_deadlines(), sort_keys=True),
                **signing.env,
                **({ENV_PUBLIC_URL: config.public_url.rstrip("/")} if config.public_url else {}),
                **(
                    {ENV_MCP_INSTRUCTIONS: config.memory.mcp_instructions}
                    if config.memory.mcp_instructions.strip()
                    else {}
                ),
            },
        )
        signing.grant(self.edge.role)
        for fn in tools.by_group.values():
            # Only the edge may invoke tool functions: each one's `live` alias (exact ARN, no version
            # wildcard), the name the edge invokes (`tools.tool_function_names`).
            self.edge.role.add_to_principal_policy(
                iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[fn.alias.function_arn])
            )

    def _authorizer_function(
        self, config: DeployConfig, factory: FunctionFactory, tables: Tables, auth: ClientAuth, signing: InvokeSigning
    ) -> None:
        """The REQUEST authorizer function: API tokens and Cognito access tokens (app clients mapped
        in the clients table), the usage key of each caller's tier."""
        stack = cdk.Stack.of(self)
        self.authorizer_fn: Fn = factory.make(
            self,
            "Authorizer",
            group="authorizer",
            handler="functions.authorizer.handler.handler",
            description="fleetmem REQUEST authorizer: API token or Cognito access token",
            env={
                ENV_COGNITO_ISSUER: auth.issuer,
                ENV_COGNITO_RESOURCE_SERVER: RESOURCE_SERVER,
                ENV_USAGE_KEY_SECRETS: stack.to_json_string({t: s.secret_arn for t, s in self.key_secrets.items()}),
                ENV_DEFAULT_TIER: config.default_tier,
                ENV_AUTHORIZER_CACHE_TTL_S: str(config.api.authorizer_cache_ttl_s),
                # the authorizer signs its context with the stage key; functions act on signed ones only
                **signing.env,
            },
        )
        signing.grant(self.authorizer_fn.role)
        # reads a credential per request; records its last use (at most once a minute per token)
        grant_table(tables["clients"], self.authorizer_fn.role, (*READ_ACTIONS["clients"], *TOUCH_ACTIONS["clients"]))
        for secret in self.key_secrets.values():
            secret.grant_read(self.authorizer_fn.role)

    def _rest_api(self, config: DeployConfig) -> None:
        """The REST API and its stage: access and execution logs, the stage and public-route throttles."""
        # -- the REST API ----------------------------------------------------------------------
        self.access_logs = access_logs = logs.LogGroup(
            self, "AccessLogs", retention=retention(config), removal_policy=cdk.RemovalPolicy.DESTROY
        )
        # Unauthenticated routes carry no credential, so no usage plan throttles them: the stage does.
        public_throttle = apigw.MethodDeploymentOptions(
            throttling_rate_limit=config.api.public_rate_per_second,
            throttling_burst_limit=config.api.public_burst,
            logging_level=apigw.MethodLoggingLevel.ERROR,
            metrics_enabled=True,
        )
        self.api = apigw.RestApi(
            self,
            "Api",
            rest_api_name=config.prefix,
            description="fleetmem: remote MCP memory for agent fleets",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            api_key_source_type=apigw.ApiKeySourceType.AUTHORIZER,
            # The account-wide role is shared by every API in the account and region: opt-in only.
            cloud_watch_role=config.api.cloud_watch_role,
            cloud_watch_role_removal_policy=cdk.RemovalPolicy.RETAIN if config.api.cloud_watch_role else None,
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
                # Every route: before the authorizer runs, so made-up credentials cannot flood it;
                # sized from the tiers so no client meets it before its own usage plan.
                method_options={
                    "/*/*": apigw.MethodDeploymentOptions(
                        throttling_rate_limit=config.stage_rate(),
                        throttling_burst_limit=config.stage_burst(),
                        logging_level=apigw.MethodLoggingLevel.ERROR,
                        metrics_enabled=True,
                    ),
                    **{f"{path}/GET": public_throttle for path in PUBLIC_PATHS},
                },
            ),
        )
        # API Gateway would create the execution log group itself, without retention, on the first
        # logged request; created here first (the stage waits for it) it keeps the stage's retention.
        execution_logs = logs.LogGroup(
            self,
            "ExecutionLogs",
            log_group_name=f"API-Gateway-Execution-Logs_{self.api.rest_api_id}/{config.stage}",
            retention=retention(config),
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.api.deployment_stage.node.add_dependency(execution_logs)
        if config.api.cloud_watch_role:
            acknowledge(
                self.api,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AmazonAPIGatewayPushToCloudWatchLogs]",
                "API Gateway's account-level CloudWatch role uses the AWS-managed "
                "AmazonAPIGatewayPushToCloudWatchLogs policy, the documented way to enable execution logs.",
            )

    def _guard(self, config: DeployConfig) -> apigw.RequestValidator:
        """The WAF (when on) and the cached REQUEST authorizer; the request validator every route uses."""
        self.web_acl: wafv2.CfnWebACL | None = None
        if config.waf_enabled:
            self.web_acl = web_acl(self, config, self.api.deployment_stage)
        else:
            acknowledge(
                self.api,
                "AwsSolutions-APIG3",
                "WAF is off for this stage (a dev stage, or api.waf.enabled false): every data "
                "route needs a credential and is throttled at the stage and per tier by usage "
                "plans; the public routes have their own stage throttle.",
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
            handler=self.authorizer_fn.alias,
            identity_sources=[apigw.IdentitySource.header("Authorization")],
            results_cache_ttl=cdk.Duration.seconds(config.api.authorizer_cache_ttl_s),
            authorizer_name=f"{config.prefix}-authorizer",
        )
        validator = self.api.add_request_validator(
            "Validator", validate_request_body=True, validate_request_parameters=True
        )
        return validator

    def _routes(
        self, config: DeployConfig, tools: ToolFunctions, validator: apigw.RequestValidator
    ) -> apigw.LambdaIntegration:
        """`/mcp` and `/v1/...` behind the authorizer and usage plans; the edge's integration."""
        secured = dict(authorizer=self.authorizer, api_key_required=True, request_validator=validator)

        mcp = self.api.root.add_resource(MCP_PATH.strip("/"))
        # The live alias (warm sandboxes when functions.mcp.provisioned_concurrency is set).
        edge_target: lambda_.IFunction = self.edge.alias
        # Explicit, and the outer end of the timeout chain checked in infra/config.py.
        integration_timeout = cdk.Duration.seconds(config.api.integration_timeout_s)
        # No test-invoke permission: each function's resource policy admits this stage's routes only.
        edge_integration = apigw.LambdaIntegration(
            edge_target, proxy=True, timeout=integration_timeout, allow_test_invoke=False
        )
        # GET/DELETE reach the edge so it can answer 405 itself (the SDK would stream GET forever).
        for method in MCP_GATEWAY_METHODS:
            mcp.add_method(method, edge_integration, **secured)

        v1 = self.api.root.add_resource(V1_PREFIX.strip("/"))
        for tool, fn in tools.by_tool.items():
            v1.add_resource(tool).add_method(
                "POST",
                apigw.LambdaIntegration(fn.alias, proxy=True, timeout=integration_timeout, allow_test_invoke=False),
                **secured,
            )
        # The tool list and the OpenAPI document of /v1: answered by the edge (it holds the
        # registry and the caller's scopes), behind the same authorizer and usage plans.
        for part in V1_EDGE_PATHS:
            v1.add_resource(part).add_method("GET", edge_integration, **secured)
        return edge_integration

    def _people_sign_in(self, config: DeployConfig, base_url: str) -> None:
        """People's OAuth access tokens (`oauth` in the deploy config): the authorizer learns the
        one issuer, its JWKS and this stage's `/mcp` URL, the audience their tokens must name."""
        if config.oauth is None:
            return
        public = config.public_url.rstrip("/") if config.public_url else base_url
        issuer = config.oauth.issuer.rstrip("/")
        env = {
            ENV_OAUTH_ISSUER: issuer,
            ENV_OAUTH_JWKS_URL: config.oauth.jwks_url or f"{issuer}/.well-known/jwks.json",
            ENV_OAUTH_RESOURCE: cdk.Fn.join("", [public, MCP_PATH]),
        }
        for name, value in env.items():
            self.authorizer_fn.function.add_environment(name, value)

    def _base_url(self, config: DeployConfig) -> str:
        """The stage's execute-api URL."""
        stack = cdk.Stack.of(self)
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
        return base_url

    def _gateway_responses(self, config: DeployConfig, base_url: str) -> None:
        """API Gateway's own answers in the protocol's shapes: 401 with WWW-Authenticate, 429 and
        503 in the envelope's shape."""
        www = f"'{www_authenticate(config.public_url.rstrip('/') if config.public_url else base_url)}'"
        json_type = "application/json"
        self.api.add_gateway_response(
            "Unauthorized",
            type=apigw.ResponseType.UNAUTHORIZED,
            status_code="401",
            response_headers={"WWW-Authenticate": www, "Content-Type": f"'{json_type}'"},
            templates={json_type: _envelope("unauthorized", "Missing, unknown, expired or revoked credential.")},
        )
        # The authorizer's Deny: a valid credential that may not act here (a person no mapping
        # names, or whose token grants none of the scopes the mapping allows). 403, not 401: signing
        # in again would not help.
        self.api.add_gateway_response(
            "AccessDenied",
            type=apigw.ResponseType.ACCESS_DENIED,
            status_code="403",
            response_headers={"Content-Type": f"'{json_type}'"},
            templates={json_type: _envelope("scope_denied", FORBIDDEN_MESSAGE)},
        )
        # Every credential gets its tier's key (the default tier's when it names none), so this
        # answers only a key API Gateway does not hold: one replaced by a usage-key rotation more
        # than one version ago, still in a cached authorizer answer. Say why instead of "Forbidden".
        self.api.add_gateway_response(
            "NoUsageKey",
            type=apigw.ResponseType.INVALID_API_KEY,
            status_code="403",
            response_headers={"Content-Type": f"'{json_type}'"},
            templates={
                json_type: _envelope(
                    "unauthorized",
                    "This credential's usage-plan key is not one this stage holds (its tier's key was "
                    "rotated); retry after the authorizer cache TTL.",
                )
            },
        )
        # A throttled, failing or timed-out authorizer would be API Gateway's bare 500: answer 503
        # `unavailable` with Retry-After in the envelope's shape instead (the call was not run, so
        # it is safe to retry). Not 429: the caller is over no limit of its own, and a 429 would
        # read as "this client's rate" to the client and to the 429 alarm. API Gateway counts a
        # gateway response whose status was changed as 4XXError, so the 5xx alarm counts these
        # from the access log (monitoring.py), beside the authorizer function's own error alarms.
        for rt, label in (
            (apigw.ResponseType.AUTHORIZER_FAILURE, "AuthorizerFailure"),
            (apigw.ResponseType.AUTHORIZER_CONFIGURATION_ERROR, "AuthorizerConfiguration"),
        ):
            self.api.add_gateway_response(
                label,
                type=rt,
                status_code="503",
                response_headers={"Retry-After": f"'{GATEWAY_RETRY_AFTER_S}'", "Content-Type": f"'{json_type}'"},
                templates={json_type: _authorizer_busy()},
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
                templates={json_type: _envelope("rate_limited", "This client's rate limit or quota is used up.")},
            )

    def _public_routes(self, edge_integration: apigw.LambdaIntegration, validator: apigw.RequestValidator) -> None:
        """The public routes: the OAuth metadata and /health."""
        # Public by design: the OAuth protected-resource metadata (RFC 9728) tells a client where to
        # get a credential, and /health answers load balancers and uptime checks; neither holds data.
        # Each is throttled at the stage (PUBLIC_PATHS, api.public_rate_per_second).
        public = []
        for path in PUBLIC_PATHS:
            resource = self.api.root
            for part in path.strip("/").split("/"):
                resource = resource.get_resource(part) or resource.add_resource(part)
            public.append(resource.add_method("GET", edge_integration, request_validator=validator))
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

    def _usage_plans(self, config: DeployConfig) -> None:
        """One usage plan per tier, holding that tier's keys (this version's and the one before)."""
        # -- usage plans: one per tier, the tier's own key in it ---------------------------------
        self.plans: dict[str, apigw.UsagePlan] = {}
        for tier, t in config.tiers.items():
            self.plans[tier] = self.api.add_usage_plan(
                f"Plan-{tier}",
                name=f"{config.prefix}-{tier}",
                throttle=apigw.ThrottleSettings(rate_limit=t.rate_per_second, burst_limit=t.burst),
                quota=apigw.QuotaSettings(limit=t.quota_per_day, period=apigw.Period.DAY),
                api_stages=[apigw.UsagePlanPerApiStage(api=self.api, stage=self.api.deployment_stage)],
            )
        for keys in self.keys.values():
            for tier, key in keys.items():
                self.plans[tier].add_api_key(key)

    def _usage_key(self, config: DeployConfig, tier: str, version: int) -> tuple[sm.Secret, apigw.ApiKey]:
        """One tier's usage-plan key of one version: a generated secret and the API key made from
        it. Logical ids and names carry `tier-`, so they never meet a per-client key's of an older
        template (docs/deploy.md, "Upgrading from per-client keys")."""
        suffix = "" if version == 1 else f"-v{version}"
        secret = sm.Secret(
            self,
            f"UsageKey-tier-{tier}{suffix}",
            description=f"{config.prefix} API Gateway usage key of tier {tier} (version {version})",
            generate_secret_string=sm.SecretStringGenerator(exclude_punctuation=True, password_length=40),
        )
        acknowledge(
            secret,
            "AwsSolutions-SMG4",
            "A usage-plan key is a metering identifier, not a credential (callers never see it; the "
            "authorizer attaches it). Rotate by bumping api.usage_key_version and deploying, which "
            "replaces key and secret together; see docs/operate.md.",
        )
        key = apigw.ApiKey(
            self,
            f"Key-tier-{tier}{suffix}",
            api_key_name=f"{config.prefix}-tier-{tier}{suffix}",
            value=secret.secret_value.unsafe_unwrap(),
            enabled=True,
        )
        return secret, key
