"""The routes the MCP app serves beside `POST /mcp`: `/health`, the OAuth protected-resource
metadata document, and `/v1` (`GET /v1/tools`, `GET /v1/openapi.json`, `POST /v1/<tool>` through
`http_api.handle_v1_call` over the same gate and invoker as tools/call)."""

from __future__ import annotations

from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import fleetmem
from fleetmem.contract.correlation import new_correlation_id
from fleetmem.contract.result import DispatchResult
from fleetmem.contract.routes import (
    HEALTH_PATH,
    MCP_PATH,
    OPENAPI_PATH,
    PRM_MCP_PATH,
    PRM_PATH,
    TOOLS_PATH,
    V1_TOOL_PATH,
    V1_TRANSPORT,
)
from fleetmem.contract.status import CORRELATION_HEADER
from fleetmem.models import Caller
from fleetmem.protocol import PROTOCOL_VERSION, SCOPES, SERVER_NAME
from fleetmem.transport.callers import CALLER_SCOPE_KEY, public_base_url
from fleetmem.transport.http_api import handle_v1_call, render_json, tools_document
from fleetmem.transport.invoker import EdgeCalls
from fleetmem.transport.openapi import openapi_document
from fleetmem.transport.quick_calls import kind_of
from fleetmem.transport.refusals import MAX_REQUEST_BYTES, too_large


def protected_resource_document(base: str, authorization_server: str | None) -> dict[str, Any]:
    """RFC 9728 metadata. `authorization_servers` only when one is configured (Cognito on AWS): the
    local server issues its own bearer tokens (`fleetmem token create`) and has no OAuth server, so
    naming one (e.g. itself) would send clients to an endpoint that answers 404."""
    doc: dict[str, Any] = {"resource": f"{base}{MCP_PATH}"}
    if authorization_server:
        doc["authorization_servers"] = [authorization_server]
    doc.update(
        {
            "scopes_supported": list(SCOPES),
            "bearer_methods_supported": ["header"],
            "resource_name": SERVER_NAME,
        }
    )
    return doc


async def call_v1(request: Request, calls: EdgeCalls) -> Response:
    """`POST /v1/<tool>` on an authenticated request: `http_api.handle_v1_call` over the same gate and
    invoker as MCP tools/call, on a worker thread (`limiter` bounds them) or, once proven quick,
    inline (`EdgeCalls.run`)."""
    tool = request.path_params.get("tool", "")
    caller: Caller = request.scope[CALLER_SCOPE_KEY]
    raw = await request.body()
    if len(raw) > MAX_REQUEST_BYTES:
        return too_large()

    def call(tool: str, arguments: Any, caller: Caller, cid: str) -> DispatchResult:
        gate = calls.gate(tool, arguments, caller, cid, transport=V1_TRANSPORT)
        return gate if gate is not None else calls.invoker.invoke(tool, arguments, caller, cid)

    answer = partial(handle_v1_call, tool, raw, caller, call, surface=calls.surface)
    return _v1_response(*await calls.run(kind_of(tool, None, lane="v1"), answer))


def _v1_response(status: int, body: dict[str, Any], headers: dict[str, str]) -> Response:
    return Response(render_json(body), status_code=status, headers=headers, media_type="application/json")


class AppRoutes:
    """The route handlers beside `POST /mcp`, over one invoker and surface (`build_mcp_app`);
    `v1_calls`, when given, runs `/v1` calls (an in-process invoker that labels them `v1`)."""

    def __init__(
        self,
        calls: EdgeCalls,
        *,
        authorization_server: str | None,
        public_url: str | None,
        v1_calls: EdgeCalls | None = None,
    ) -> None:
        self.calls = calls
        self.v1_calls = v1_calls or calls
        self.surface = calls.surface
        self.authorization_server = authorization_server
        self.public_url = public_url

    def routes(self) -> list[Route]:
        return [
            Route(HEALTH_PATH, self.health, methods=["GET"]),
            Route(PRM_PATH, self.protected_resource, methods=["GET"]),
            Route(PRM_MCP_PATH, self.protected_resource, methods=["GET"]),
            Route(TOOLS_PATH, self.v1_tools, methods=["GET"]),
            Route(OPENAPI_PATH, self.v1_openapi, methods=["GET"]),
            Route(V1_TOOL_PATH, self.v1_call, methods=["POST"]),
        ]

    async def health(self, request: Request) -> Response:
        return JSONResponse(
            {
                "status": "ok",
                "server": SERVER_NAME,
                "version": fleetmem.__version__,
                "protocol_version": PROTOCOL_VERSION,
                "surface": self.surface,
            }
        )

    async def protected_resource(self, request: Request) -> Response:
        base = public_base_url(request, self.public_url)
        return JSONResponse(protected_resource_document(base, self.authorization_server))

    async def v1_tools(self, request: Request) -> Response:
        doc = tools_document(self.surface, request.scope.get(CALLER_SCOPE_KEY))
        return JSONResponse(doc, headers={CORRELATION_HEADER: new_correlation_id()})

    async def v1_openapi(self, request: Request) -> Response:
        doc = openapi_document(self.surface, server_url=public_base_url(request, self.public_url))
        return JSONResponse(doc, headers={CORRELATION_HEADER: new_correlation_id()})

    async def v1_call(self, request: Request) -> Response:
        return await call_v1(request, self.v1_calls)
