"""The tool definitions MCP tools/list serves (and `GET /v1/tools` repeats): each registry spec as
an `mcp_types.Tool` with the contract's title, input schema and output schema (the result model's;
`fleetmem.contract.tools`), built once per spec. The list changes only with the code, so its
2026-07-28 cache hint (`TOOLS_LIST_CACHE`) lets a client keep it; it is per token (its scopes
decide what is listed), so the hint is private.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server.caching import CacheHint

from fleetmem.contract.tools import output_schema, tool_schema, tool_title
from fleetmem.memory.registry import REGISTRY, ToolSpec, on_surface
from fleetmem.models import Caller
from fleetmem.protocol import Surface
from fleetmem.transport.dispatch import visible_tools

#: tools/list's freshness hint (2026-07-28 `ttlMs`/`cacheScope`). The definitions never change
#: while a process runs; an hour bounds how long a client keeps a list after a redeploy changed it.
#: Private: the list depends on the token's scopes. A revoked token stays refused on every call
#: whatever a client cached.
TOOLS_LIST_TTL_MS = 60 * 60 * 1000
TOOLS_LIST_CACHE = CacheHint(ttl_ms=TOOLS_LIST_TTL_MS, scope="private")

#: Built tool definitions by spec: a spec never changes, and the SDK asks for the definitions on
#: every tools/call of the stateless era (to check the arguments against the input schema), where
#: regenerating pydantic's JSON schemas took a fifth of the server's CPU under a mixed load.
_DEFINITIONS: dict[int, tuple[ToolSpec, types.Tool]] = {}


def tool_definition(spec: ToolSpec) -> types.Tool:
    hit = _DEFINITIONS.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    annotations = types.ToolAnnotations.model_validate(spec.annotations) if spec.annotations else None
    tool = types.Tool(
        name=spec.name,
        title=tool_title(spec),
        description=spec.description,
        input_schema=tool_schema(spec),
        output_schema=output_schema(spec),
        annotations=annotations,
    )
    _DEFINITIONS[id(spec)] = (spec, tool)  # holding the spec keeps its id from being reused
    return tool


def list_tool_definitions(surface: Surface, caller: Caller | None) -> list[types.Tool]:
    if caller is None:
        return []
    return [tool_definition(s) for s in visible_tools(surface, caller)]


def tool_input_schema(surface: Surface) -> Callable[[str], Mapping[str, Any] | None]:
    """The SDK's `get_tool_input_schema`: the listed input schema of a tool on this surface.

    Without it the SDK serves a whole tools/list inside every tools/call to find the schema it
    checks `Mcp-Param-*` headers against. The schema is the one tools/list shows; a tool the
    caller's scopes hide is still answered (the call itself is then refused by the gate)."""

    def lookup(name: str) -> Mapping[str, Any] | None:
        spec = REGISTRY.get(name)
        return tool_definition(spec).input_schema if spec is not None and on_surface(spec, surface) else None

    return lookup
