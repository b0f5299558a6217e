"""EventBridge Scheduler wake: delta for one session, delivered to SQS or a webhook."""

from aws_lambda_powertools import Logger

from fleetmem.transport.aws_lambda.heartbeat import run_heartbeat

logger = Logger(service="heartbeat")


@logger.inject_lambda_context(clear_state=True)
def handler(event, context):
    return run_heartbeat(event)
