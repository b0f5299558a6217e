"""The per-stage secret that signs verb invocations and authorizer contexts, and its rotation.

The MCP edge signs every synchronous invoke payload (tenant, client, scopes, tool, arguments) and the
authorizer its context with an HMAC keyed by this secret, and each function acting on them verifies
it, so a principal that may call `lambda:InvokeFunction` in the account still cannot act as a
tenant with a payload it made up. Only the edge, the authorizer and the verb functions read it; its
ARN reaches them as FLEETMEM_INVOKE_SIGNING_SECRET_ARN, the keys' TTL as FLEETMEM_SIGNING_KEY_TTL_S.

Secrets Manager rotates it every `signing.rotation_days` with the rotation function
(`functions/signing_rotation`, `fleetmem.adapters.aws.signing_keys.rotation_step`): the new key
becomes AWSCURRENT, the replaced one AWSPREVIOUS, and the functions sign with the current key and
accept both, so a rotation refuses no call. The rotation function refuses a rotation while the key it
would retire may still be presented (FLEETMEM_SIGNING_KEY_ACCEPTED_S, `signing_key_accepted_s`), and
its resource policy lets only Secrets Manager invoke it, for this secret in this account.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as sm

from constructs import Construct
from fleetmem.config import ENV_INVOKE_SIGNING_SECRET_ARN, ENV_SIGNING_KEY_TTL_S
from fleetmem.wiring import ENV_KEY_ACCEPTED_S

from ..config import DeployConfig
from .common import Fn, FunctionFactory, acknowledge

ROTATION_GROUP = "signing_rotation"


class InvokeSigning(Construct):
    def __init__(self, scope: Construct, id: str, *, config: DeployConfig, factory: FunctionFactory) -> None:
        super().__init__(scope, id)
        self.config = config
        self.secret = sm.Secret(
            self,
            "Secret",
            description=f"{config.prefix}: HMAC key signing the edge's verb invocations",
            generate_secret_string=sm.SecretStringGenerator(exclude_punctuation=True, password_length=64),
        )
        self.rotation: Fn = factory.make(
            self,
            "Rotation",
            group=ROTATION_GROUP,
            handler=f"functions.{ROTATION_GROUP}.handler.handler",
            description="fleetmem signing-key rotation (Secrets Manager's four rotation steps)",
            # the overlap window: a rotation inside it would retire a key still being presented
            env={ENV_KEY_ACCEPTED_S: str(config.signing_key_accepted_s())},
        )
        self.schedule = self.secret.add_rotation_schedule(
            "Schedule",
            rotation_lambda=self.rotation.alias,
            automatically_after=cdk.Duration.days(config.signing.rotation_days),
            # the generated key is current at first deploy; the schedule rotates from there
            rotate_immediately_on_update=False,
        )
        # Only Secrets Manager, and only for this secret in this account, may invoke the rotation
        # function (the confused-deputy conditions: SourceArn and SourceAccount).
        for child in self.rotation.alias.node.children:
            if isinstance(child, lambda_.CfnPermission):
                child.add_property_override("SourceArn", self.secret.secret_arn)
                child.add_property_override("SourceAccount", cdk.Stack.of(self).account)
        acknowledge(
            self.rotation.role,
            "AwsSolutions-IAM5[Resource::*]",
            "Only actions without resource-level permissions use '*': X-Ray PutTraceSegments/"
            "PutTelemetryRecords and secretsmanager:GetRandomPassword, which generates the new key.",
        )

    @property
    def env(self) -> dict[str, str]:
        return {
            ENV_INVOKE_SIGNING_SECRET_ARN: self.secret.secret_arn,
            ENV_SIGNING_KEY_TTL_S: str(self.config.signing.key_ttl_s),
        }

    def grant(self, role: iam.IRole) -> None:
        self.secret.grant_read(role)
