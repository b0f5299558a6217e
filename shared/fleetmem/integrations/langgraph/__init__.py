"""fleetmem in LangGraph / LangChain (the `langgraph` extra), over the typed client only:

- `memory_tools(client)`: LangChain tools for the seven memory verbs, their argument schemas derived
  from the client's methods (which are generated from the tool registry);
- `MemoryContext(client)`: a `pre_model_hook` that puts `context_pack` at the start of a thread and
  `recall` for each turn in front of the model;
- `FleetmemStore(client)`: a LangGraph `BaseStore` over pages (namespace + key -> slug).

docs/langgraph.md has a runnable example.
"""

from fleetmem.integrations.langgraph.hook import PACK_MESSAGE_ID, MemoryContext
from fleetmem.integrations.langgraph.store import FleetmemStore, key_of, slug_of
from fleetmem.integrations.langgraph.tools import VERBS, MemoryTool, arguments_model, memory_tools

__all__ = [
    "PACK_MESSAGE_ID",
    "VERBS",
    "FleetmemStore",
    "MemoryContext",
    "MemoryTool",
    "arguments_model",
    "key_of",
    "memory_tools",
    "slug_of",
]
