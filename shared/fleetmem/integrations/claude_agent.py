"""The Claude Agent SDK (`claude-agent-sdk`) on fleetmem: its MCP server entry and the session-start
pack, as plain data and a hook callback, so this module needs neither the SDK nor the Claude Code CLI
(docs/claude.md has the whole wiring, and Claude Code's own).

- `agent_options(url=None, profile=None)`: the `ClaudeAgentOptions` keyword arguments that reach
  fleetmem over MCP: `mcp_servers` with one entry of type "http" (the server's `/mcp` URL and an
  `Authorization` header with the token from $FLEETMEM_TOKEN or the profile's token file) and
  `allowed_tools` naming the memory verbs as Claude Code names MCP tools (`mcp__fleetmem__recall`, ...).
- `SessionPack(client)`: a hook callback with the SDK's `HookCallback` signature that answers the
  first event of each session (SessionStart where the SDK offers it; UserPromptSubmit in the Python
  SDK, whose hook events do not include SessionStart) with the tenant's `context_pack` as
  `additionalContext`, the text the Claude Code hook injects (`fleetmem.contract.session_context`).
  A failed pack never stops the agent: it injects nothing and says why in a `systemMessage`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from fleetmem.client import AsyncClient, FleetmemError
from fleetmem.client.core import DEFAULT_TIMEOUT_S, resolve
from fleetmem.contract.session_context import injected_context
from fleetmem.protocol import VERB_NAMES

SERVER_NAME = "fleetmem"
#: Tokens the pack may take at a session's start (as the Claude Code hook's default).
START_BUDGET_TOKENS = 2000
#: Sessions a `SessionPack` remembers having answered (the oldest is forgotten first).
SESSIONS_KEPT = 1000


def tool_names(server_name: str = SERVER_NAME, tools: Sequence[str] = VERB_NAMES) -> list[str]:
    """The names Claude Code gives the server's tools (`mcp__<server>__<tool>`)."""
    return [f"mcp__{server_name}__{tool}" for tool in tools]


def agent_options(
    url: str | None = None,
    *,
    profile: str | None = None,
    server_name: str = SERVER_NAME,
    tools: Sequence[str] = VERB_NAMES,
) -> dict[str, Any]:
    """`ClaudeAgentOptions(**agent_options(...))` keyword arguments for fleetmem over MCP.

    `url` is the server's base or `/mcp` URL (token from $FLEETMEM_TOKEN), or `profile` a saved
    profile (`fleetmem profile add`); resolved as `fleetmem.client.Client` resolves them, so a missing
    token is the same `FleetmemError`. `tools` are the tools allowed without asking (the seven memory
    verbs by default)."""
    endpoint = resolve(url, profile, DEFAULT_TIMEOUT_S)
    mcp_url = endpoint.url.rstrip("/")
    if not mcp_url.endswith("/mcp"):
        mcp_url += "/mcp"
    server = {"type": "http", "url": mcp_url, "headers": {"Authorization": f"Bearer {endpoint.token}"}}
    return {"mcp_servers": {server_name: server}, "allowed_tools": tool_names(server_name, tools)}


class SessionPack:
    """A hook callback (`async (input, tool_use_id, context) -> output`) that injects the tenant's
    context pack once per session: the first event a session id brings gets it, later ones `{}`.

    `entities` are the thread's standing entities (names or slugs; none: the core memory and hot
    facts), `budget_tokens` the pack's budget. Only world-visible memory is packed: the credential is
    remote, so private facts and pages never reach the agent."""

    def __init__(
        self, client: AsyncClient, *, entities: Sequence[str] = (), budget_tokens: int = START_BUDGET_TOKENS
    ) -> None:
        self.client = client
        self.entities = list(entities)
        self.budget_tokens = budget_tokens
        self._answered: OrderedDict[str, None] = OrderedDict()

    async def __call__(self, input_data: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        session = str(input_data.get("session_id") or "")
        if session in self._answered:
            return {}
        self._answered[session] = None
        while len(self._answered) > SESSIONS_KEPT:
            self._answered.popitem(last=False)
        arguments: dict[str, Any] = {"budget_tokens": self.budget_tokens}
        if self.entities:
            arguments["entities"] = ",".join(self.entities)
        try:
            body = await self.client.call("context_pack", arguments)
        except FleetmemError as err:
            return {"systemMessage": f"fleetmem: no context pack this session ([{err.code}] {err.message})"}
        text = injected_context(body)
        if text is None:
            return {}
        event = str(input_data.get("hook_event_name") or "SessionStart")
        return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}
