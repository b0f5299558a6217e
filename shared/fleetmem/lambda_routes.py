"""Which Lambda function serves which tool — shared by the CDK app and the edge's invoker.

Each of the seven memory verbs gets its own function (own role, own size, own alarms). The page
tools share one `pages` function and the admin, inspection and account tools (whoami,
followers, tokens) and the write-receipt tools (D22) one `admin` function: they are rare, and
grouping them keeps the count of cold-startable functions low without widening any verb's grants.
No third-party imports: the CDK app and the Lambda runtime both read this.
"""

from __future__ import annotations

from collections.abc import Iterable

from fleetmem.config import ENV_TOOL_FUNCTIONS
from fleetmem.protocol import ACCOUNT_TOOLS, ADMIN_TOOLS, INSPECT_TOOLS, PAGE_TOOLS, RECEIPT_TOOLS, VERB_NAMES

PAGES_GROUP = "pages"
ADMIN_GROUP = "admin"
#: Environment variable (set on the edge by CDK) mapping tool name -> deployed function name;
#: read by `Settings.tool_functions`.
TOOL_FUNCTIONS_ENV = ENV_TOOL_FUNCTIONS


def function_group(tool: str) -> str:
    """The function group that serves `tool` (its own name for each of the seven verbs)."""
    if tool in VERB_NAMES:
        return tool
    if tool in PAGE_TOOLS:
        return PAGES_GROUP
    if tool in ADMIN_TOOLS or tool in INSPECT_TOOLS or tool in ACCOUNT_TOOLS or tool in RECEIPT_TOOLS:
        return ADMIN_GROUP
    raise KeyError(tool)


def groups(tools: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Group tool names by serving function, verbs first in protocol order."""
    out: dict[str, list[str]] = {}
    for tool in tools:
        out.setdefault(function_group(tool), []).append(tool)
    return {g: tuple(ts) for g, ts in out.items()}


def function_name(prefix: str, group: str) -> str:
    return f"{prefix}-{group.replace('_', '-')}"
