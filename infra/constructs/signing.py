"""The per-stage secret that signs verb invocations.

The MCP edge signs every synchronous invoke payload (tenant, client, scopes, tool, arguments) with an
HMAC keyed by this secret and each verb function verifies it, so a principal that may call
`lambda:InvokeFunction` in the account still cannot act as a tenant with a payload it made up.
Only the edge and the verb functions can read it; its ARN reaches them as
FLEETMEM_INVOKE_SIGNING_SECRET_ARN.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as sm

from constructs import Construct
from fleetmem.config import ENV_INVOKE_SIGNING_SECRET_ARN

from ..config import DeployConfig
from .common import acknowledge


class InvokeSigning(Construct):
    def __init__(self, scope: Construct, id: str, *, config: DeployConfig) -> None:
        super().__init__(scope, id)
        self.secret = sm.Secret(
            self,
            "Secret",
            description=f"{config.prefix}: HMAC key signing the edge's verb invocations",
            generate_secret_string=sm.SecretStringGenerator(exclude_punctuation=True, password_length=64),
        )
        acknowledge(
            self.secret,
            "AwsSolutions-SMG4",
            "A symmetric HMAC key shared by the edge and the verb functions, never sent to a caller; "
            "rotating it is a manual put-secret-value (docs/operate.md), because signer and verifiers "
            "must switch together.",
        )

    @property
    def env(self) -> dict[str, str]:
        return {ENV_INVOKE_SIGNING_SECRET_ARN: self.secret.secret_arn}

    def grant(self, role: iam.IRole) -> None:
        self.secret.grant_read(role)
