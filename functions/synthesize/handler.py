"""The `synthesize` memory verb as its own function: the edge's invoke payload or `POST /v1/synthesize`."""

from aws_lambda_powertools import Logger

from fleetmem.transport.aws_lambda import CORRELATION_PATH
from fleetmem.transport.aws_lambda.tools import handle_tool_event

TOOLS = ("synthesize",)
logger = Logger(service="synthesize")


@logger.inject_lambda_context(correlation_id_path=CORRELATION_PATH, clear_state=True)
def handler(event, context):
    return handle_tool_event(event, TOOLS)
