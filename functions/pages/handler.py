"""The page tools (put_page, get_page, list_pages, delete_page) in one function."""

from aws_lambda_powertools import Logger

from fleetmem.protocol import PAGE_TOOLS
from fleetmem.transport.aws_lambda import CORRELATION_PATH
from fleetmem.transport.aws_lambda.tools import handle_tool_event

logger = Logger(service="pages")


@logger.inject_lambda_context(correlation_id_path=CORRELATION_PATH, clear_state=True)
def handler(event, context):
    return handle_tool_event(event, PAGE_TOOLS)
