"""Secrets Manager rotation of the stage's signing key: one of the four rotation steps per invoke
(createSecret, setSecret, testSecret, finishSecret), for the secret the event names."""

from aws_lambda_powertools import Logger

from fleetmem.adapters.aws import sdk_client
from fleetmem.adapters.aws.signing_keys import rotation_step

logger = Logger(service="signing_rotation")


@logger.inject_lambda_context(clear_state=True)
def handler(event, context):
    rotation_step(sdk_client("signing_rotation"), event)
