"""The derived search index: a managed OpenSearch domain or an OpenSearch Serverless vector
collection, chosen by config. DynamoDB stays the source of truth; only the indexer writes here.

Access is path-scoped on both sides (the role policies and the domain's access policy): readers
may GET/HEAD the fleetmem indices and POST only to their `_search`/`_msearch` endpoints; only the
indexer may PUT/DELETE or POST elsewhere (`_bulk`). On Serverless the data access policy gives
readers ReadDocument/DescribeIndex only. No principal outside those roles has any access.

Sizes come from `search.preset` (infra/config.py SEARCH_PRESETS; explicit fields override it): "dev"
is one t3.small node, "production" three r6g data nodes over three zones behind three dedicated
masters, with a manual snapshot repository (an S3 bucket and the role OpenSearch assumes to write
it; registering it is one signed request, docs/deploy.md "Search presets").
"""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchserverless as aoss
from aws_cdk import aws_opensearchservice as opensearch
from aws_cdk import aws_s3 as s3

from constructs import Construct

from ..config import MASTER_NODES, DeployConfig
from .common import acknowledge, arn_ref

#: The repository name the registration command in docs/deploy.md uses.
SNAPSHOT_REPOSITORY = "fleetmem-manual"


class Search(Construct):
    def __init__(self, scope: Construct, id: str, *, config: DeployConfig) -> None:
        super().__init__(scope, id)
        self.flavour = config.search.flavour
        self.index_prefix = config.search.index_prefix
        self._readers: list[iam.IRole] = []
        self._writers: list[iam.IRole] = []
        self._finalized = False
        #: Stack outputs this construct adds (name -> value).
        self.outputs: dict[str, str] = {}
        if self.flavour == "domain":
            self._build_domain(config)
        else:
            self._build_collection(config)

    # -- managed domain ---------------------------------------------------------------------
    def _build_domain(self, config: DeployConfig) -> None:
        s = config.search
        removal = cdk.RemovalPolicy.RETAIN if config.tables.retain_on_delete else cdk.RemovalPolicy.DESTROY
        slow_search = logs.LogGroup(
            self, "SlowSearchLogs", retention=_retention(config), removal_policy=removal
        )
        slow_index = logs.LogGroup(
            self, "SlowIndexLogs", retention=_retention(config), removal_policy=removal
        )
        app_logs = logs.LogGroup(self, "AppLogs", retention=_retention(config), removal_policy=removal)
        # The domain's own log-policy custom resource would add a Node.js Lambda with a managed
        # policy; one explicit resource policy does the same job with nothing to run.
        log_policy = logs.ResourcePolicy(
            self,
            "OpenSearchLogsPolicy",
            policy_statements=[
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("es.amazonaws.com")],
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[g.log_group_arn for g in (slow_search, slow_index, app_logs)],
                )
            ],
        )
        self.domain_name = config.prefix[:28]
        self.dedicated_master = s.dedicated_master
        self.zone_awareness = s.zone_awareness
        self.domain = opensearch.Domain(
            self,
            "Domain",
            domain_name=self.domain_name,
            version=opensearch.EngineVersion.open_search(s.engine_version.split("_", 1)[1]),
            capacity=opensearch.CapacityConfig(
                data_nodes=s.instance_count,
                data_node_instance_type=s.instance_type,
                master_nodes=MASTER_NODES if s.dedicated_master else None,
                master_node_instance_type=s.master_instance_type if s.dedicated_master else None,
                multi_az_with_standby_enabled=False,
            ),
            ebs=opensearch.EbsOptions(
                volume_size=s.volume_gb, volume_type=cdk.aws_ec2.EbsDeviceVolumeType.GP3
            ),
            zone_awareness=opensearch.ZoneAwarenessConfig(
                enabled=True, availability_zone_count=s.availability_zones
            )
            if s.zone_awareness
            else None,
            automated_snapshot_start_hour=s.snapshot_hour,
            encryption_at_rest=opensearch.EncryptionAtRestOptions(enabled=True),
            node_to_node_encryption=True,
            enforce_https=True,
            tls_security_policy=opensearch.TLSSecurityPolicy.TLS_1_2,
            logging=opensearch.LoggingOptions(
                slow_search_log_enabled=True,
                slow_search_log_group=slow_search,
                slow_index_log_enabled=True,
                slow_index_log_group=slow_index,
                app_log_enabled=True,
                app_log_group=app_logs,
            ),
            suppress_logs_resource_policy=True,
            removal_policy=removal,
        )
        # OpenSearch checks at creation that it may write its log groups: without this ordering
        # CloudFormation may create the domain first and the creation fails.
        self.domain.node.add_dependency(log_policy)
        self.endpoint = "https://" + self.domain.domain_endpoint
        self.service = "es"
        if s.snapshot_repository:
            self._snapshot_repository(config)

    def _snapshot_repository(self, config: DeployConfig) -> None:
        """An S3 bucket for manual snapshots and the role OpenSearch assumes to write it. Kept when
        the stack is deleted: the snapshots are the backup."""
        self.snapshot_bucket = s3.Bucket(
            self,
            "SnapshotBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        acknowledge(
            self.snapshot_bucket,
            "AwsSolutions-S1",
            "Only OpenSearch's snapshot role writes this bucket; CloudTrail records who registered or "
            "restored a snapshot, so server access logs would add a second bucket for no new facts.",
        )
        self.snapshot_role = iam.Role(
            self,
            "SnapshotRole",
            assumed_by=iam.ServicePrincipal("es.amazonaws.com"),
            description=f"{config.prefix}: OpenSearch writes and reads manual snapshots in its bucket",
        )
        bucket = self.snapshot_bucket.bucket_arn
        self.snapshot_role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket]))
        self.snapshot_role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], resources=[f"{bucket}/*"])
        )
        acknowledge(
            self.snapshot_role,
            f"AwsSolutions-IAM5[Resource::{arn_ref(self.snapshot_bucket)}/*]",
            "OpenSearch names its snapshot objects itself: the role reads and writes objects of this one bucket only.",
        )
        self.outputs |= {
            "SnapshotBucket": self.snapshot_bucket.bucket_name,
            "SnapshotRoleArn": self.snapshot_role.role_arn,
        }

    def _finalize_domain(self) -> None:
        stack = cdk.Stack.of(self)
        # Built from the name, not the domain's ARN attribute: the policy lives on the domain itself.
        domain = f"arn:{stack.partition}:es:{stack.region}:{stack.account}:domain/{self.domain_name}"
        statements = []
        if self._readers:
            # Readers: GET/HEAD on the fleetmem indices, POST only to their _search/_msearch.
            idx = f"{domain}/{self.index_prefix}*"
            readers = [r.role_arn for r in self._readers]
            statements += [
                {
                    "Sid": "ReadersGetHead",
                    "Effect": "Allow",
                    "Principal": {"AWS": readers},
                    "Action": ["es:ESHttpGet", "es:ESHttpHead"],
                    "Resource": [idx, f"{idx}/*"],
                },
                {
                    "Sid": "ReadersSearch",
                    "Effect": "Allow",
                    "Principal": {"AWS": readers},
                    "Action": "es:ESHttpPost",
                    "Resource": [f"{idx}/_search", f"{idx}/_msearch", f"{domain}/_msearch"],
                },
            ]
        if self._writers:
            statements.append(
                {
                    "Sid": "IndexerWrites",
                    "Effect": "Allow",
                    "Principal": {"AWS": [r.role_arn for r in self._writers]},
                    "Action": ["es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPost", "es:ESHttpPut", "es:ESHttpDelete"],
                    "Resource": [domain, f"{domain}/*"],
                }
            )
        cfn = self.domain.node.default_child
        cfn.access_policies = {"Version": "2012-10-17", "Statement": statements}  # type: ignore[union-attr]
        acknowledge(
            self.domain,
            "AwsSolutions-OS1",
            "No VPC: the functions run outside a VPC (no NAT cost, faster cold starts); the domain "
            "accepts only SigV4-signed requests from the roles named in its access policy.",
        )
        acknowledge(
            self.domain,
            "AwsSolutions-OS3",
            "Access is by IAM principal (the function roles), not by source IP: Lambda has no fixed IPs.",
        )
        if not self.dedicated_master:
            acknowledge(
                self.domain,
                "AwsSolutions-OS4",
                "Dedicated masters are off in this stage's config (small single-purpose index); "
                "set search.dedicated_master for production sizes.",
            )
        if not self.zone_awareness:
            acknowledge(
                self.domain,
                "AwsSolutions-OS7",
                "Zone awareness is off in this stage's config; the index is derived data rebuilt "
                "from DynamoDB streams, so an AZ loss degrades search, not memory.",
            )

    # -- serverless collection --------------------------------------------------------------
    def _build_collection(self, config: DeployConfig) -> None:
        name = config.prefix[:32]
        self.collection_name = name
        enc = aoss.CfnSecurityPolicy(
            self,
            "Encryption",
            name=f"{name}-enc"[:32],
            type="encryption",
            policy=json.dumps(
                {
                    "Rules": [{"ResourceType": "collection", "Resource": [f"collection/{name}"]}],
                    "AWSOwnedKey": True,
                }
            ),
        )
        # Serverless collections without a VPC endpoint are reached over public HTTPS; every request is
        # still SigV4-signed and checked against the data access policy below.
        net = aoss.CfnSecurityPolicy(
            self,
            "Network",
            name=f"{name}-net"[:32],
            type="network",
            policy=json.dumps(
                [
                    {
                        "Rules": [{"ResourceType": "collection", "Resource": [f"collection/{name}"]}],
                        "AllowFromPublic": True,
                    }
                ]
            ),
        )
        self.collection = aoss.CfnCollection(
            self,
            "Collection",
            name=name,
            type="VECTORSEARCH",
            standby_replicas="ENABLED" if config.search.standby_replicas else "DISABLED",
        )
        self.collection.node.add_dependency(enc)
        self.collection.node.add_dependency(net)
        self.endpoint = self.collection.attr_collection_endpoint
        self.service = "aoss"

    # -- grants -----------------------------------------------------------------------------
    def grant_read(self, role: iam.IRole) -> None:
        self._readers.append(role)
        if self.flavour == "domain":
            arn = self.domain.domain_arn
            idx = f"{arn}/{self.index_prefix}*"
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=["es:ESHttpGet", "es:ESHttpHead"], resources=[idx, f"{idx}/*"])
            )
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["es:ESHttpPost"],
                    resources=[f"{idx}/_search", f"{idx}/_msearch", f"{arn}/_msearch"],
                )
            )
            ref = arn_ref(self.domain)
            for pattern in (
                f"{self.index_prefix}*",
                f"{self.index_prefix}*/*",
                f"{self.index_prefix}*/_search",
                f"{self.index_prefix}*/_msearch",
            ):
                acknowledge(
                    role,
                    f"AwsSolutions-IAM5[Resource::{ref}/{pattern}]",
                    f"Read-only access to the fleetmem indices ({self.index_prefix}*): GET/HEAD, and POST "
                    "only to _search/_msearch — index names carry the model id, so a prefix is needed.",
                )
        else:
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=["aoss:APIAccessAll"], resources=[self.collection.attr_arn])
            )

    def grant_write(self, role: iam.IRole) -> None:
        self._writers.append(role)
        if self.flavour == "domain":
            arn = self.domain.domain_arn
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=[
                        "es:ESHttpGet",
                        "es:ESHttpHead",
                        "es:ESHttpPost",
                        "es:ESHttpPut",
                        "es:ESHttpDelete",
                    ],
                    resources=[arn, f"{arn}/*"],
                )
            )
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::{arn_ref(self.domain)}/*]",
                "The indexer creates indices and writes through _bulk on this one domain.",
            )
        else:
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=["aoss:APIAccessAll"], resources=[self.collection.attr_arn])
            )

    def finalize(self) -> None:
        """Write the resource-side policy once every role has been granted: the domain's access
        policy or the collection's data access policy names exactly the granted roles."""
        if self._finalized:
            return
        self._finalized = True
        if self.flavour == "domain":
            self._finalize_domain()
            return
        name = self.collection_name
        index = f"index/{name}/{self.index_prefix}*"
        rules = []
        if self._readers:
            rules.append(
                {
                    "Rules": [
                        {
                            "ResourceType": "index",
                            "Resource": [index],
                            "Permission": ["aoss:ReadDocument", "aoss:DescribeIndex"],
                        }
                    ],
                    "Principal": [r.role_arn for r in self._readers],
                }
            )
        if self._writers:
            rules.append(
                {
                    "Rules": [
                        {
                            "ResourceType": "index",
                            "Resource": [index],
                            "Permission": [
                                "aoss:ReadDocument",
                                "aoss:WriteDocument",
                                "aoss:CreateIndex",
                                "aoss:UpdateIndex",
                                "aoss:DescribeIndex",
                            ],
                        },
                        {
                            "ResourceType": "collection",
                            "Resource": [f"collection/{name}"],
                            "Permission": ["aoss:DescribeCollectionItems"],
                        },
                    ],
                    "Principal": [r.role_arn for r in self._writers],
                }
            )
        aoss.CfnAccessPolicy(
            self,
            "DataAccess",
            name=f"{name}-data"[:32],
            type="data",
            policy=cdk.Stack.of(self).to_json_string(rules),
        )


def _retention(config: DeployConfig) -> logs.RetentionDays:
    days = config.log_retention_days
    for r in logs.RetentionDays:
        if r.value == days:
            return r
    return logs.RetentionDays.ONE_MONTH
