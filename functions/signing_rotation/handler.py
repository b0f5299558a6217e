"""Secrets Manager rotation of the stage's signing key: one of the four rotation steps per invoke
(createSecret, setSecret, testSecret, finishSecret), for the secret the event names."""

from aws_lambda_powertools import Logger

from fleetmem.transport.aws_lambda.signing_rotation import rotate

logger = Logger(service="signing_rotation")


@logger.inject_lambda_context(clear_state=True)
def handler(event, context):
    rotate(event)
