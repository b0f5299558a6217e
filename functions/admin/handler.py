"""The admin-scope tools (trace_fact, purge_fact), the inspection tools (list_facts, memory_stats),
the account tools (whoami, list_followers, list_tokens, create_token, revoke_token) and the write
receipt tools (get_write_request, list_write_requests, cancel_write_request) in one function."""

from aws_lambda_powertools import Logger

from fleetmem.protocol import ACCOUNT_TOOLS, ADMIN_TOOLS, INSPECT_TOOLS, RECEIPT_TOOLS
from fleetmem.transport.aws_lambda import CORRELATION_PATH
from fleetmem.transport.aws_lambda.tools import handle_tool_event

logger = Logger(service="admin")


@logger.inject_lambda_context(correlation_id_path=CORRELATION_PATH, clear_state=True)
def handler(event, context):
    return handle_tool_event(event, (*ADMIN_TOOLS, *INSPECT_TOOLS, *ACCOUNT_TOOLS, *RECEIPT_TOOLS))
