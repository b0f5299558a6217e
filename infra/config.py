"""Deployment configuration: one JSON file names everything a stage needs.

Read once by `infra/app.py` (path from `FLEETMEM_DEPLOY_CONFIG`, default `fleetmem.deploy.json` in the
repository root, falling back to `infra/config.example.json`). Validated with pydantic so a typo in a
tier or destination name fails at synth time, not at 3 a.m.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fleetmem.protocol import SCOPES, Scope

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = Path(__file__).resolve().parent / "config.example.json"
DEFAULT_ASSET = ROOT / "build" / "lambda"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TablesConfig(_Model):
    deletion_protection: bool = True
    point_in_time_recovery: bool = True
    #: RETAIN keeps the data when the stack is deleted; dev stages usually set false.
    retain_on_delete: bool = True


class SearchConfig(_Model):
    flavour: Literal["domain", "serverless"] = "domain"
    engine_version: str = "OpenSearch_2.19"
    instance_type: str = "t3.small.search"
    instance_count: int = 1
    volume_gb: int = 10
    zone_awareness: bool = False
    dedicated_master: bool = False
    index_prefix: str = "fleetmem"


class EmbeddingConfig(_Model):
    model: str = "amazon.titan-embed-text-v2:0"
    dimension: int = 1024


class LlmConfig(_Model):
    model: str = ""


class FunctionSize(_Model):
    memory_mb: int = 1024
    timeout_s: int = 15
    #: Warm sandboxes kept ready (edge only): the MCP SDK import dominates the edge's cold start.
    provisioned_concurrency: int = Field(default=0, ge=0)


class TierConfig(_Model):
    rate_per_second: float
    burst: int
    quota_per_day: int


class ClientConfig(_Model):
    client_id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    tenant: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
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
    tenant: str
    client_id: str
    session_id: str = Field(min_length=1, max_length=200)
    schedule: str  # rate(...) | cron(...) | at(...)
    timezone: str | None = None
    budget_tokens: int = Field(default=2000, ge=1)
    destination: str


class AlarmsConfig(_Model):
    email: str | None = None
    p99_ms: dict[str, int] = Field(default_factory=lambda: {"default": 3000})
    authorizer_denials_per_5min: int = 50


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
    functions: dict[str, FunctionSize] = Field(default_factory=dict)
    cognito_domain_prefix: str = Field(pattern=r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
    tiers: dict[str, TierConfig]
    default_tier: str = "standard"
    clients: tuple[ClientConfig, ...] = ()
    destinations: dict[str, DestinationConfig] = Field(default_factory=dict)
    heartbeats: tuple[HeartbeatConfig, ...] = ()
    alarms: AlarmsConfig = AlarmsConfig()
    #: Public base URL when a custom domain fronts the API (e.g. "https://memory.example.com"); by
    #: default the execute-api URL with the stage is used in 401 challenges and OAuth metadata.
    public_url: str | None = None
    #: Directory holding the built Lambda code (scripts/build-lambda); FLEETMEM_LAMBDA_ASSET overrides.
    asset_dir: str | None = None

    @model_validator(mode="after")
    def _references_resolve(self) -> DeployConfig:
        if self.default_tier not in self.tiers:
            raise ValueError(f"default_tier {self.default_tier!r} is not a configured tier")
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
        return self

    # Names every resource derives from, so the CLI and docs can compute them too.
    @property
    def prefix(self) -> str:
        return f"fleetmem-{self.stage}"

    def size_for(self, group: str) -> FunctionSize:
        return self.functions.get(group) or self.functions.get("default") or FunctionSize()

    def p99_ms_for(self, group: str) -> int:
        return self.alarms.p99_ms.get(group, self.alarms.p99_ms.get("default", 3000))

    def asset_path(self) -> Path:
        env = os.environ.get("FLEETMEM_LAMBDA_ASSET")
        return Path(env or self.asset_dir or DEFAULT_ASSET).expanduser().resolve()

    def heartbeat_schedule_name(self, name: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]", "-", f"{self.prefix}-{name}")[:64]


def load_config(path: str | Path | None = None) -> DeployConfig:
    """Read and validate the deploy config. Order: explicit path, $FLEETMEM_DEPLOY_CONFIG,
    ./fleetmem.deploy.json, the bundled example."""
    candidates = [path, os.environ.get("FLEETMEM_DEPLOY_CONFIG"), ROOT / "fleetmem.deploy.json", EXAMPLE]
    for cand in candidates:
        if cand and Path(cand).is_file():
            return DeployConfig.model_validate(json.loads(Path(cand).read_text()))
    raise FileNotFoundError("no deploy config found (set FLEETMEM_DEPLOY_CONFIG)")
