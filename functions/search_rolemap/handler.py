"""CloudFormation custom resource (the CDK Provider framework's onEvent): fine-grained access
control's roles and role mappings of the stage's search domain, on Create and Update."""

from aws_lambda_powertools import Logger

from fleetmem.transport.aws_lambda.search_rolemap import on_event

logger = Logger(service="search_rolemap")


@logger.inject_lambda_context(clear_state=True)
def handler(event, context):
    return on_event(event)
