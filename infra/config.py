"""Deployment configuration: one JSON file names everything a stage needs.

Read once by `infra/app.py` (path from `FLEETMEM_DEPLOY_CONFIG`, default `fleetmem.deploy.json` in the
repository root; without either the synth fails: the example is never used silently). Validated
with pydantic so a typo in a tier or destination name fails at synth time, not at 3 a.m.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from fleetmem.protocol import IDEMPOTENCY_LEASE_SECONDS, SCOPES
from fleetmem.wiring import FUNCTION_TIMEOUT_S, SEARCH_GROUPS, invoke_deadline

from .config_sections import (
    COLD_START_PRESETS,
    DEV_STAGES,
    HEARTBEAT_MAX_BUDGET_TOKENS,
    HEARTBEAT_TABLE_MAX_BYTES,
    LLM_HEADROOM_S,
    MASTER_NODES,
    NON_VERB_GROUPS,
    OWN_SIZE,
    SEARCH_PRESETS,
    SEARCH_SHARE,
    VERB_SHARE,
    VERBS,
    WAF_WINDOW_S,
    AlarmsConfig,
    AlarmSubscriber,
    ApiConfig,
    CanaryConfig,
    CanaryType,
    CapacityConfig,
    ClientConfig,
    CognitoConfig,
    ColdStartConfig,
    DestinationConfig,
    EmbeddingConfig,
    FunctionSize,
    HeartbeatConfig,
    LlmConfig,
    MemoryConfig,
    OAuthConfig,
    ReleaseConfig,
    SearchConfig,
    SearchVpcConfig,
    SigningConfig,
    TablesConfig,
    TierConfig,
    WafConfig,
    _Model,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = Path(__file__).resolve().parent / "config.example.json"
DEFAULT_ASSET = ROOT / "build" / "lambda"


#: What this module offers: its own names and, re-exported, every section of the config.
__all__ = [
    "COLD_START_PRESETS",
    "DEFAULT_ASSET",
    "DEV_STAGES",
    "EXAMPLE",
    "HEARTBEAT_MAX_BUDGET_TOKENS",
    "HEARTBEAT_TABLE_MAX_BYTES",
    "LLM_HEADROOM_S",
    "MASTER_NODES",
    "NON_VERB_GROUPS",
    "OWN_SIZE",
    "ROOT",
    "SEARCH_PRESETS",
    "SEARCH_SHARE",
    "VERBS",
    "VERB_SHARE",
    "WAF_WINDOW_S",
    "AlarmSubscriber",
    "AlarmsConfig",
    "ApiConfig",
    "CanaryConfig",
    "CanaryType",
    "CapacityConfig",
    "ClientConfig",
    "CognitoConfig",
    "ColdStartConfig",
    "DeployConfig",
    "DestinationConfig",
    "EmbeddingConfig",
    "FunctionSize",
    "HeartbeatConfig",
    "LlmConfig",
    "MemoryConfig",
    "OAuthConfig",
    "ReleaseConfig",
    "SearchConfig",
    "SearchVpcConfig",
    "SigningConfig",
    "TablesConfig",
    "TierConfig",
    "WafConfig",
    "load_config",
]


class DeployConfig(_Model):
    stage: str = Field(pattern=r"^[a-z][a-z0-9-]{0,15}$")
    region: str
    account: str | None = None
    python_runtime: Literal["3.12", "3.13", "3.14"] = "3.13"
    architecture: Literal["arm64", "x86_64"] = "arm64"
    surface: Literal["verbs", "full"] = "full"
    log_retention_days: int = 30
    tables: TablesConfig = TablesConfig()
    search: SearchConfig = SearchConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    llm: LlmConfig = LlmConfig()
    memory: MemoryConfig = MemoryConfig()
    functions: dict[str, FunctionSize] = Field(default_factory=dict)
    cognito_domain_prefix: str = Field(pattern=r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
    tiers: dict[str, TierConfig]
    default_tier: str = "standard"
    clients: tuple[ClientConfig, ...] = ()
    destinations: dict[str, DestinationConfig] = Field(default_factory=dict)
    heartbeats: tuple[HeartbeatConfig, ...] = ()
    alarms: AlarmsConfig = AlarmsConfig()
    api: ApiConfig = ApiConfig()
    capacity: CapacityConfig = CapacityConfig()
    cognito: CognitoConfig = CognitoConfig()
    #: People's sign-in (OAuth 2.1): None, machines only (API tokens and Cognito app clients).
    oauth: OAuthConfig | None = None
    signing: SigningConfig = SigningConfig()
    release: ReleaseConfig = ReleaseConfig()
    cold_start: ColdStartConfig = ColdStartConfig()
    #: Public base URL when a custom domain fronts the API (e.g. "https://memory.example.com"); by
    #: default the execute-api URL with the stage is used in 401 challenges and OAuth metadata.
    public_url: str | None = None
    #: Directory holding the built Lambda code (scripts/build-lambda); FLEETMEM_LAMBDA_ASSET overrides.
    asset_dir: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _protection_follows_the_stage(cls, data: object) -> object:
        """Unset table protection follows the stage: deletion protection and RETAIN on every stage
        but a dev one (`is_dev`); a value given explicitly stays."""
        if not isinstance(data, dict):
            return data
        protect = not _is_dev_stage(str(data.get("stage", "")))
        tables = data.get("tables", {})
        if isinstance(tables, TablesConfig):
            given = {k: getattr(tables, k) for k in tables.model_fields_set}
        elif isinstance(tables, dict):
            given = dict(tables)
        else:
            return data
        filled = {"deletion_protection": protect, "retain_on_delete": protect, **given}
        return {**data, "tables": filled}

    @model_validator(mode="after")
    def _alarms_reach_someone(self) -> DeployConfig:
        if not self.is_dev and not self.alarms.all_subscribers():
            raise ValueError(
                f"alarms: stage {self.stage!r} has no alarm subscriber, so its alarms (indexing failures, "
                "stream lag, search cluster red, function errors) would notify nobody. Add one: "
                '"alarms": {"subscribers": [{"type": "email", "endpoint": "oncall@example.com"}]} '
                '(or "alarms.email"; types: email, https, sqs, lambda, sms). Only dev stages (dev, local, '
                "dev-*) may go without."
            )
        return self

    @model_validator(mode="after")
    def _references_resolve(self) -> DeployConfig:
        if self.default_tier not in self.tiers:
            raise ValueError(f"default_tier {self.default_tier!r} is not a configured tier")
        from fleetmem.tokens import ID_PATTERN

        for tier in self.tiers:
            if not ID_PATTERN.fullmatch(tier):
                # a tier is stored with its clients and named in resource names: the id grammar
                raise ValueError(f"tier {tier!r}: use 1-63 lower-case letters, digits, '_' or '-'")
        seen: set[str] = set()
        for c in self.clients:
            if c.tier not in self.tiers:
                raise ValueError(f"client {c.client_id!r}: unknown tier {c.tier!r}")
            if c.client_id in seen:
                raise ValueError(f"client {c.client_id!r} configured twice")
            seen.add(c.client_id)
            if not set(c.scopes) <= set(SCOPES):
                raise ValueError(f"client {c.client_id!r}: scopes must be among {SCOPES}")
        for h in self.heartbeats:
            if h.destination not in self.destinations:
                raise ValueError(f"heartbeat {h.name!r}: unknown destination {h.destination!r}")
        size = self.heartbeat_table_bytes()
        if size > HEARTBEAT_TABLE_MAX_BYTES:
            raise ValueError(
                f"heartbeats: the heartbeat table ({size} bytes) must fit the heartbeat function's "
                f"environment (at most {HEARTBEAT_TABLE_MAX_BYTES} bytes; Lambda allows 4 KB for all of a "
                "function's variables): configure fewer heartbeats or shorter names and session ids"
            )
        self._timeouts_nest()
        self._capacity_holds()
        self._snap_start_fits()
        return self

    def _snap_start_fits(self) -> None:
        known = set(NON_VERB_GROUPS) | set(self.verb_groups()) | {VERBS}
        unknown = sorted(set(self.cold_start.snap_start) - known)
        if unknown:
            raise ValueError(f"cold_start.snap_start: unknown function groups {unknown} (groups or {VERBS!r})")
        for group in sorted(self.snap_start_groups()):
            if self.size_for(group).provisioned_concurrency:
                raise ValueError(
                    f"functions.{group}: provisioned_concurrency and SnapStart (cold_start.snap_start) exclude "
                    "each other on Lambda: choose one for this group"
                )

    def snap_start_groups(self) -> frozenset[str]:
        """The function groups deployed with SnapStart (`cold_start.snap_start`, "verbs" expanded)."""
        named = set(self.cold_start.snap_start)
        if VERBS in named:
            named = (named - {VERBS}) | set(self.verb_groups())
        return frozenset(named)

    def _timeouts_nest(self) -> None:
        """Every layer gives up before the one that called it, so each caller gets an answer (the
        callee's error or a degraded result) instead of a timeout that keeps billing below it:
        LLM deadline < synthesize function <= any verb function < edge's invoke read timeout <
        edge function < API integration timeout (< the client's own timeout, docs/deploy.md)."""
        from fleetmem.wiring import LLM_DEADLINE_S

        api, read = self.api.integration_timeout_s, self.api.invoke_read_timeout_s
        edge = self.size_for("mcp").timeout_s
        verbs = {g: self.size_for(g).timeout_s for g in self.verb_groups()}
        slowest = max(verbs, key=lambda g: verbs[g])
        if not verbs[slowest] < read < edge < api:
            raise ValueError(
                f"timeouts must nest: verb function ({slowest}: {verbs[slowest]} s) < "
                f"api.invoke_read_timeout_s ({read} s) < mcp function ({edge} s) < "
                f"api.integration_timeout_s ({api} s)"
            )
        # A write still running when its idempotency claim lapses could run twice (D2): every verb
        # function must be stopped by the platform before the lease ends.
        if not verbs[slowest] < IDEMPOTENCY_LEASE_SECONDS:
            raise ValueError(
                f"timeouts must nest: verb function ({slowest}: {verbs[slowest]} s) must end before the "
                f"idempotency lease ({IDEMPOTENCY_LEASE_SECONDS} s, FLEETMEM_IDEMPOTENCY_LEASE_S)"
            )
        synth = self.size_for("synthesize").timeout_s
        if self.llm.model and synth < LLM_DEADLINE_S + LLM_HEADROOM_S:
            raise ValueError(
                f"the synthesize function ({synth} s) must outlast the LLM deadline ({LLM_DEADLINE_S} s) "
                f"plus {LLM_HEADROOM_S} s for the connection, the retrieval and the fallback answer"
            )

    @model_validator(mode="after")
    def _rotation_outlasts_caches(self) -> DeployConfig:
        """A replaced key must stay accepted for as long as anything may still present a signature
        made with it: a sandbox signs with it for up to `signing.key_ttl_s` after the rotation,
        and API Gateway serves an authorizer context signed then for the cache TTL, valid for the
        signature margin beyond it. It stays accepted (as AWSPREVIOUS) until the next rotation."""
        from fleetmem.wiring import SIGNATURE_VALIDITY

        needed = self.signing_key_accepted_s()
        if self.signing.rotation_days * 86400 <= needed:
            raise ValueError(
                f"signing.rotation_days ({self.signing.rotation_days}) must exceed the time a replaced key is "
                f"still presented ({needed} s: signing.key_ttl_s + api.authorizer_cache_ttl_s + "
                f"{SIGNATURE_VALIDITY} s): lower signing.key_ttl_s or rotate less often"
            )
        return self

    def signing_key_accepted_s(self) -> int:
        """Seconds a replaced signing key may still be presented after a rotation (the least
        time between two rotations that refuses no call)."""
        from fleetmem.wiring import SIGNATURE_VALIDITY

        return self.signing.key_ttl_s + self.api.authorizer_cache_ttl_s + SIGNATURE_VALIDITY

    @model_validator(mode="after")
    def _limits_nest(self) -> DeployConfig:
        """The limits a request meets, in order, each at least as wide as the next (docs/deploy.md,
        "Limits, in the order they apply"): WAF's flood guard per source IP >= the stage throttle
        >= the largest tier's usage plan, so a client is throttled by its own plan first and a
        fleet behind one NAT address is never blocked by WAF before the stage."""
        top = max(self.tiers.values(), key=lambda t: t.rate_per_second)
        top_burst = max(t.burst for t in self.tiers.values())
        rate, burst = self.stage_rate(), self.stage_burst()
        if rate < top.rate_per_second or burst < top_burst:
            raise ValueError(
                f"api.stage_rate_per_second / stage_burst ({rate:g} / {burst}) must be at least the largest "
                f"tier's rate / burst ({top.rate_per_second:g} / {top_burst}): the stage throttles every "
                "client together, before its usage plan, so that tier's clients would be throttled by the "
                "stage first. Raise them, or leave them unset to size them from the tiers"
            )
        flood, floor = self.waf_flood_limit(), math.ceil(rate * WAF_WINDOW_S)
        if flood < floor:
            raise ValueError(
                f"api.waf.flood_limit_per_5min ({flood}) must be at least the stage's rate over WAF's window "
                f"({rate:g}/s x {WAF_WINDOW_S} s = {floor}): below it WAF blocks a fleet behind one address "
                "before the stage and the usage plans would; raise it or leave it unset"
            )
        return self

    def _planned(self, per_tier) -> float:
        """`per_tier(tier)` summed over the tiers: each tier is one usage-plan key, one bucket that
        all of its clients share, so this is the most the plans together let through. Clients are
        data (the clients table), so their number does not enter the template."""
        return sum(per_tier(t) for t in self.tiers.values())

    def stage_rate(self) -> float:
        """The stage throttle of every credentialed route (requests/s per method): as configured,
        else `api.stage_headroom` x the tiers' plan rates together."""
        if self.api.stage_rate_per_second is not None:
            return self.api.stage_rate_per_second
        return round(self.api.stage_headroom * self._planned(lambda t: t.rate_per_second), 3)

    def stage_burst(self) -> int:
        """The stage throttle's burst: as configured, else sized like `stage_rate` from bursts."""
        if self.api.stage_burst is not None:
            return self.api.stage_burst
        return math.ceil(self.api.stage_headroom * self._planned(lambda t: t.burst))

    def waf_flood_limit(self) -> int:
        """WAF's per-IP ceiling on requests with a well-formed credential, per `WAF_WINDOW_S`:
        as configured, else the stage rate over the window."""
        if self.api.waf.flood_limit_per_5min is not None:
            return self.api.waf.flood_limit_per_5min
        return math.ceil(self.stage_rate() * WAF_WINDOW_S)

    def _capacity_holds(self) -> None:
        """No verb may hold more slots than the edge has, and the verbs that wait on the search
        index together at most half of them (explicit `reserved_concurrency` values included). An
        edge explicitly left unreserved (`functions.mcp.reserved_concurrency: null`) bounds nothing."""
        edge = self.size_for("mcp").reserved_concurrency
        if edge is None:
            return
        search = 0
        for g in self.verb_groups():
            own = self.size_for(g).reserved_concurrency or 0
            if own > edge:
                raise ValueError(
                    f"functions.{g}.reserved_concurrency ({own}) exceeds the edge's ({edge}): raise "
                    "capacity.concurrent_calls instead of sizing one verb on its own"
                )
            search += own if g in SEARCH_GROUPS else 0
        if search * 2 > edge:
            raise ValueError(
                f"the verbs that wait on search ({', '.join(sorted(SEARCH_GROUPS))}) reserve {search} "
                f"of the edge's {edge} slots: at most half, so a slow index cannot starve the writes"
            )

    def verb_groups(self) -> tuple[str, ...]:
        """Every deployed verb function group (the registry's, plus any configured by name)."""
        known = {g for g in FUNCTION_TIMEOUT_S if g not in NON_VERB_GROUPS}
        return tuple(sorted(known | {g for g in self.functions if g not in NON_VERB_GROUPS | {"default"}}))

    def invoke_deadlines(self) -> dict[str, int]:
        """tool -> seconds the edge waits for it (env FLEETMEM_INVOKE_DEADLINES_S of the edge):
        its function's timeout plus `INVOKE_MARGIN_S`."""
        from fleetmem.lambda_routes import function_group
        from fleetmem.memory.verbs import REGISTRY

        return {t: invoke_deadline(self.size_for(function_group(t)).timeout_s) for t in REGISTRY}

    # Names every resource derives from, so the CLI and docs can compute them too.
    @property
    def prefix(self) -> str:
        return f"fleetmem-{self.stage}"

    def size_for(self, group: str) -> FunctionSize:
        """The group's size: what its own entry sets, else its deadline (`FUNCTION_TIMEOUT_S`) and
        its share of `capacity` (edge and verbs), else the `default` entry."""
        if group in OWN_SIZE:
            return self.functions.get(group) or FunctionSize(**OWN_SIZE[group])
        default = self.functions.get("default") or FunctionSize()
        own = self.functions.get(group)
        given = own.model_fields_set if own is not None else set()
        pick = own if own is not None else default
        timeout = pick.timeout_s if "timeout_s" in given else FUNCTION_TIMEOUT_S.get(group, default.timeout_s)
        reserved = pick.reserved_concurrency if "reserved_concurrency" in given else self._reserved_for(group, default)
        return FunctionSize(
            memory_mb=pick.memory_mb if "memory_mb" in given else default.memory_mb,
            timeout_s=timeout,
            provisioned_concurrency=pick.provisioned_concurrency,
            reserved_concurrency=reserved,
        )

    def _reserved_for(self, group: str, default: FunctionSize) -> int | None:
        calls = self.capacity.concurrent_calls
        if group == "mcp":
            return calls
        if group in NON_VERB_GROUPS:
            return default.reserved_concurrency
        return max(1, math.floor(calls * SEARCH_SHARE.get(group, VERB_SHARE)))

    @property
    def is_dev(self) -> bool:
        return _is_dev_stage(self.stage)

    @property
    def waf_enabled(self) -> bool:
        """WAF as configured, else on for every non-dev stage."""
        return self.api.waf.enabled if self.api.waf.enabled is not None else not self.is_dev

    def p99_ms_for(self, group: str) -> int:
        return self.alarms.p99_ms.get(group, self.alarms.p99_ms.get("default", 3000))

    def asset_path(self) -> Path:
        env = os.environ.get("FLEETMEM_LAMBDA_ASSET")
        return Path(env or self.asset_dir or DEFAULT_ASSET).expanduser().resolve()

    def heartbeat_table_bytes(self) -> int:
        """The size of FLEETMEM_HEARTBEATS as deployed (queue URLs at their longest: a 12-digit account)."""
        dest = {
            name: {
                "type": "sqs",
                "queue_url": f"https://sqs.{self.region}.amazonaws.com/123456789012/{self.prefix}-{name}",
            }
            if d.type == "sqs"
            else {"type": "https", "bus": f"{self.prefix}-heartbeat"}
            for name, d in self.destinations.items()
        }
        table = {
            h.name: {
                "tenant": h.tenant,
                "client_id": h.client_id,
                "session_id": h.session_id,
                "budget_tokens": h.budget_tokens,
                "destination": {**dest[h.destination], "name": h.destination},
            }
            for h in self.heartbeats
        }
        return len(json.dumps(table).encode())

    def heartbeat_schedule_name(self, name: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]", "-", f"{self.prefix}-{name}")[:64]


def _is_dev_stage(stage: str) -> bool:
    return stage in DEV_STAGES or stage.startswith("dev-")


def load_config(path: str | Path | None = None, *, default: str | Path | None = None) -> DeployConfig:
    """Read and validate the deploy config. Order: explicit path, $FLEETMEM_DEPLOY_CONFIG,
    ./fleetmem.deploy.json, then `default` when the caller names one (the local stack and the asset
    test use the example). Never the example silently: it is a dev config (no deletion protection,
    tables and user pool destroyed with the stack), so a deploy without a config of its own fails."""
    named = path or os.environ.get("FLEETMEM_DEPLOY_CONFIG")
    if named and not Path(named).is_file():
        raise FileNotFoundError(f"deploy config {named} does not exist (path given or $FLEETMEM_DEPLOY_CONFIG)")
    for cand in (named, ROOT / "fleetmem.deploy.json", default):
        if cand and Path(cand).is_file():
            return DeployConfig.model_validate(json.loads(Path(cand).read_text()))
    raise FileNotFoundError(
        f"no deploy config: copy {EXAMPLE.relative_to(ROOT)} to {ROOT / 'fleetmem.deploy.json'} and edit it "
        "(stage, account, deletion protection), or set FLEETMEM_DEPLOY_CONFIG=<path>. To synth the "
        f"example dev stage on purpose: FLEETMEM_DEPLOY_CONFIG={EXAMPLE.relative_to(ROOT)}"
    )
