"""LangChain tools for the seven memory verbs. Each tool's `args_schema` is derived from the client
method of the same name (`fleetmem.client.methods`, generated from the tool registry), so a tool
takes exactly the parameters the server's tool does; a refusal comes back as LangChain reports a
tool error (a `ToolMessage` with status "error") carrying the envelope's code, message and fix."""

from __future__ import annotations

import inspect
import json
import types
import typing
from typing import Any

from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, ConfigDict, Field, create_model

from fleetmem.client import AsyncClient, Client, FleetmemError
from fleetmem.client import methods as client_methods

#: The memory verbs offered to a model, in the order tools are listed.
VERBS = ("recall", "remember", "entity", "synthesize", "forget", "context_pack", "delta")


def arguments_model(verb: str) -> type[BaseModel]:
    """The tool's arguments as a pydantic model: the keyword parameters of `Client.<verb>`, with their
    types and defaults (required where the registry requires them)."""
    method = getattr(Client, verb)
    params = [p for p in inspect.signature(method).parameters.values() if p.name != "self"]
    holder = types.SimpleNamespace(__annotations__={p.name: p.annotation for p in params})
    hints = typing.get_type_hints(holder, globalns=vars(client_methods))
    fields: dict[str, Any] = {
        p.name: (hints[p.name], Field(...) if p.default is inspect.Parameter.empty else Field(default=None))
        for p in params
    }
    name = "".join(part.title() for part in verb.split("_")) + "Arguments"
    return create_model(name, **fields)


def error_text(err: FleetmemError) -> str:
    """What the model reads for a refusal: the envelope's code, message, fix and correlation id."""
    shown = {"code": err.code, "message": err.message, "fix": err.fix, "correlation_id": err.correlation_id}
    return json.dumps({"error": shown}, ensure_ascii=False)


def _handle(err: ToolException) -> str:
    return str(err)


def result_text(result: BaseModel) -> str:
    return json.dumps(result.model_dump(mode="json", exclude_none=True), ensure_ascii=False)


class MemoryTool(BaseTool):
    """One memory verb as a LangChain tool. Content: the result as JSON; artifact: the result model."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    verb: str
    client: Client
    async_client: AsyncClient | None = None
    response_format: typing.Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: Any = _handle

    def _run(self, **kwargs: Any) -> tuple[str, BaseModel]:
        kwargs.pop("run_manager", None)
        try:
            result = getattr(self.client, self.verb)(**kwargs)
        except FleetmemError as err:
            raise ToolException(error_text(err)) from None
        return result_text(result), result

    async def _arun(self, **kwargs: Any) -> tuple[str, BaseModel]:
        if self.async_client is None:
            return await super()._arun(**kwargs)
        kwargs.pop("run_manager", None)
        try:
            result = await getattr(self.async_client, self.verb)(**kwargs)
        except FleetmemError as err:
            raise ToolException(error_text(err)) from None
        return result_text(result), result


def memory_tools(
    client: Client, *, async_client: AsyncClient | None = None, verbs: tuple[str, ...] = VERBS
) -> list[BaseTool]:
    """A tool per verb (default: the seven memory verbs; `synthesize` makes LLM calls on the server,
    leave it out with `verbs=` on a hot path). `async_client` serves `ainvoke`; without it an async
    call runs the synchronous client in a worker thread."""
    out: list[BaseTool] = []
    for verb in verbs:
        doc = inspect.getdoc(getattr(Client, verb)) or verb
        out.append(
            MemoryTool(
                name=verb,
                description=doc,
                args_schema=arguments_model(verb),
                verb=verb,
                client=client,
                async_client=async_client,
            )
        )
    return out
