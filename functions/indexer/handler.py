"""DynamoDB stream -> search index, reporting partial batch failures."""

from aws_lambda_powertools import Logger

from fleetmem.transport.aws_lambda.indexer import handle_stream_batch

logger = Logger(service="indexer")


@logger.inject_lambda_context(clear_state=True)
def handler(event, context):
    return handle_stream_batch(event, context)
