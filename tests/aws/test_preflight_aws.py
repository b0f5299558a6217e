"""`fleetmem admin preflight` against moto's server (API Gateway and IAM as an account has them):
an account without API Gateway's CloudWatch role is refused with the fix before any `cdk deploy`;
with the role set it passes; a role set but since deleted is refused. Bedrock's model access API is
not served by moto, so that check must say it could not check (`unknown`), never `ok`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import boto3
import pytest
from infra.config import EXAMPLE, ROOT, load_config

from tests.aws import engines

pytestmark = [pytest.mark.slow]

REGION = load_config(EXAMPLE).region


def preflight(moto: str) -> tuple[int, dict[str, Any], str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
        "AWS_ENDPOINT_URL": moto,
        "AWS_ACCESS_KEY_ID": engines.CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": engines.CREDENTIALS["aws_secret_access_key"],
    }
    run = subprocess.run(
        [sys.executable, "-m", "fleetmem.cli", "admin", "preflight", "--config", str(EXAMPLE), "--json"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = json.loads(run.stdout) if run.stdout.strip() else {}
    return run.returncode, doc, run.stderr


def status(doc: dict[str, Any]) -> dict[str, str]:
    return {c["check"].split(":", 1)[0]: c["status"] for c in doc["checks"]}


def test_the_api_gateway_logging_role_is_checked_before_a_deploy(request: pytest.FixtureRequest) -> None:
    moto = engines.moto_endpoint(request.config)
    kw = {**engines.CREDENTIALS, "endpoint_url": moto, "region_name": REGION}
    apigw, iam = boto3.client("apigateway", **kw), boto3.client("iam", **kw)
    patch = [{"op": "replace", "path": "/cloudwatchRoleArn", "value": ""}]
    apigw.update_account(patchOperations=patch)  # an account that never set it
    try:
        code, doc, err = preflight(moto)
        assert code == 1, err
        assert status(doc)["apigateway_cloudwatch_role"] == "fail" and doc["ok"] is False
        (role_check,) = [c for c in doc["checks"] if c["check"] == "apigateway_cloudwatch_role"]
        assert "update-account" in role_check["fix"] and "AmazonAPIGatewayPushToCloudWatchLogs" in role_check["fix"]
        assert status(doc)["bedrock_model_access"] == "unknown"  # moto does not serve it: not "ok"

        name = f"apigw-logs-{uuid.uuid4().hex[:6]}"
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "apigateway.amazonaws.com"}, "Action": "sts:AssumeRole"}
            ],
        }
        arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        apigw.update_account(patchOperations=[{**patch[0], "value": arn}])
        code, doc, err = preflight(moto)
        assert code == 0 and status(doc)["apigateway_cloudwatch_role"] == "ok", err

        iam.delete_role(RoleName=name)  # set once, then the role was deleted
        code, doc, err = preflight(moto)
        assert code == 1 and status(doc)["apigateway_cloudwatch_role"] == "fail", err
    finally:
        apigw.update_account(patchOperations=patch)
