"""The derived search index: a managed OpenSearch domain or an OpenSearch Serverless vector
collection, chosen by config. DynamoDB stays the source of truth; only the indexer writes here.

Access is path-scoped on both sides (the role policies and the domain's access policy), and no
role is granted a path at the domain's root (`/_msearch`, `/_bulk`, `/_all`, `domain/NAME/*`):
readers (the searching verbs) may GET/POST only `<read alias>/_search` and `<read alias>/_msearch`
(and the same on the model's first index, which answers while a stage older than aliases has
none); the indexer may HEAD/GET/PUT the docs indices (`<prefix>-docs-*`: create, alias) and POST
only to their `_bulk` and `_search`; nothing may DELETE but the search-admin role (fine-grained
access control's master, for `fleetmem admin reindex`, tenant deletion and snapshots), whose paths
are listed in `ADMIN_PATHS`. The client names the index in every path
(adapters/aws/opensearch.py). On Serverless the data access policy gives readers
ReadDocument/DescribeIndex only. No principal outside those roles has any access.

Sizes come from `search.preset` (infra/config_sections.py SEARCH_PRESETS; explicit fields override it): "dev"
is one t3.small node, "production" three r6g data nodes over three zones (Multi-AZ with Standby)
behind three dedicated masters, fine-grained access control with an IAM master role (the deploy
maps the function roles to OpenSearch roles itself: search_rolemap.py), audit logs,
and a manual snapshot repository (an S3 bucket and the role OpenSearch assumes to write it;
registering it is one signed request, docs/deploy.md "Search presets"). `search.vpc` places the
domain, and the functions that talk to it, in a VPC.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchserverless as aoss
from aws_cdk import aws_opensearchservice as opensearch

from constructs import Construct
from fleetmem.wiring import alias_name, index_name

from ..config import MASTER_NODES, DeployConfig
from .common import FunctionFactory, acknowledge, arn_ref
from .search_rolemap import SearchRoleMapping
from .search_snapshots import snapshot_repository

#: The repository name the registration command in docs/deploy.md uses.
SNAPSHOT_REPOSITORY = "fleetmem-manual"

#: Methods of the OpenSearch HTTP API as IAM actions.
GET, HEAD, PUT, POST, DELETE, PATCH = (f"es:ESHttp{m}" for m in ("Get", "Head", "Put", "Post", "Delete", "Patch"))
#: What the search-admin role may call beside the docs indices (`{docs}`: every method): the alias
#: swap of `fleetmem admin reindex`, the snapshot repository, fine-grained access control's
#: roles and mappings, cluster health. Paths under the domain, method by method.
ADMIN_PATHS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    ((GET, HEAD, PUT, POST, DELETE), ("{docs}",)),
    ((GET, HEAD), ("_alias/*",)),
    ((POST,), ("_aliases",)),
    ((GET, PUT, POST, DELETE), ("_snapshot/*",)),
    ((GET, PUT, PATCH, DELETE), ("_plugins/_security/api/*",)),
    ((GET,), ("_cluster/health", "_cat/*")),
)


class Search(Construct):
    def __init__(self, scope: Construct, id: str, *, config: DeployConfig) -> None:
        super().__init__(scope, id)
        self.flavour = config.search.flavour
        self.index_prefix = config.search.index_prefix
        #: What readers search: the read alias, and the model's first index (module doc).
        emb = config.embedding
        self.read_targets = (
            alias_name(self.index_prefix, emb.model, emb.dimension),
            index_name(self.index_prefix, emb.model, emb.dimension),
        )
        #: Every docs index of the prefix (the indexer's and the admin's), as the client names them.
        self.docs_pattern = f"{self.index_prefix}-docs-*"
        self.vpc = config.search.vpc if self.flavour == "domain" else None
        self.fine_grained = self.flavour == "domain" and config.search.fine_grained_access_control
        self.admin_role: iam.Role | None = None
        #: Fine-grained access control's role mapping, made by the deploy (`SearchRoleMapping`).
        self.role_mapping: SearchRoleMapping | None = None
        self._config = config
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
        slow_search, slow_index, app_logs, audit_logs, log_policy = self._domain_logs(config, removal)
        self.domain_name = config.prefix[:28]
        fine_grained = None
        if self.fine_grained:
            # The master user is an IAM role (no internal user database, so no password anywhere);
            # operators assume it to run `fleetmem admin`, and the deploy's role mapping assumes it
            # narrowed to its four PUTs (search_rolemap.py).
            self.admin_role = iam.Role(
                self,
                "AdminRole",
                assumed_by=iam.AccountRootPrincipal(),
                description=f"{config.prefix}: search admin (fine-grained access control master, reindex, snapshots)",
            )
            fine_grained = opensearch.AdvancedSecurityOptions(master_user_arn=self.admin_role.role_arn)
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
                multi_az_with_standby_enabled=s.multi_az_with_standby,
            ),
            ebs=opensearch.EbsOptions(volume_size=s.volume_gb, volume_type=cdk.aws_ec2.EbsDeviceVolumeType.GP3),
            zone_awareness=opensearch.ZoneAwarenessConfig(enabled=True, availability_zone_count=s.availability_zones)
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
                audit_log_enabled=s.audit_logs or None,
                audit_log_group=audit_logs,
            ),
            fine_grained_access_control=fine_grained,
            suppress_logs_resource_policy=True,
            removal_policy=removal,
        )
        # OpenSearch checks at creation that it may write its log groups: without this ordering
        # CloudFormation may create the domain first and the creation fails.
        self.domain.node.add_dependency(log_policy)
        if self.vpc is not None:
            # subnets and groups the operator owns, by id (no lookup: the synth needs no account access)
            cfn = self.domain.node.default_child
            cfn.vpc_options = opensearch.CfnDomain.VPCOptionsProperty(  # type: ignore[union-attr]
                subnet_ids=list(self.vpc.subnet_ids), security_group_ids=list(self.vpc.security_group_ids)
            )
        if self.admin_role is not None:
            self._grant_admin(self.admin_role)
            self.outputs["SearchAdminRoleArn"] = self.admin_role.role_arn
        self.endpoint = "https://" + self.domain.domain_endpoint
        self.service = "es"
        if s.snapshot_repository:
            self.snapshot_bucket, self.snapshot_role = snapshot_repository(self, config, self.admin_role)
            self.outputs |= {
                "SnapshotBucket": self.snapshot_bucket.bucket_name,
                "SnapshotRoleArn": self.snapshot_role.role_arn,
            }

    def _domain_logs(
        self, config: DeployConfig, removal: cdk.RemovalPolicy
    ) -> tuple[logs.LogGroup, logs.LogGroup, logs.LogGroup, logs.LogGroup | None, logs.ResourcePolicy]:
        """The domain's slow-search, slow-index, application and (when on) audit log groups, and
        the resource policy that lets OpenSearch write them."""
        s = config.search
        slow_search = logs.LogGroup(self, "SlowSearchLogs", retention=_retention(config), removal_policy=removal)
        slow_index = logs.LogGroup(self, "SlowIndexLogs", retention=_retention(config), removal_policy=removal)
        app_logs = logs.LogGroup(self, "AppLogs", retention=_retention(config), removal_policy=removal)
        groups = [slow_search, slow_index, app_logs]
        audit_logs = None
        if s.audit_logs:
            audit_logs = logs.LogGroup(self, "AuditLogs", retention=_retention(config), removal_policy=removal)
            groups.append(audit_logs)
        # The domain's own log-policy custom resource would add a Node.js Lambda with a managed
        # policy; one explicit resource policy does the same job with nothing to run.
        log_policy = logs.ResourcePolicy(
            self,
            "OpenSearchLogsPolicy",
            policy_statements=[
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("es.amazonaws.com")],
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[g.log_group_arn for g in groups],
                )
            ],
        )
        return slow_search, slow_index, app_logs, audit_logs, log_policy

    def _read_paths(self, domain: str) -> list[str]:
        return [f"{domain}/{target}/{endpoint}" for target in self.read_targets for endpoint in ("_search", "_msearch")]

    def _indexer_paths(self, domain: str) -> list[tuple[list[str], list[str]]]:
        """(actions, resources) of the indexer: create/check the docs indices and their alias, and
        POST to their `_bulk` (writes, deletes) and `_search` (a page's chunks, Serverless lookups)."""
        docs = f"{domain}/{self.docs_pattern}"
        return [([GET, HEAD, PUT], [docs]), ([POST], [f"{docs}/_bulk", f"{docs}/_search"])]

    @property
    def readers(self) -> list[iam.IRole]:
        return list(self._readers)

    @property
    def writers(self) -> list[iam.IRole]:
        return list(self._writers)

    def _finalize_domain(self, factory: FunctionFactory) -> None:
        stack = cdk.Stack.of(self)
        # Built from the name, not the domain's ARN attribute: the policy lives on the domain itself.
        domain = f"arn:{stack.partition}:es:{stack.region}:{stack.account}:domain/{self.domain_name}"
        statements = []
        if self._readers:
            statements.append(
                {
                    "Sid": "ReadersSearchTheReadAlias",
                    "Effect": "Allow",
                    "Principal": {"AWS": [r.role_arn for r in self._readers]},
                    "Action": [GET, POST],
                    "Resource": self._read_paths(domain),
                }
            )
        if self._writers:
            for i, (actions, resources) in enumerate(self._indexer_paths(domain)):
                statements.append(
                    {
                        "Sid": f"IndexerWrites{i}",
                        "Effect": "Allow",
                        "Principal": {"AWS": [r.role_arn for r in self._writers]},
                        "Action": actions,
                        "Resource": resources,
                    }
                )
        cfn = self.domain.node.default_child
        cfn.access_policies = {"Version": "2012-10-17", "Statement": statements}  # type: ignore[union-attr]
        if self.fine_grained:
            # OpenSearch's own roles for the function roles, mapped on every deploy (docs/deploy.md 4f)
            self.role_mapping = SearchRoleMapping(
                self, "RoleMapping", config=self._config, factory=factory, search=self
            )
        if self.vpc is not None:
            self._place_functions_in_vpc()
        if self.fine_grained:
            # the ARNs the role mapping names (docs/deploy.md section 4f: checking it by hand)
            self.outputs |= {
                "SearchReaderRoleArns": cdk.Fn.join(",", [r.role_arn for r in self._readers]),
                "SearchIndexerRoleArns": cdk.Fn.join(",", [r.role_arn for r in self._writers]),
            }
        else:
            acknowledge(
                self.domain,
                "AwsSolutions-OS5",
                "Access is by IAM principal: the domain's access policy names only the function roles, "
                "path by path; the production preset turns on fine-grained access control.",
            )
        if self.vpc is None:
            acknowledge(
                self.domain,
                "AwsSolutions-OS1",
                "No VPC in this stage's config (search.vpc): the functions run outside a VPC (no NAT cost, "
                "faster cold starts); the domain accepts only SigV4-signed requests from the roles named "
                "in its access policy.",
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

    def _place_functions_in_vpc(self) -> None:
        """Every function whose role was granted search access (and the role mapping's) joins the
        domain's subnets and security groups, and its role may manage the network interfaces that needs."""
        assert self.vpc is not None
        mapping = [self.role_mapping.fn.role] if self.role_mapping is not None else []
        roles = {id(r) for r in (*self._readers, *self._writers, *mapping)}
        for c in cdk.Stack.of(self).node.find_all():
            if isinstance(c, lambda_.Function) and id(c.role) in roles:
                fn = c.node.default_child
                fn.vpc_config = lambda_.CfnFunction.VpcConfigProperty(  # type: ignore[union-attr]
                    subnet_ids=list(self.vpc.subnet_ids), security_group_ids=list(self.vpc.security_group_ids)
                )
                c.role.add_to_principal_policy(  # type: ignore[union-attr]
                    iam.PolicyStatement(
                        actions=[
                            "ec2:CreateNetworkInterface",
                            "ec2:DescribeNetworkInterfaces",
                            "ec2:DeleteNetworkInterface",
                            "ec2:AssignPrivateIpAddresses",
                            "ec2:UnassignPrivateIpAddresses",
                        ],
                        resources=["*"],
                    )
                )
                acknowledge(
                    c.role,  # type: ignore[arg-type]
                    "AwsSolutions-IAM5[Resource::*]",
                    "X-Ray's PutTraceSegments/PutTelemetryRecords and the VPC network-interface actions "
                    "Lambda needs to join the search subnets take no resource-level permissions.",
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
        """GET/POST on the read alias's `_search`/`_msearch` only (module doc)."""
        self._readers.append(role)
        if self.flavour == "domain":
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=[GET, POST], resources=self._read_paths(self.domain.domain_arn))
            )
        else:
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=["aoss:APIAccessAll"], resources=[self.collection.attr_arn])
            )

    def grant_write(self, role: iam.IRole) -> None:
        """The indexer's paths (`_indexer_paths`): no DELETE, nothing at the domain's root."""
        self._writers.append(role)
        if self.flavour == "domain":
            for actions, resources in self._indexer_paths(self.domain.domain_arn):
                role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=resources))
            ref = arn_ref(self.domain)
            for suffix in ("", "/_bulk", "/_search"):
                acknowledge(
                    role,
                    f"AwsSolutions-IAM5[Resource::{ref}/{self.docs_pattern}{suffix}]",
                    f"The docs indices of this stage ({self.docs_pattern}): index names carry the model id and "
                    "a rebuild's time stamp, so a prefix is needed; no root path, no DELETE.",
                )
        else:
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=["aoss:APIAccessAll"], resources=[self.collection.attr_arn])
            )

    def _grant_admin(self, role: iam.Role) -> None:
        """`ADMIN_PATHS` on this domain (the operator's role: reindex, tenant deletion, snapshots,
        the role mapping of fine-grained access control)."""
        arn = self.domain.domain_arn
        ref = arn_ref(self.domain)
        for actions, paths in ADMIN_PATHS:
            resources = [f"{arn}/{p.format(docs=self.docs_pattern)}" for p in paths]
            role.add_to_principal_policy(iam.PolicyStatement(actions=list(actions), resources=resources))
            for p in (p.format(docs=self.docs_pattern) for p in paths):
                if "*" in p:
                    acknowledge(
                        role,
                        f"AwsSolutions-IAM5[Resource::{ref}/{p}]",
                        "The search admin's own API family on this one domain (docs indices, aliases, "
                        "snapshots, security roles); never the whole domain.",
                    )

    def finalize(self, factory: FunctionFactory) -> None:
        """Write the resource-side policy once every role has been granted: the domain's access
        policy or the collection's data access policy names exactly the granted roles. With
        fine-grained access control, `factory` makes the role mapping's function."""
        if self._finalized:
            return
        self._finalized = True
        if self.flavour == "domain":
            self._finalize_domain(factory)
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
