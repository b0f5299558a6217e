"""Optional canary releases (`release.canary`): CodeDeploy shifts each function's `live` alias to
the version a deploy publishes — 10 % first, the rest after the configured wait — and shifts it
back when that function's error alarm fires during the shift. Off by default: the alias moves at
once on deploy."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_codedeploy as codedeploy
from aws_cdk import aws_iam as iam

from constructs import Construct

from ..config import DeployConfig
from .common import Fn, acknowledge


class Release(Construct):
    def __init__(
        self, scope: Construct, id: str, *, config: DeployConfig, error_alarms: dict[str, tuple[Fn, cw.Alarm]]
    ) -> None:
        super().__init__(scope, id)
        canary = config.release.canary
        self.application = codedeploy.LambdaApplication(
            self, "Application", application_name=f"{config.prefix}-functions"
        )
        # One service role for every deployment group (each would otherwise make its own).
        self.role = iam.Role(
            self,
            "DeployRole",
            assumed_by=iam.ServicePrincipal("codedeploy.amazonaws.com"),
            description=f"{config.prefix}: CodeDeploy shifts the functions' live aliases",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSCodeDeployRoleForLambdaLimited")
            ],
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AWSCodeDeployRoleForLambdaLimited]",
            "CodeDeploy's documented least-privilege role for Lambda deployments: it reads and updates "
            "aliases and invokes only hook functions named CodeDeployHook_*.",
        )
        deployment = codedeploy.LambdaDeploymentConfig.from_lambda_deployment_config_name(
            self, "Config", f"CodeDeployDefault.Lambda{canary.type}"
        )
        self.groups: dict[str, codedeploy.LambdaDeploymentGroup] = {}
        for label, (fn, error_alarm) in error_alarms.items():
            self.groups[label] = codedeploy.LambdaDeploymentGroup(
                self,
                f"Group-{label}",
                application=self.application,
                deployment_group_name=f"{config.prefix}-{label}",
                alias=fn.alias,
                deployment_config=deployment,
                role=self.role,
                alarms=[error_alarm],
                auto_rollback=codedeploy.AutoRollbackConfig(failed_deployment=True, deployment_in_alarm=True),
            )
