"""The HTTP routes of a fleetmem server, in one table: the local server (`transport.mcp_app`), the
Lambda functions behind API Gateway (`transport.aws_lambda`) and the API Gateway resources the
deploy creates (`infra/constructs/edge.py`) all read it. Light: stdlib only (the CDK app reads it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fleetmem.protocol import Transport

MCP_PATH = "/mcp"
#: The memory console `fleetmem serve` mounts (a browser UI over `/v1`; not deployed to a stage).
CONSOLE_PATH = "/console"
V1_PREFIX = "/v1"
#: The transport label of a `/v1` tool call (the `tool_call` log line's `transport`, the envelope's).
V1_TRANSPORT: Transport = "v1"
#: `POST /v1/<tool>`, with the tool's name as its last segment.
V1_TOOL_PATH = f"{V1_PREFIX}/{{tool}}"
TOOLS_PATH = f"{V1_PREFIX}/tools"
OPENAPI_PATH = f"{V1_PREFIX}/openapi.json"
HEALTH_PATH = "/health"
#: RFC 9728 protected-resource metadata, at the well-known root and for the MCP resource.
PRM_PATH = "/.well-known/oauth-protected-resource"
PRM_MCP_PATH = PRM_PATH + MCP_PATH

#: Who answers a route on AWS: the MCP edge function, or the tool's own function.
Answerer = Literal["edge", "tool"]


@dataclass(frozen=True)
class Route:
    path: str
    methods: tuple[str, ...]
    answered_by: Answerer = "edge"
    #: Answers without a credential (metadata, health); every other route is authenticated.
    public: bool = False


ROUTES: tuple[Route, ...] = (
    Route(MCP_PATH, ("POST",)),
    Route(V1_TOOL_PATH, ("POST",), answered_by="tool"),
    Route(TOOLS_PATH, ("GET",)),
    Route(OPENAPI_PATH, ("GET",)),
    Route(HEALTH_PATH, ("GET",), public=True),
    Route(PRM_PATH, ("GET",), public=True),
    Route(PRM_MCP_PATH, ("GET",), public=True),
)

#: Methods API Gateway passes to the edge on `/mcp`: besides POST, those the edge refuses itself
#: with 405 (the SDK would open an event stream on GET that never ends).
MCP_GATEWAY_METHODS = ("POST", "GET", "DELETE")

#: Routes that answer without a credential.
PUBLIC_PATHS = tuple(r.path for r in ROUTES if r.public)


def v1_tool_path(tool: str) -> str:
    return V1_TOOL_PATH.format(tool=tool)


def served() -> str:
    """What this server answers, as 404 and 405 envelopes name it (the metadata once)."""
    shown = [f"{r.methods[0]} {r.path.replace('{tool}', '<tool>')}" for r in ROUTES if r.path != PRM_MCP_PATH]
    return ", ".join(shown[:-1]) + " and " + shown[-1]
