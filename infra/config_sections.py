"""The sections of the deployment configuration (`infra/config.py` puts them together in
`DeployConfig`): tables, search, functions, tiers and clients, destinations and heartbeats, the
API's limits, signing, Cognito, alarms, releases and cold starts, with the constants they check
against. Each validates its own fields; what spans sections is checked by `DeployConfig`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fleetmem.config import DEFAULT_AUTHORIZER_CACHE_TTL_S, DEFAULT_SIGNING_KEY_TTL_S
from fleetmem.protocol import CORE_CHARS_DEFAULT, Scope
from fleetmem.tokens import ID_REGEX
from fleetmem.transport.instructions import OPERATOR_MAX_CHARS
from fleetmem.wiring import SEARCH_GROUPS

#: Function groups that are not verbs: the edge, the authorizer and the stream/schedule workers.
NON_VERB_GROUPS = frozenset({"mcp", "authorizer", "indexer", "heartbeat", "signing_rotation", "search_rolemap"})
#: Groups sized on their own: `functions.default` does not apply to them. The authorizer runs on
#: every cache miss of every route, so its concurrency is its own setting (`functions.authorizer`),
#: not the verbs' default: at the stage throttle's rate it must not be the first thing to refuse.
OWN_SIZE = {
    "authorizer": {"memory_mb": 1024, "timeout_s": 10, "reserved_concurrency": 100},
    # Secrets Manager invokes it four times per rotation, one step at a time: one at once suffices.
    "signing_rotation": {"memory_mb": 256, "timeout_s": 30, "reserved_concurrency": 1},
    # CloudFormation's search role mapping (fine-grained access control): four PUTs per deploy.
    "search_rolemap": {"memory_mb": 256, "timeout_s": 60, "reserved_concurrency": 1},
}
#: Seconds a WAF rate-based rule counts requests over (its `EvaluationWindowSec`; WAF's default).
WAF_WINDOW_S = 300
#: Stages treated as development: WAF is off unless the config turns it on.
DEV_STAGES = frozenset({"dev", "local"})
#: The largest heartbeat budget: a token is ~4 characters (fleetmem.memory.budget), a character
#: is at most 6 bytes once JSON-escaped (\uXXXX), so 8,000 tokens stay under 192 KB of text and
#: leave 64 KB of EventBridge's 256 KB event limit for ids, timestamps and the envelope.
HEARTBEAT_MAX_BUDGET_TOKENS = 8000
#: Bytes the heartbeat table may take in the heartbeat function's environment (Lambda allows 4 KB
#: for all of one function's variables; the base environment takes about 1 KB).
HEARTBEAT_TABLE_MAX_BYTES = 2560
#: Seconds the synthesize function needs beside the LLM call (connect, retrieval, fallback answer).
LLM_HEADROOM_S = 5
#: Reserved concurrency of each verb function as a share of `capacity.concurrent_calls` (the
#: edge's): a DynamoDB-only verb may take half the edge's slots; the verbs that wait on the search
#: index together at most half (`SEARCH_SHARE`), so a slow index leaves the other half free for
#: writes, delta and entity, and its callers beyond their share are throttled at once (`unavailable`
#: + Retry-After from the edge) instead of queueing in edge slots.
VERB_SHARE = 0.5
SEARCH_SHARE = {"recall": 0.4, "synthesize": 0.1}
if set(SEARCH_SHARE) != SEARCH_GROUPS:  # the two tables name the same verbs
    raise RuntimeError("SEARCH_SHARE must give a share to exactly the SEARCH_GROUPS")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TablesConfig(_Model):
    """Unset `deletion_protection` / `retain_on_delete` follow the stage (`DeployConfig` fills them
    in): on for every stage but a dev one, so a config copied from the dev example for a real stage
    protects its data unless it says otherwise."""

    deletion_protection: bool = True
    point_in_time_recovery: bool = True
    #: RETAIN keeps the data (tables, user pool, search domain, alarm key) when the stack is deleted.
    retain_on_delete: bool = True


#: What `search.preset` stands for (a managed domain). "dev" is one small node; "production"
#: spreads data nodes over three zones behind three dedicated masters, so an index keeps a replica
#: on another node and a zone can go. Any field set explicitly in `search` wins over the preset.
SEARCH_PRESETS: dict[str, dict[str, object]] = {
    "dev": {
        "instance_type": "t3.small.search",
        "instance_count": 1,
        "volume_gb": 10,
        "zone_awareness": False,
        "availability_zones": 2,
        "dedicated_master": False,
        "master_instance_type": "m6g.large.search",
        "snapshot_repository": False,
        "standby_replicas": False,
        "multi_az_with_standby": False,
        "fine_grained_access_control": False,
        "audit_logs": False,
    },
    "production": {
        "instance_type": "r6g.large.search",
        "instance_count": 3,
        "volume_gb": 100,
        "zone_awareness": True,
        "availability_zones": 3,
        "dedicated_master": True,
        "master_instance_type": "m6g.large.search",
        "snapshot_repository": True,
        "standby_replicas": True,
        "multi_az_with_standby": True,
        "fine_grained_access_control": True,
        "audit_logs": True,
    },
}
#: Dedicated master nodes when `search.dedicated_master` is on (OpenSearch's quorum needs three).
MASTER_NODES = 3


class SearchVpcConfig(_Model):
    """Place the managed domain in a VPC (no public endpoint): its subnets, one per zone the data
    nodes use, and security groups that admit HTTPS (443) from the functions. The functions that
    talk to OpenSearch (the searching verbs and the indexer) join the same subnets and groups; the
    subnets need a route to DynamoDB, Bedrock, Secrets Manager, SQS and X-Ray (a NAT gateway or VPC
    endpoints, docs/deploy.md section 4f)."""

    subnet_ids: tuple[str, ...] = Field(min_length=1)
    security_group_ids: tuple[str, ...] = Field(min_length=1)


class SearchConfig(_Model):
    flavour: Literal["domain", "serverless"] = "domain"
    #: The sizes below default to this preset's (SEARCH_PRESETS); fields given explicitly override it.
    preset: Literal["dev", "production"] = "dev"
    engine_version: str = "OpenSearch_2.19"
    instance_type: str = "t3.small.search"
    #: Data nodes.
    instance_count: int = Field(default=1, ge=1)
    #: EBS gp3 volume of each data node (GB).
    volume_gb: int = Field(default=10, ge=10)
    zone_awareness: bool = False
    #: Zones the data nodes spread over when `zone_awareness` is on (2 or 3).
    availability_zones: Literal[2, 3] = 2
    dedicated_master: bool = False
    master_instance_type: str = "m6g.large.search"
    #: UTC hour of the automated snapshot (OpenSearch 2.x takes them hourly whatever it says).
    snapshot_hour: int = Field(default=2, ge=0, le=23)
    #: An S3 bucket and the role OpenSearch assumes to write manual snapshots to it (docs/deploy.md).
    snapshot_repository: bool = False
    #: Serverless only: standby replicas in another zone (doubles the OCU floor).
    standby_replicas: bool = False
    #: Managed domain: Multi-AZ with Standby (one zone of three holds standby nodes; needs three
    #: zones, dedicated masters and a data-node count that is a multiple of three).
    multi_az_with_standby: bool = False
    #: Managed domain: fine-grained access control with the stage's search-admin IAM role as its
    #: master user (no internal user database, so no password in the template); the deploy maps
    #: the function roles to OpenSearch roles itself (a custom resource, docs/deploy.md 4f).
    fine_grained_access_control: bool = False
    #: Managed domain: OpenSearch audit logs to CloudWatch Logs (needs fine-grained access control).
    audit_logs: bool = False
    #: Managed domain: VPC placement (None: a public endpoint that takes only SigV4-signed requests
    #: of the roles its access policy names).
    vpc: SearchVpcConfig | None = None
    index_prefix: str = "fleetmem"

    @model_validator(mode="before")
    @classmethod
    def _preset_fills_unset_fields(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        preset = SEARCH_PRESETS.get(str(data.get("preset", "dev")), {})
        return {**preset, **data}

    @model_validator(mode="after")
    def _nodes_fit_zones(self) -> SearchConfig:
        zones = self.availability_zones
        if self.flavour == "domain" and self.zone_awareness and self.instance_count % zones:
            raise ValueError(
                f"search.instance_count ({self.instance_count}) must be a multiple of "
                f"search.availability_zones ({self.availability_zones}) with zone awareness on: OpenSearch "
                "places the same number of data nodes in each zone; set instance_count to "
                f"{zones * max(1, self.instance_count // zones)} or change the zones"
            )
        if self.flavour != "domain":
            return self
        if self.multi_az_with_standby and not (
            self.zone_awareness and zones == 3 and self.dedicated_master and self.instance_count % 3 == 0
        ):
            raise ValueError(
                "search.multi_az_with_standby needs zone_awareness, availability_zones 3, dedicated_master "
                "and an instance_count that is a multiple of 3 (OpenSearch's requirements for Multi-AZ with Standby)"
            )
        if self.audit_logs and not self.fine_grained_access_control:
            raise ValueError(
                "search.audit_logs needs search.fine_grained_access_control (OpenSearch audits through it)"
            )
        if self.vpc is not None and len(self.vpc.subnet_ids) != (zones if self.zone_awareness else 1):
            raise ValueError(
                f"search.vpc.subnet_ids: give one subnet per zone the domain uses "
                f"({zones if self.zone_awareness else 1}, each in a different zone)"
            )
        return self

    @property
    def index_replicas(self) -> int:
        """Replicas per index shard: one when another data node can hold it, else none (a replica
        with nowhere to go keeps a one-node cluster yellow forever)."""
        return min(1, self.instance_count - 1)


class EmbeddingConfig(_Model):
    model: str = "amazon.titan-embed-text-v2:0"
    dimension: int = 1024


class LlmConfig(_Model):
    model: str = ""
    #: synthesize's quote check (env FLEETMEM_QUOTE_CHECK of the synthesize function): quotes in a
    #: composed answer that are not in the evidence are flagged (docs/protocol.md, synthesize)
    quote_check: bool = True


class MemoryConfig(_Model):
    """What the verbs answer that an operator may tune, as `fleetmem serve` reads it from its
    environment."""

    #: D32: the most characters of context_pack's core block (env FLEETMEM_CORE_CHARS of the
    #: context_pack function; 0 turns core memory off)
    core_chars: int = Field(default=CORE_CHARS_DEFAULT, ge=0)
    #: added to the server instructions every MCP `initialize` answers (env FLEETMEM_MCP_INSTRUCTIONS
    #: of the edge; the server keeps at most 2,000 characters, so a longer text is refused here)
    mcp_instructions: str = Field(default="", max_length=OPERATOR_MAX_CHARS)


class FunctionSize(_Model):
    memory_mb: int = 1024
    #: Unset: the group's own deadline (FUNCTION_TIMEOUT_S in fleetmem/adapters/aws/deadlines.py),
    #: else the `default` entry's, else 15 s.
    timeout_s: int = 15
    #: Warm sandboxes kept ready (edge only): the MCP SDK import dominates the edge's cold start.
    provisioned_concurrency: int = Field(default=0, ge=0)
    #: Reserved concurrency: a ceiling on this function's concurrent executions (and a share of
    #: the account's pool kept for it), so a flood of calls to one route cannot starve the others.
    #: Unset on the edge and the verbs: derived from `capacity.concurrent_calls`; elsewhere None
    #: leaves the function on the account's unreserved pool.
    reserved_concurrency: int | None = Field(default=None, ge=1)


class CapacityConfig(_Model):
    """The one number the edge and verb concurrency derive from (docs/deploy.md, section 4a)."""

    #: MCP calls the stage serves at once: the edge's reserved concurrency. Each verb function
    #: reserves half of it; recall 40 % and synthesize 10 % (they wait on the search index).
    concurrent_calls: int = Field(default=50, ge=10)


class TierConfig(_Model):
    rate_per_second: float
    burst: int
    quota_per_day: int


class ClientConfig(_Model):
    """A Cognito machine client the deploy config names. Not in the template: `fleetmem stage
    clients sync` creates its app client and maps it in the clients table (docs/deploy.md)."""

    #: Tenant and client ids follow `fleetmem.tokens.ID_REGEX` (no key separator can appear).
    client_id: str = Field(pattern=ID_REGEX)
    tenant: str = Field(pattern=ID_REGEX)
    scopes: tuple[Scope, ...] = ("read",)
    tier: str = "standard"


class DestinationConfig(_Model):
    type: Literal["sqs", "https"]
    url: str | None = None
    #: EventBridge API destinations cap their own invocation rate.
    rate_per_second: int = 5

    @model_validator(mode="after")
    def _https_needs_url(self) -> DestinationConfig:
        if self.type == "https" and not (self.url or "").startswith("https://"):
            raise ValueError("an https destination needs an https:// url")
        return self


class HeartbeatConfig(_Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    tenant: str = Field(pattern=ID_REGEX)
    client_id: str = Field(pattern=ID_REGEX)
    session_id: str = Field(min_length=1, max_length=200)
    schedule: str  # rate(...) | cron(...) | at(...)
    timezone: str | None = None
    #: At most HEARTBEAT_MAX_BUDGET_TOKENS, so one delivery stays under EventBridge's 256 KB event
    #: limit (a larger delta fails PutEvents and the cursor does not move).
    budget_tokens: int = Field(default=2000, ge=1, le=HEARTBEAT_MAX_BUDGET_TOKENS)
    destination: str


class WafConfig(_Model):
    #: Associate a WAF web ACL with the API stage: the per-IP rate rule beside AWS's managed Common
    #: and KnownBadInputs rule groups (about $5/month + $1 per rule + $0.60 per million requests;
    #: docs/deploy.md). Unset: on for every stage but a dev stage (`DeployConfig.is_dev`).
    enabled: bool | None = None
    #: Requests WITHOUT a well-formed credential (no `Authorization: Bearer <API token or JWS>`,
    #: `fleetmem.transport.aws_lambda.authorizer.credential_shape`) one source IP may send in any
    #: 5-minute window before WAF blocks it (AWS minimum: 10). A request that carries a
    #: well-formed credential is not counted here: the per-client usage plans throttle it.
    rate_limit_per_5min: int = Field(default=1000, ge=10, le=2_000_000_000)
    #: The flood guard: requests WITH a well-formed credential one source IP may send in any
    #: 5-minute window. Unset: the stage throttle's rate over the window
    #: (`DeployConfig.stage_rate() * 300`), so a whole fleet behind one NAT address
    #: meets the stage before WAF, and one address alone cannot hold the stage with made-up
    #: tokens for longer than a window. A value below that is refused.
    flood_limit_per_5min: int | None = Field(default=None, ge=10, le=2_000_000_000)


class ApiConfig(_Model):
    """The public REST API: the timeout chain, the unauthenticated routes' throttle, usage keys."""

    #: API Gateway's REST integration timeout. 29 s is the default ceiling; more needs a quota
    #: increase for the account (regional APIs only).
    integration_timeout_s: int = Field(default=29, ge=1, le=300)
    #: How long the MCP edge waits for a verb function it invokes synchronously
    #: (env FLEETMEM_INVOKE_READ_TIMEOUT_S of the edge).
    invoke_read_timeout_s: int = Field(default=26, ge=1)
    #: Stage-level throttle of the unauthenticated routes (/health and the OAuth metadata): they
    #: carry no credential, so no usage plan can throttle them per client.
    public_rate_per_second: float = Field(default=5, gt=0)
    public_burst: int = Field(default=10, ge=1)
    #: Stage-level throttle of every other route (/mcp, /v1/*), per method, shared by every
    #: client: it applies before the authorizer runs, so a flood of made-up credentials (each one a
    #: cache miss) is cut here, not in the authorizer; the tiers' usage plans throttle their
    #: clients below it. Unset: sized from the tiers (`DeployConfig.stage_rate()`:
    #: `stage_headroom` x every tier at its full rate, one key per tier); a value below the largest
    #: tier's rate or burst is refused, since that tier's clients would be throttled by the stage
    #: before their own plan.
    stage_rate_per_second: float | None = Field(default=None, gt=0)
    stage_burst: int | None = Field(default=None, ge=1)
    #: The multiple of the tiers' combined plan rate (and burst) the stage allows when
    #: `stage_rate_per_second` / `stage_burst` are unset: room for refused credentials (401, 403)
    #: beside every client at full rate.
    stage_headroom: float = Field(default=2.0, ge=1.0, le=100.0)
    #: The usage-plan keys' version. Bump it (and deploy) to rotate every key: the deploy creates
    #: new keys and secrets together and points the authorizer at the new secrets; see
    #: docs/operate.md "Rotating the usage-plan keys".
    usage_key_version: int = Field(default=1, ge=1)
    #: How long API Gateway caches the REQUEST authorizer's answer per Authorization header
    #: (seconds; 0 turns the cache off, 3600 is API Gateway's ceiling). It bounds revocation: a
    #: revoked token or deny-listed Cognito app client is refused at most this long after the
    #: revoke. The local stack's front caches for as long.
    authorizer_cache_ttl_s: int = Field(default=DEFAULT_AUTHORIZER_CACHE_TTL_S, ge=0, le=3600)
    #: Let this stack create API Gateway's account-wide CloudWatch role (AWS::ApiGateway::Account).
    #: Off: there is one such setting per account and region, so a stack that owns it collides with
    #: every other stack that does, and deleting the stack removes the role from all of them. The
    #: account needs the role set once for execution logs (docs/deploy.md, prerequisites).
    cloud_watch_role: bool = False
    waf: WafConfig = WafConfig()


class SigningConfig(_Model):
    """The stage's signing key (infra/constructs/signing.py): its rotation and how long a
    function keeps the keys it read."""

    #: Secrets Manager rotates the key on this schedule (1..1000 days); the key it replaces stays
    #: accepted until the next rotation.
    rotation_days: int = Field(default=30, ge=1, le=1000)
    #: Seconds a function keeps the current and previous keys before reading them again
    #: (FLEETMEM_SIGNING_KEY_TTL_S): the longest a sandbox signs with the key just replaced.
    key_ttl_s: int = Field(default=DEFAULT_SIGNING_KEY_TTL_S, ge=1, le=86400)


class CognitoConfig(_Model):
    #: Lifetime of a client-credentials access token. Cognito cannot revoke these tokens (no refresh
    #: token; the authorizer checks them offline), so a short life bounds a leaked token; the
    #: authorizer's deny-list covers the rest (docs/operate.md). Cognito allows 5 min .. 1 day.
    access_token_minutes: int = Field(default=15, ge=5, le=1440)


class OAuthConfig(_Model):
    """The authorization server people sign in through (OAuth 2.1, code + PKCE): its issuer URL,
    and its JWKS when not at `<issuer>/.well-known/jwks.json`. The authorizer accepts its JWT access
    tokens whose `aud` names this stage's `/mcp` URL, for people mapped in the clients table; the
    protected-resource metadata names it. One issuer per stage; people are data, not config."""

    issuer: str = Field(pattern=r"^https://[^\s]+$")
    jwks_url: str | None = Field(default=None, pattern=r"^https://[^\s]+$")


class AlarmSubscriber(_Model):
    """One subscription of the alarm topic: an e-mail address, an https:// webhook (e.g. a chat or
    paging service's SNS endpoint), an SQS queue ARN, a Lambda function ARN, or a phone number."""

    type: Literal["email", "https", "sqs", "lambda", "sms"]
    endpoint: str = Field(min_length=3)

    @model_validator(mode="after")
    def _endpoint_fits_type(self) -> AlarmSubscriber:
        ok = {
            "email": "@" in self.endpoint,
            "https": self.endpoint.startswith("https://"),
            "sqs": self.endpoint.startswith("arn:") and ":sqs:" in self.endpoint,
            "lambda": self.endpoint.startswith("arn:") and ":lambda:" in self.endpoint,
            "sms": self.endpoint.startswith("+"),
        }[self.type]
        if not ok:
            raise ValueError(
                f"alarm subscriber {self.endpoint!r} is not a valid {self.type} endpoint (email: an address; "
                "https: an https:// URL; sqs/lambda: the queue's or function's ARN; sms: +<country code><number>)"
            )
        return self


class AlarmsConfig(_Model):
    #: Shorthand for one e-mail subscriber.
    email: str | None = None
    #: Everyone the alarm topic notifies. A non-dev stage needs at least one (here or `email`).
    subscribers: tuple[AlarmSubscriber, ...] = ()
    p99_ms: dict[str, int] = Field(default_factory=lambda: {"default": 3000})
    authorizer_denials_per_5min: int = 50
    #: The indexer's stream position may trail the newest record by this much (seconds) before the
    #: iterator-age alarm fires: search then misses writes at least this old.
    iterator_age_s: int = Field(default=300, ge=60)
    #: The free-storage alarm fires when a data node has less than this share of its volume left.
    free_storage_fraction: float = Field(default=0.25, gt=0, lt=1)
    #: JVM memory pressure (percent) the heap may stay above for 15 minutes.
    jvm_memory_pressure_pct: int = Field(default=80, ge=50, le=99)
    #: DynamoDB throttle events (reads + writes) one table, or one of its indexes, may see in 5
    #: minutes before its alarm fires (on-demand tables throttle on a hot key or a sudden jump).
    dynamodb_throttles_per_5min: int = Field(default=5, ge=1)
    #: Share of API requests answered 4xx in 5 minutes (401, 403, 404, 429, ...) that alarms,
    #: once at least `api_4xx_min_requests` requests came in (a few calls prove nothing).
    api_4xx_rate: float = Field(default=0.2, gt=0, le=1)
    api_4xx_min_requests: int = Field(default=100, ge=1)
    #: 429s the API may answer in 5 minutes (usage plans, quotas, the stage throttle), counted from
    #: the access log: API Gateway publishes no 429 metric of its own for a REST API.
    api_429_per_5min: int = Field(default=50, ge=1)
    #: Requests WAF may block in 5 minutes, all rules together (scanners are routine on a public
    #: endpoint). Any block by the flood guard (well-formed credentials) alarms on its own.
    waf_blocked_per_5min: int = Field(default=1000, ge=1)
    #: Bedrock InvocationThrottles per model id in 5 minutes (the SDK retries a few).
    bedrock_throttles_per_5min: int = Field(default=5, ge=1)

    def all_subscribers(self) -> tuple[AlarmSubscriber, ...]:
        own = (AlarmSubscriber(type="email", endpoint=self.email),) if self.email else ()
        return own + tuple(s for s in self.subscribers if s not in own)


#: CodeDeploy's predefined Lambda traffic shifts (`CodeDeployDefault.Lambda<type>`).
CanaryType = Literal[
    "Canary10Percent5Minutes",
    "Canary10Percent10Minutes",
    "Canary10Percent15Minutes",
    "Canary10Percent30Minutes",
    "Linear10PercentEvery1Minute",
    "Linear10PercentEvery2Minutes",
    "Linear10PercentEvery3Minutes",
    "Linear10PercentEvery10Minutes",
    "AllAtOnce",
]


class CanaryConfig(_Model):
    #: Shift each function's `live` alias to its new version gradually with CodeDeploy, rolling
    #: back when the function's error alarm fires. Off: the alias moves at once on deploy.
    enabled: bool = False
    type: CanaryType = "Canary10Percent5Minutes"


#: Groups a `cold_start.snap_start` entry "verbs" stands for: every verb function.
VERBS = "verbs"
#: What `cold_start.preset` stands for. "production" snapshots the functions a caller waits on
#: (the edge, the authorizer, every verb) with SnapStart; the stream and schedule workers start
#: on demand (nobody waits on their cold start). Costs per function: docs/deploy.md section 4g.
COLD_START_PRESETS: dict[str, dict[str, object]] = {
    "dev": {"snap_start": ()},
    "production": {"snap_start": ("mcp", "authorizer", VERBS)},
}


class ColdStartConfig(_Model):
    """How each function group starts: SnapStart (a snapshot of its init, restored per sandbox;
    Python 3.12+) for the groups in `snap_start`, provisioned concurrency where a group's
    `functions.<group>.provisioned_concurrency` asks for it (the edge's alias only), else on demand.
    A group cannot have both (Lambda refuses SnapStart with provisioned concurrency)."""

    preset: Literal["dev", "production"] = "dev"
    #: Function groups with SnapStart on their published versions ("verbs": every verb function).
    snap_start: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _preset_fills_unset_fields(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        preset = COLD_START_PRESETS.get(str(data.get("preset", "dev")), {})
        return {**preset, **data}


class ReleaseConfig(_Model):
    canary: CanaryConfig = CanaryConfig()
