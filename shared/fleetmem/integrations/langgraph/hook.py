"""`MemoryContext`: a LangGraph `pre_model_hook` (create_react_agent) that gives the model what memory
holds for the thread: at the thread's start the `context_pack` (kept in the thread's messages as one
system message, so a checkpointed thread loads it once), and for every new user turn the `recall`
answer for that turn's words (shown to the model only, not kept). Remote callers see world-visible
memory only: the hook never asks for private facts."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage, RemoveMessage, SystemMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from fleetmem.client import Client

#: The id of the system message that carries the thread's context pack.
PACK_MESSAGE_ID = "fleetmem-context-pack"
#: How many turns' recall answers are kept (a turn's model calls after a tool call reuse its answer).
TURNS_KEPT = 64


def turn_text(message: AnyMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = [p if isinstance(p, str) else str(p.get("text", "")) for p in content]
    return " ".join(p for p in parts if p)


class MemoryContext:
    """`create_react_agent(model, tools, pre_model_hook=MemoryContext(client, entities=[...]))`.

    `entities`: the thread's standing entities for the pack (names or slugs); `pack_budget_tokens`
    and `recall_budget_tokens` bound each answer; `recall_limit` caps facts and snippets per turn."""

    def __init__(
        self,
        client: Client,
        *,
        entities: Sequence[str] = (),
        pack_budget_tokens: int = 2000,
        recall_budget_tokens: int = 800,
        recall_limit: int = 10,
    ) -> None:
        self.client = client
        self.entities = list(entities)
        self.pack_budget_tokens = pack_budget_tokens
        self.recall_budget_tokens = recall_budget_tokens
        self.recall_limit = recall_limit
        self._recalled: OrderedDict[str, str] = OrderedDict()

    def pack(self) -> SystemMessage:
        answer = self.client.context_pack(entities=self.entities or None, budget_tokens=self.pack_budget_tokens)
        text = answer.text.strip() or "(memory holds nothing for this thread yet)"
        return SystemMessage(content=f"Memory for this thread (fleetmem context pack):\n{text}", id=PACK_MESSAGE_ID)

    def recall(self, turn: HumanMessage) -> str:
        """The recall answer for the turn's words, as lines; '' when nothing matched."""
        key = turn.id or turn_text(turn)
        if key in self._recalled:
            return self._recalled[key]
        answer = self.client.recall(
            query=turn_text(turn)[:2000], budget_tokens=self.recall_budget_tokens, limit=self.recall_limit
        )
        lines = [f"- {f.fact} (fact_id {f.fact_id})" for f in answer.facts]
        lines += [f"- [[{hit.slug}]] {hit.title}: {' '.join(hit.chunk.split())}" for hit in answer.results]
        text = "Recalled from memory for this turn:\n" + "\n".join(lines) if lines else ""
        self._recalled[key] = text
        while len(self._recalled) > TURNS_KEPT:
            self._recalled.popitem(last=False)
        return text

    def __call__(self, state: Any) -> dict[str, Any]:
        messages: list[AnyMessage] = list(state["messages"] if isinstance(state, dict) else state.messages)
        update: dict[str, Any] = {}
        pack = next((m for m in messages if m.id == PACK_MESSAGE_ID), None)
        if pack is None:
            pack = self.pack()
            update["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), pack, *messages]
        rest = [m for m in messages if m.id != PACK_MESSAGE_ID]
        turn = next((m for m in reversed(rest) if isinstance(m, HumanMessage)), None)
        recalled = self.recall(turn) if turn is not None else ""
        context = f"{pack.content}\n\n{recalled}" if recalled else str(pack.content)
        update["llm_input_messages"] = [SystemMessage(content=context), *rest]
        return update
