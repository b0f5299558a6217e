"""Fine-grained access control's role mapping, done by the deploy: a CloudFormation custom resource
whose onEvent function (`functions/search_rolemap`, run by the CDK Provider framework) PUTs the
OpenSearch roles `fleetmem_reader` (read on `<prefix>-docs-*`) and `fleetmem_indexer` (crud,
create_index, manage_aliases) and maps the searching verbs' and the indexer's roles to them
(fleetmem.adapters.aws.search_roles). Built only when `search.fine_grained_access_control` is on.

Least privilege: the function's own role may do one thing beyond its logs and traces, assume the
stage's search-admin role (fine-grained access control's master, the only principal the security
API admits); it asks STS for that session with a session policy that leaves only the four PUTs.
The function role is not the master itself, so nothing that runs as it holds the admin's reindex,
delete or snapshot paths, and the operators keep the one master role they assume today.

Create and Update write the mappings (idempotent PUTs: an update or a retry writes the same
state); the role ARNs are properties, so a replaced role re-runs it. Delete leaves them: the
domain may be retained with its data. A refusal fails the deploy with the security API's reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr

from constructs import Construct

from ..config import DeployConfig
from .common import FunctionFactory, acknowledge, retention

if TYPE_CHECKING:
    from .search import Search

GROUP = "search_rolemap"
RESOURCE_TYPE = "Custom::FleetmemSearchRoleMapping"


class SearchRoleMapping(Construct):
    def __init__(
        self, scope: Construct, id: str, *, config: DeployConfig, factory: FunctionFactory, search: Search
    ) -> None:
        super().__init__(scope, id)
        admin = search.admin_role
        if admin is None:
            raise ValueError("the search role mapping needs fine-grained access control's master role")
        self.fn = factory.make(
            self,
            "Function",
            group=GROUP,
            handler=f"functions.{GROUP}.handler.handler",
            description="fleetmem search role mapping (fine-grained access control roles, on deploy)",
        )
        self.fn.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[admin.role_arn])
        )
        provider_logs = logs.LogGroup(
            self, "ProviderLogs", retention=retention(config), removal_policy=cdk.RemovalPolicy.DESTROY
        )
        self.provider = cr.Provider(self, "Provider", on_event_handler=self.fn.alias, log_group=provider_logs)
        stack = cdk.Stack.of(self)
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=self.provider.service_token,
            resource_type=RESOURCE_TYPE,
            properties={
                "Endpoint": search.endpoint,
                "Region": stack.region,
                "DomainArn": search.domain.domain_arn,
                "AdminRoleArn": admin.role_arn,
                "IndexPattern": search.docs_pattern,
                "ReaderRoleArns": [r.role_arn for r in search.readers],
                "IndexerRoleArns": [r.role_arn for r in search.writers],
            },
        )
        # the domain must exist and the admin role hold its security API paths before the PUTs
        self.resource.node.add_dependency(search.domain)
        self.resource.node.add_dependency(admin)
        acknowledge(
            self.provider,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "The CDK Provider framework's own function (it relays CloudFormation's events to the mapping "
            "function): CloudWatch Logs only, as the framework ships it.",
        )
