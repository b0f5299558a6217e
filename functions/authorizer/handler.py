"""API Gateway REQUEST authorizer: a fleetmem API token or a Cognito access token -> an Allow
policy with context {tenant, client_id, scopes} and the client's usage key; otherwise 401."""

from aws_lambda_powertools import Logger

from fleetmem.transport.aws_lambda.authorizer import authorize

logger = Logger(service="authorizer")


@logger.inject_lambda_context(clear_state=True)
def handler(event, context):
    return authorize(event)
