"""The stream indexer: DynamoDB Streams of the facts and pages tables -> the search index.

Batches report partial failures, a failing batch is bisected to isolate a poison record, retries
are bounded, and whatever still fails lands in an encrypted DLQ (alarmed in monitoring).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs

from constructs import Construct

from ..config import DeployConfig
from .common import Fn, FunctionFactory, acknowledge
from .search import Search
from .tables import Tables
from .tool_functions import bedrock_model_arns


class Indexer(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: DeployConfig,
        factory: FunctionFactory,
        tables: Tables,
        search: Search,
    ) -> None:
        super().__init__(scope, id)
        self.dlq = sqs.Queue(
            self,
            "Dlq",
            queue_name=f"{config.prefix}-indexer-dlq",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),
        )
        acknowledge(self.dlq, "AwsSolutions-SQS3", "This queue is itself the indexer's dead-letter queue.")
        self.fn: Fn = factory.make(
            self,
            "Fn",
            group="indexer",
            handler="functions.indexer.handler.handler",
            description="fleetmem stream indexer: DynamoDB -> OpenSearch",
        )
        search.grant_write(self.fn.role)
        self.fn.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["bedrock:InvokeModel"], resources=bedrock_model_arns(self, config.embedding.model)
            )
        )
        for table in tables.streamed:
            self.fn.function.add_event_source(
                sources.DynamoEventSource(
                    table,
                    starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                    batch_size=100,
                    max_batching_window=cdk.Duration.seconds(1),
                    bisect_batch_on_error=True,
                    retry_attempts=5,
                    max_record_age=cdk.Duration.hours(24),
                    report_batch_item_failures=True,
                    on_failure=sources.SqsDlq(self.dlq),
                )
            )
