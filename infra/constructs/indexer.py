"""The stream indexer: DynamoDB Streams of the facts and pages tables -> the search index.

Batches report partial failures, a failing batch is bisected to isolate a poison record, retries
are bounded, and whatever still fails lands in an encrypted DLQ (alarmed in monitoring): that DLQ
gets only the shard position. The items of the records that failed are kept on the replay queue
(`<prefix>-indexer-replay`, sent by the function on every failure), which `fleetmem admin replay`
re-indexes from DynamoDB (docs/operate.md). The function trusts a record only for the item it
names: it reads that item from its table (BatchGetItem on the facts and pages tables, nothing
else) and indexes what the table holds.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs

from constructs import Construct
from fleetmem.wiring import ENV_REPLAY_QUEUE_URL, queue_name

from ..config import DeployConfig
from .common import Fn, FunctionFactory, acknowledge
from .search import Search
from .tables import Tables
from .tool_functions import bedrock_model_arns

#: Records per invocation (one `_bulk` and one embedder pass per batch), and the stream's retries
#: of a batch with failed records before it moves on (the local stack emulates both).
BATCH_SIZE = 100
RETRY_ATTEMPTS = 5
#: SQS's longest retention: replay kept records within two weeks.
REPLAY_RETENTION_DAYS = 14


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
        self.replay_queue = sqs.Queue(
            self,
            "ReplayQueue",
            queue_name=queue_name(config.prefix),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(REPLAY_RETENTION_DAYS),
        )
        acknowledge(
            self.replay_queue,
            "AwsSolutions-SQS3",
            "The replay queue is read by `fleetmem admin replay`, which leaves what fails on it.",
        )
        self.fn: Fn = factory.make(
            self,
            "Fn",
            group="indexer",
            handler="functions.indexer.handler.handler",
            description="fleetmem stream indexer: DynamoDB -> OpenSearch",
            env={ENV_REPLAY_QUEUE_URL: self.replay_queue.queue_url},
        )
        self.replay_queue.grant_send_messages(self.fn.role)
        search.grant_write(self.fn.role)
        # a stream record names an item; the function reads the item itself before indexing it
        self.fn.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["dynamodb:BatchGetItem"], resources=[t.table_arn for t in tables.streamed])
        )
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
                    batch_size=BATCH_SIZE,
                    max_batching_window=cdk.Duration.seconds(1),
                    bisect_batch_on_error=True,
                    retry_attempts=RETRY_ATTEMPTS,
                    max_record_age=cdk.Duration.hours(24),
                    report_batch_item_failures=True,
                    on_failure=sources.SqsDlq(self.dlq),
                )
            )
