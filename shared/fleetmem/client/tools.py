"""The tools as the registry describes them to a caller, for handing a model its memory tools (the
agent-framework integrations): name, title, description and complete input schema
(`contract.tools.tool_schema`, the schema MCP tools/list and `/v1`'s OpenAPI document are read
from). The registry is read when a tool is first described, never at import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetmem.protocol import VERB_NAMES

#: The seven memory verbs (MEMORY_VERBS v1), in the order the spec lists them.
VERBS: tuple[str, ...] = tuple(VERB_NAMES)


@dataclass(frozen=True)
class ToolDescription:
    name: str
    title: str
    description: str  # written for the model: what, when, an example, the common fix
    input_schema: dict[str, Any]  # a fresh copy: the caller may keep or change it
    writes: bool


def describe(name: str) -> ToolDescription:
    """The registered tool `name` as a model is shown it (KeyError for a name not registered)."""
    from fleetmem.contract.tools import TOOL_TITLES, tool_schema
    from fleetmem.memory.verbs import REGISTRY

    spec = REGISTRY[name]
    return ToolDescription(name, TOOL_TITLES[name], spec.description, tool_schema(spec), spec.writes)
