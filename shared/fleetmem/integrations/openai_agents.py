"""fleetmem in the OpenAI Agents SDK (`pip install 'fleetmem[openai-agents]'`): the seven memory
verbs as function tools, and run hooks that load a context pack when an agent starts and bank
what the run produced when it ends. Everything goes through `fleetmem.client.AsyncClient`.

    memory = AsyncClient("http://127.0.0.1:8765")          # the token from $FLEETMEM_TOKEN
    hooks = FleetmemHooks(memory, entities=["people/alice-example"])
    agent = Agent(name="ops", instructions=hooks.instructions("You run ops."), tools=memory_tools(memory))
    result = await Runner.run(agent, "What does Alice prefer?", hooks=hooks)

docs/openai-agents.md has the whole example.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from agents import Agent, FunctionTool, RunContextWrapper, RunHooks
from agents.exceptions import UserError
from agents.strict_schema import ensure_strict_json_schema
from agents.tool import Tool

from fleetmem.client import AsyncClient, FleetmemError
from fleetmem.client.tools import VERBS, describe
from fleetmem.protocol import FACT_MAX

log = logging.getLogger(__name__)

#: How many entities one run banks its output under (context_pack's own limit).
MAX_BANKED_ENTITIES = 8
#: The arguments of the memory verbs that name an entity the run is about.
ENTITY_ARGUMENTS = ("entity", "entities")


# --------------------------------------------------------------------------- the tools


def strict_allowed(schema: dict[str, Any]) -> bool:
    """Strict mode keeps the schema's meaning only when every parameter is required and the SDK can
    state the schema strictly; an optional parameter would become a required one."""
    properties = schema.get("properties") or {}
    if set(properties) != set(schema.get("required") or []):
        return False
    try:
        ensure_strict_json_schema(json.loads(json.dumps(schema)))
    except UserError:
        return False
    return True


def refusal_text(tool: str, err: FleetmemError) -> str:
    """What the model reads for a refused call: the error's code, message and fix, then the whole
    envelope (correlation id included) as JSON, so the model can act on `fix.next`."""
    fix = err.fix.get("next") or "report"
    return f"Tool error: fleetmem refused {tool} ({err.code}): {err.message} Next: {fix}.\n" + json.dumps(
        {"error": err.envelope}, ensure_ascii=False
    )


def memory_tool(client: AsyncClient, name: str) -> FunctionTool:
    """The registered tool `name` as a function tool: its description and parameter schema are the
    registry's (via `fleetmem.client.tools`), a call goes through `client`, the success body comes
    back as JSON and a refusal as a tool error text (the run goes on)."""
    described = describe(name)

    async def invoke(_: RunContextWrapper[Any], raw: str) -> str:
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            arguments = exc
        if not isinstance(arguments, dict):
            return refusal_text(
                name,
                FleetmemError.built(
                    "invalid_params",
                    f"The arguments of {name} are not a JSON object.",
                    f"Call {name} again with its arguments as one JSON object, as its schema describes.",
                    "The tool call's arguments could not be read.",
                ),
            )
        try:
            body = await client.call(name, arguments)
        except FleetmemError as err:
            return refusal_text(name, err)
        return json.dumps(body, ensure_ascii=False)

    schema = described.input_schema
    return FunctionTool(
        name=name,
        description=described.description,
        params_json_schema=schema,
        on_invoke_tool=invoke,
        strict_json_schema=strict_allowed(schema),
    )


def memory_tools(client: AsyncClient, verbs: Iterable[str] = VERBS) -> list[FunctionTool]:
    """The memory verbs (all seven unless `verbs` names some) as function tools over `client`."""
    return [memory_tool(client, name) for name in verbs]


# --------------------------------------------------------------------------- the hooks


def named_entities(arguments: str) -> list[str]:
    """The entities a memory tool call named (`entity`, or `entities` as a list or a comma list)."""
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return []
    if not isinstance(parsed, dict):
        return []
    found: list[str] = []
    for key in ENTITY_ARGUMENTS:
        value = parsed.get(key)
        items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else []
        found.extend(item.strip() for item in items if isinstance(item, str) and item.strip())
    return found


class FleetmemHooks(RunHooks[Any]):
    """Run hooks for one run at a time: when an agent starts, its context pack (`context_pack` of
    the standing `entities`) is loaded for `instructions()` to inject; when an agent gives its
    final output, that output is banked with `remember` under the run's entities (the standing ones
    and those its memory tool calls named), with provenance naming the agent.

    Memory never breaks the run: a refused or failed call is logged (code and correlation id only)
    and kept in `errors`, and the run goes on without the pack or the banked fact."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        entities: Iterable[str] = (),
        budget_tokens: int | None = None,
        session_id: str | None = None,
        bank: bool = True,
    ) -> None:
        self.client = client
        self.entities = [e for e in entities if e]
        self.budget_tokens = budget_tokens
        self.session_id = session_id
        self.bank = bank
        self.pack_text = ""
        self.touched: list[str] = []
        self.banked: list[str] = []  # the ids of the facts this run banked
        self.errors: list[FleetmemError] = []

    def instructions(self, base: str) -> Callable[[RunContextWrapper[Any], Agent[Any]], Awaitable[str]]:
        """An `Agent(instructions=...)` callable: `base`, then the pack loaded when the agent started.
        The SDK reads instructions after the start hooks, on every turn, so each turn sees the pack."""

        async def with_pack(_: RunContextWrapper[Any], __: Agent[Any]) -> str:
            return f"{base}\n\n{self.pack_text}" if self.pack_text else base

        return with_pack

    def run_entities(self) -> list[str]:
        """The standing entities, then those the run's tool calls named; each once, at most eight."""
        seen = dict.fromkeys([*self.entities, *self.touched])
        return list(seen)[:MAX_BANKED_ENTITIES]

    def failed(self, what: str, err: FleetmemError) -> None:
        self.errors.append(err)
        log.warning("fleetmem %s failed: %s (correlation id %s)", what, err.code, err.correlation_id)

    async def on_agent_start(self, context: RunContextWrapper[Any], agent: Agent[Any]) -> None:
        try:
            pack = await self.client.context_pack(
                entities=self.entities or None, budget_tokens=self.budget_tokens, session_id=self.session_id
            )
        except FleetmemError as err:
            self.failed("context_pack", err)
            return
        self.pack_text = pack.text

    async def on_tool_end(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object) -> None:
        if isinstance(tool, FunctionTool) and tool.name in VERBS:
            self.touched.extend(named_entities(str(getattr(context, "tool_arguments", "") or "")))

    async def on_agent_end(self, context: RunContextWrapper[Any], agent: Agent[Any], output: Any) -> None:
        text = output if isinstance(output, str) else json.dumps(output, default=str, ensure_ascii=False)
        if not self.bank or not text.strip():
            return
        provenance = f"openai-agents agent {agent.name}"
        fact = {"fact": text[:FACT_MAX], "provenance": provenance}
        items = [{**fact, "entity": entity} for entity in self.run_entities()] or [fact]
        try:
            answer = await self.client.remember(items=items, session_id=self.session_id)
        except FleetmemError as err:
            self.failed("remember", err)
            return
        if getattr(answer.root, "failed", 0):
            log.warning("fleetmem remember saved part of the run's output: %s of its items failed", answer.root.failed)
        saved = getattr(answer.root, "items", None) or [answer.root]
        self.banked.extend(str(item.id) for item in saved if getattr(item, "id", None))
