"""EventBridge Scheduler wake: delta for the configured heartbeat the event names, delivered to SQS
or a webhook."""

from aws_lambda_powertools import Logger

from fleetmem.transport.aws_lambda.heartbeat import handle_wake

logger = Logger(service="heartbeat")


@logger.inject_lambda_context(clear_state=True)
def handler(event, context):
    return handle_wake(event)
