"""Every tool module, imported so that `REGISTRY` is complete.

`from fleetmem.memory.verbs import REGISTRY` gives every tool: the seven memory verbs (recall,
remember, entity, synthesize, forget, context_pack, delta), the page tools (put_page, get_page,
list_pages, delete_page), the admin tools (trace_fact, purge_fact) and the inspection tools
(list_facts, memory_stats).

Each module holds its tool's typed parameter model, its result model and `run`; what they mean on
the wire, and the decisions `D1`…`D16` the docstrings cite, are written up in docs/protocol.md.
"""

from fleetmem.memory.registry import REGISTRY
from fleetmem.memory.verbs import (
    context_pack,
    delete_page,
    delta,
    entity,
    forget,
    get_page,
    list_facts,
    list_pages,
    memory_stats,
    purge_fact,
    put_page,
    recall,
    remember,
    synthesize,
    trace_fact,
    whoami,
)

__all__ = [
    "REGISTRY",
    "context_pack",
    "delete_page",
    "delta",
    "entity",
    "forget",
    "get_page",
    "list_facts",
    "list_pages",
    "memory_stats",
    "purge_fact",
    "put_page",
    "recall",
    "remember",
    "synthesize",
    "trace_fact",
    "whoami",
]
