"""CDK entry point: `cdk synth` / `cdk deploy` from the repository root (see docs/deploy.md).

Synthesizes offline: no context lookups, no credentials. cdk-nag's AWS Solutions pack runs as a
validation plugin, so any unacknowledged finding fails the synth.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # `python infra/app.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks
from pydantic import ValidationError

from infra.config import DeployConfig, load_config
from infra.stacks.fleetmem_stack import FleetmemStack


def build_app(config: DeployConfig, *, nag: bool = True, outdir: str | None = None) -> tuple[cdk.App, FleetmemStack]:
    app = cdk.App(outdir=outdir) if outdir else cdk.App()
    stack = FleetmemStack(
        app, config.prefix, config=config, env=cdk.Environment(account=config.account, region=config.region)
    )
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack


def main() -> None:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    try:
        config = load_config()
    except FileNotFoundError as exc:
        print(f"fleetmem: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except ValidationError as exc:  # what is wrong, why, and how to fix it: no traceback
        print(f"fleetmem: the deploy config is refused:\n{exc}", file=sys.stderr)
        raise SystemExit(2) from None
    app, _ = build_app(config)
    app.synth()


if __name__ == "__main__":
    main()
