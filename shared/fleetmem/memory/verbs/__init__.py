"""Every tool module, imported so that `REGISTRY` is complete.

`from fleetmem.memory.verbs import REGISTRY` gives every tool: the seven memory verbs (recall,
remember, entity, synthesize, forget, context_pack, delta), the page tools (put_page, get_page,
list_pages, delete_page), the admin tools (trace_fact, purge_fact), the inspection tools
(list_facts, memory_stats) and the account tools (whoami, list_followers, list_tokens,
create_token, revoke_token).

Each module holds its tool's typed parameter model, its result model and `run`; what they mean on
the wire, and the decisions `D1`…`D16` the docstrings cite, are written up in docs/protocol.md.
"""

from fleetmem.memory.registry import REGISTRY
from fleetmem.memory.verbs import (
    context_pack,
    create_token,
    delete_page,
    delta,
    entity,
    forget,
    get_page,
    list_facts,
    list_followers,
    list_pages,
    list_tokens,
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

__all__ = [
    "REGISTRY",
    "context_pack",
    "create_token",
    "delete_page",
    "delta",
    "entity",
    "forget",
    "get_page",
    "list_facts",
    "list_followers",
    "list_pages",
    "list_tokens",
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
