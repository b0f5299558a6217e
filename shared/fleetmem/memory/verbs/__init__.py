"""Every tool, in one list: `TOOLS` is the order of tools/list, and `REGISTRY` (by name) is what
dispatch, the HTTP API, the CLI, `fleetmem protocol --json`, the CDK function list and the
conformance runner read: `from fleetmem.memory.verbs import REGISTRY`.

The tools: the seven memory verbs (recall, remember, entity, synthesize, forget, context_pack,
delta), the page tools (put_page, get_page, list_pages, delete_page), the admin tools (trace_fact,
purge_fact, export_pack, import_pack), the inspection tools (list_facts, list_activity,
memory_stats) and the account tools (whoami, list_followers, list_tokens, create_token,
revoke_token).

Each module holds its tool's typed parameter model, its result model, `run` and its `SPEC`; a new
tool is added to `TOOLS` here. What they mean on the wire, and the decisions `D1`…`D16` the
docstrings cite, are written up in docs/protocol.md.
"""

from fleetmem.memory.registry import REGISTRY, ToolSpec, register
from fleetmem.memory.verbs import (  # D22 receipts
    cancel_write_request,
    context_pack,
    create_token,
    delete_page,
    delta,
    entity,
    export_pack,
    forget,
    get_page,
    get_write_request,
    import_pack,
    list_activity,
    list_facts,
    list_followers,
    list_pages,
    list_tokens,
    list_write_requests,
    memory_stats,
    purge_fact,
    put_page,
    recall,
    remember,
    revoke_token,
    synthesize,
    trace_fact,
    whoami,
)

#: Every tool, in the order tools/list shows them.
TOOLS: tuple[ToolSpec, ...] = (
    recall.SPEC,
    context_pack.SPEC,
    create_token.SPEC,
    get_page.SPEC,
    put_page.SPEC,
    delete_page.SPEC,
    delta.SPEC,
    entity.SPEC,
    forget.SPEC,
    list_facts.SPEC,
    list_activity.SPEC,
    list_followers.SPEC,
    list_pages.SPEC,
    list_tokens.SPEC,
    memory_stats.SPEC,
    purge_fact.SPEC,
    remember.SPEC,
    revoke_token.SPEC,
    synthesize.SPEC,
    trace_fact.SPEC,
    whoami.SPEC,
    get_write_request.SPEC,
    list_write_requests.SPEC,
    cancel_write_request.SPEC,
    export_pack.SPEC,
    import_pack.SPEC,
)

for _spec in TOOLS:
    register(_spec)

__all__ = [
    "REGISTRY",
    "TOOLS",
    "cancel_write_request",
    "context_pack",
    "create_token",
    "delete_page",
    "delta",
    "entity",
    "export_pack",
    "forget",
    "get_page",
    "get_write_request",
    "import_pack",
    "list_activity",
    "list_facts",
    "list_followers",
    "list_pages",
    "list_tokens",
    "list_write_requests",
    "memory_stats",
    "purge_fact",
    "put_page",
    "recall",
    "remember",
    "revoke_token",
    "synthesize",
    "trace_fact",
    "whoami",
]
