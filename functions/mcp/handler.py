"""The MCP edge: API Gateway `/mcp` -> the MCP app (built once per sandbox) -> each tools/call to
its verb's function."""

from aws_lambda_powertools import Logger

from fleetmem.transport.aws_lambda import CORRELATION_PATH
from fleetmem.transport.aws_lambda.edge import handle_edge_event

logger = Logger(service="mcp")


@logger.inject_lambda_context(correlation_id_path=CORRELATION_PATH, clear_state=True)
def handler(event, context):
    return handle_edge_event(event)
