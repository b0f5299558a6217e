"""Synthesize the CDK app once per flavour, offline, against a tiny stub code asset.

No AWS credentials or region variables are visible to the synth (removed for the session), which
proves `cdk synth` needs no account access and no context lookups.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@dataclass
class Synth:
    config: object
    template: dict
    metadata: dict
    violations: list
    stack: object
    template_text: str = ""

    def resources(self, type_: str) -> dict[str, dict]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == type_}


def _synth(tmp: Path, overrides: dict) -> Synth:
    from infra.app import build_app
    from infra.config import EXAMPLE, DeployConfig

    raw = json.loads(EXAMPLE.read_text())
    raw.update(overrides)
    stub = tmp / "asset"
    stub.mkdir()
    (stub / "README").write_text("stub asset for synth tests\n")
    raw["asset_dir"] = str(stub)
    config = DeployConfig.model_validate(raw)
    outdir = tmp / "cdk.out"
    app, stack = build_app(config, outdir=str(outdir))
    try:
        app.synth()
    except Exception:  # the nag plugin failed the synth: surface its findings in the assertion
        pass
    report = outdir / "validation-report.json"
    violations = []
    if report.exists():
        for plugin in json.loads(report.read_text()).get("pluginReports", []):
            for v in plugin.get("violations", []):
                violations.append((v["ruleName"], sorted(c["constructPath"] for c in v["violatingConstructs"])))
    name = config.prefix
    text = (outdir / f"{name}.template.json").read_text()
    metadata = json.loads((outdir / f"{name}.metadata.json").read_text())
    return Synth(config, json.loads(text), metadata, violations, stack, text)


@pytest.fixture(scope="session")
def _no_aws_env():
    saved = {
        k: os.environ.pop(k)
        for k in list(os.environ)
        if k.startswith("AWS_") or k in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION")
    }
    yield
    os.environ.update(saved)


@pytest.fixture(scope="session")
def domain_synth(tmp_path_factory, _no_aws_env) -> Synth:
    return _synth(tmp_path_factory.mktemp("domain"), {})


@pytest.fixture(scope="session")
def serverless_synth(tmp_path_factory, _no_aws_env) -> Synth:
    search = json.loads((ROOT / "infra" / "config.example.json").read_text())["search"] | {"flavour": "serverless"}
    return _synth(
        tmp_path_factory.mktemp("aoss"),
        {
            "stage": "prod",
            "search": search,
            "tables": {"deletion_protection": True},
            "functions": {
                "default": {"memory_mb": 1024, "timeout_s": 15},
                "synthesize": {"memory_mb": 1536, "timeout_s": 25},
                "mcp": {"memory_mb": 1024, "timeout_s": 28, "provisioned_concurrency": 2},
            },
            # no Cognito app clients (API tokens only), no usage keys
            "clients": [],
            # a non-dev stage needs an alarm subscriber
            "alarms": _example_alarms()
            | {"subscribers": [{"type": "https", "endpoint": "https://hooks.example.com/alarms"}]},
        },
    )


def _example_alarms() -> dict:
    return json.loads((ROOT / "infra" / "config.example.json").read_text())["alarms"]


@pytest.fixture(scope="session")
def production_synth(tmp_path_factory, _no_aws_env) -> Synth:
    """A production stage as the docs suggest: the production search preset, tables protected by
    the stage's defaults (nothing set), two alarm subscribers and canary releases on."""
    return _synth(
        tmp_path_factory.mktemp("prod"),
        {
            "stage": "prod",
            "search": {"flavour": "domain", "preset": "production"},
            "tables": {},
            "alarms": _example_alarms()
            | {
                "subscribers": [
                    {"type": "email", "endpoint": "oncall@example.com"},
                    {"type": "https", "endpoint": "https://hooks.example.com/alarms"},
                ]
            },
            "release": {"canary": {"enabled": True, "type": "Canary10Percent10Minutes"}},
        },
    )


@pytest.fixture(scope="session")
def waf_synth(tmp_path_factory, _no_aws_env) -> Synth:
    """Managed domain with WAF asked for, rotated usage keys (version 3), the account-wide API Gateway
    CloudWatch role opted into, and no LLM."""
    api = json.loads((ROOT / "infra" / "config.example.json").read_text())["api"]
    return _synth(
        tmp_path_factory.mktemp("waf"),
        {
            "stage": "edge",
            "api": api
            | {"usage_key_version": 3, "waf": {"enabled": True, "rate_limit_per_5min": 500}, "cloud_watch_role": True},
            "llm": {"model": ""},
            "search": {"flavour": "domain", "instance_count": 2, "zone_awareness": True},
            "alarms": {"email": "ops@example.com"},
        },
    )
