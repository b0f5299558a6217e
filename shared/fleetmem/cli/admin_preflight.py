"""`fleetmem admin preflight` (docs/deploy.md, "Before the first deploy"): the account preconditions the
template needs (API Gateway's CloudWatch role, Bedrock model access), checked before `cdk deploy`.
"""

from __future__ import annotations

import argparse
from typing import Any

from fleetmem.cli.admin_args import admin_parser, answered_by
from fleetmem.console import EXIT_FAILED, EXIT_OK, CommandFailed, Output
from fleetmem.protocol import CONTRACT_VERSION

#: The managed policy API Gateway's CloudWatch role needs, and how to set the role once per account
#: and region (docs/deploy.md, prerequisites).
APIGW_LOGS_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs"
APIGW_ROLE_FIX = (
    "Create a role API Gateway can assume with the managed policy AmazonAPIGatewayPushToCloudWatchLogs, "
    "then set it for the account and region: aws apigateway update-account --patch-operations "
    "op=replace,path=/cloudwatchRoleArn,value=<role ARN> (or set api.cloud_watch_role: true in the deploy "
    "config to let this stack own it; docs/deploy.md, prerequisites)."
)


def add_preflight(asub: Any, common: argparse.ArgumentParser) -> None:
    p = admin_parser(
        asub,
        common,
        "preflight",
        help="before `cdk deploy`: check the account preconditions the template needs (API Gateway's "
        "CloudWatch role, Bedrock model access) and print what to fix",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="PATH",
        help="the deploy config (default: $FLEETMEM_DEPLOY_CONFIG, then ./fleetmem.deploy.json)",
    )
    answered_by(p, cmd_preflight)


def _deploy_config(path: str | None) -> Any:
    try:
        from infra.config import load_config
    except ImportError:
        raise CommandFailed.usage(
            "admin preflight reads the deploy config with the CDK app's own loader (infra.config), which is not "
            "importable here.",
            "Run it from the fleetmem checkout you deploy from (where `cdk deploy` runs).",
            code="invalid_config",
        ) from None
    try:
        return load_config(path)
    except Exception as exc:
        raise CommandFailed.usage(
            f"The deploy config does not load: {exc}", "Fix the config, then run it again.", code="invalid_config"
        ) from None


def preflight_checks(
    *, apigateway: Any, iam: Any, bedrock: Any, creates_cloud_watch_role: bool, models: list[str]
) -> list[dict[str, Any]]:
    """Each check: {check, status (ok | fail | unknown), detail, fix}. A check that cannot be made
    (the API refuses or does not answer) is `unknown`, never `ok`."""
    checks: list[dict[str, Any]] = []

    def add(check: str, status: str, detail: str, fix: str | None = None) -> None:
        checks.append({"check": check, "status": status, "detail": detail, "fix": fix})

    if creates_cloud_watch_role:
        add(
            "apigateway_cloudwatch_role",
            "ok",
            "the stack creates the account's API Gateway CloudWatch role (api.cloud_watch_role: true)",
        )
    else:
        try:
            arn = str(apigateway.get_account().get("cloudwatchRoleArn") or "")
        except Exception as exc:
            add(
                "apigateway_cloudwatch_role",
                "unknown",
                f"apigateway:GetAccount answered {type(exc).__name__}",
                "Run it with credentials allowed apigateway:GET on /account.",
            )
            arn = None
        if arn == "":
            add(
                "apigateway_cloudwatch_role",
                "fail",
                "API Gateway has no CloudWatch role in this account and region: the stage's execution and access "
                "logging fails the deploy (after the search domain was created).",
                APIGW_ROLE_FIX,
            )
        elif arn:
            name = arn.rsplit("/", 1)[-1]
            try:
                iam.get_role(RoleName=name)
                add("apigateway_cloudwatch_role", "ok", f"set: {arn}")
            except Exception as exc:
                missing = getattr(exc, "response", {}).get("Error", {}).get("Code") == "NoSuchEntity"
                if missing:
                    add(
                        "apigateway_cloudwatch_role",
                        "fail",
                        f"the account's API Gateway CloudWatch role {arn} no longer exists",
                        APIGW_ROLE_FIX,
                    )
                else:
                    add(
                        "apigateway_cloudwatch_role",
                        "unknown",
                        f"set to {arn}; iam:GetRole answered {type(exc).__name__}",
                    )
    for model in models:
        try:
            got = bedrock.get_foundation_model_availability(modelId=model)
        except Exception as exc:
            add(
                f"bedrock_model_access:{model}",
                "unknown",
                f"bedrock:GetFoundationModelAvailability answered {type(exc).__name__}",
                f"Check in the Bedrock console that {model} is enabled for this account and region.",
            )
            continue
        status = str(got.get("authorizationStatus") or "").upper()
        available = str(got.get("entitlementAvailability") or "").upper()
        if status == "AUTHORIZED" and available == "AVAILABLE":
            add(f"bedrock_model_access:{model}", "ok", "authorized and available")
        else:
            add(
                f"bedrock_model_access:{model}",
                "fail",
                f"authorization {status or '?'}, entitlement {available or '?'}: the functions' calls would be refused",
                f"Enable {model} in the Bedrock console (Model access) for this account and region.",
            )
    return checks


def cmd_preflight(args: argparse.Namespace, out: Output) -> int:
    from fleetmem.wiring import sdk_client

    cfg = _deploy_config(args.config)
    models = [m for m in (cfg.embedding.model, cfg.llm.model) if m]
    checks = preflight_checks(
        apigateway=sdk_client("preflight_apigateway", region=cfg.region),
        iam=sdk_client("preflight_iam", region=cfg.region),
        bedrock=sdk_client("preflight_bedrock", region=cfg.region),
        creates_cloud_watch_role=cfg.api.cloud_watch_role,
        models=models,
    )
    failed = [c for c in checks if c["status"] == "fail"]
    if out.as_json:
        out.document(
            {
                "stage": cfg.stage,
                "region": cfg.region,
                "checks": checks,
                "ok": not failed,
                "contract_version": CONTRACT_VERSION,
            }
        )
    else:
        for c in checks:
            Output.err(f"{c['status']:>7}  {c['check']}: {c['detail']}")
            if c["status"] != "ok" and c["fix"]:
                Output.err(f"         fix: {c['fix']}")
        Output.err("Ready to deploy." if not failed else f"{len(failed)} precondition(s) to fix before `cdk deploy`.")
    return EXIT_OK if not failed else EXIT_FAILED
