"""The whole deployment in one stack: tables, search, tool functions, edge + auth, indexer,
heartbeats, monitoring. Names derive from `config.prefix` (fleetmem-<stage>)."""

from __future__ import annotations

import aws_cdk as cdk

from constructs import Construct
from fleetmem.config import (
    ENV_BACKEND,
    ENV_BEDROCK_EMBEDDING_DIM,
    ENV_BEDROCK_EMBEDDING_MODEL,
    ENV_CHANGE_SETTLE_MS,
    ENV_EMBEDDER,
    ENV_LLM,
    ENV_OPENSEARCH_ENDPOINT,
    ENV_OPENSEARCH_INDEX_PREFIX,
    ENV_OPENSEARCH_SERVICE,
    ENV_SURFACE,
    ENV_TABLE_PREFIX,
)

from ..config import DeployConfig
from ..constructs.client_auth import ClientAuth
from ..constructs.common import FunctionFactory
from ..constructs.edge import Edge
from ..constructs.heartbeat import Heartbeat
from ..constructs.indexer import Indexer
from ..constructs.monitoring import METRICS_NAMESPACE, Monitoring
from ..constructs.release import Release
from ..constructs.search import Search
from ..constructs.signing import InvokeSigning
from ..constructs.tables import Tables
from ..constructs.tool_functions import ToolFunctions

#: Replicas per index shard the reindex creates indices with (`SearchConfig.index_replicas`).
ENV_OPENSEARCH_REPLICAS = "FLEETMEM_OPENSEARCH_REPLICAS"
#: GSI propagation is typically well under a second; writes finish within the verb timeout chain.
CHANGE_SETTLE_MS = 5_000


def base_environment(config: DeployConfig, search: Search) -> dict[str, str]:
    """What `fleetmem.config.Settings.from_env` reads in every function."""
    return {
        ENV_BACKEND: "aws",
        ENV_EMBEDDER: "bedrock",
        ENV_LLM: "none",
        ENV_SURFACE: config.surface,
        ENV_TABLE_PREFIX: config.prefix,
        ENV_OPENSEARCH_ENDPOINT: search.endpoint,
        ENV_OPENSEARCH_SERVICE: search.service,
        ENV_OPENSEARCH_INDEX_PREFIX: config.search.index_prefix,
        ENV_BEDROCK_EMBEDDING_MODEL: config.embedding.model,
        ENV_BEDROCK_EMBEDDING_DIM: str(config.embedding.dimension),
        # D14: delta lists a change once it is this old, so the eventually consistent change
        # indexes (GSIs) cannot show a higher change number before a lower one
        ENV_CHANGE_SETTLE_MS: str(CHANGE_SETTLE_MS),
        "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
        "POWERTOOLS_LOG_LEVEL": "INFO",
        # A serverless collection places its replicas itself (and refuses the setting).
        **({ENV_OPENSEARCH_REPLICAS: str(config.search.index_replicas)} if search.flavour == "domain" else {}),
    }


class FleetmemStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: DeployConfig, **kwargs) -> None:
        super().__init__(scope, id, description=f"fleetmem memory service ({config.stage})", **kwargs)
        self.config = config
        self.tables = Tables(self, "Tables", config=config)
        self.search = Search(self, "Search", config=config)
        factory = FunctionFactory(config, base_environment(config, self.search))
        self.signing = InvokeSigning(self, "InvokeSigning", config=config, factory=factory)
        self.tools = ToolFunctions(
            self,
            "Tools",
            config=config,
            factory=factory,
            tables=self.tables,
            search=self.search,
            signing=self.signing,
        )
        self.auth = ClientAuth(self, "ClientAuth", config=config)
        self.edge = Edge(
            self,
            "Edge",
            config=config,
            factory=factory,
            tables=self.tables,
            tools=self.tools,
            auth=self.auth,
            signing=self.signing,
        )
        self.indexer = Indexer(self, "Indexer", config=config, factory=factory, tables=self.tables, search=self.search)
        self.heartbeat = Heartbeat(self, "Heartbeat", config=config, factory=factory, tables=self.tables)
        self.search.finalize(factory)
        dlqs = {"indexer": self.indexer.dlq, "heartbeat": self.heartbeat.dlq}
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            config=config,
            tool_fns=self.tools.by_group,
            edge=self.edge.edge,
            authorizer=self.edge.authorizer_fn,
            indexer=self.indexer.fn,
            heartbeat=self.heartbeat.fn,
            dlqs=dlqs,
            api_name=config.prefix,
            search=self.search,
            tables=self.tables,
            access_logs=self.edge.access_logs,
            web_acl_name=self.edge.web_acl.name if self.edge.web_acl is not None else None,
        )
        if config.release.canary.enabled:
            self.release = Release(self, "Release", config=config, error_alarms=self.monitoring.error_alarms)

        for name, value in {
            "McpUrl": self.edge.mcp_url,
            "ApiBaseUrl": self.edge.base_url,
            "TokenEndpoint": self.auth.token_endpoint,
            "UserPoolId": self.auth.pool.user_pool_id,
            "TablePrefix": config.prefix,
            "SearchEndpoint": self.search.endpoint,
            "AlarmTopic": self.monitoring.topic.topic_arn,
            **self.search.outputs,
        }.items():
            cdk.CfnOutput(self, name, value=value)
