"""fleetmem in LangGraph / LangChain (`fleetmem.integrations.langgraph`) against a real `fleetmem
serve` on 127.0.0.1 (a free port), the agent driven by LangChain's own fake chat model
(`GenericFakeChatModel`, scripted tool calls; no network, no model calls): the tools' schemas are
the registry's; a fact saved in one graph run is recalled in the next; a read token's write comes
back as a LangChain tool error carrying the envelope; a private fact never reaches the remote
adapter; the context pack is injected once at a thread's start; the store keeps LangGraph's
`BaseStore` contract (the cases of LangGraph's own store tests, which its wheel does not ship).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.store.base import BaseStore, Item
from pydantic import Field

from fleetmem.client import AsyncClient, Client
from fleetmem.contract.tools import tool_schema
from fleetmem.integrations.langgraph import (
    PACK_MESSAGE_ID,
    VERBS,
    FleetmemStore,
    MemoryContext,
    key_of,
    memory_tools,
    slug_of,
)
from fleetmem.memory.verbs import REGISTRY
from tests.clients.served import base, server  # noqa: F401 (fixture)
from tests.conformance.test_conformance_local import Server, free_port

pytestmark = [
    pytest.mark.xdist_group("frameworks"),
    # create_react_agent is LangGraph's prebuilt agent; 1.x points to `langchain.agents`, not installed here
    pytest.mark.filterwarnings("ignore:create_react_agent has been moved"),
]


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch, server: Server) -> Iterator[Client]:
    """A remote client with the read-write token (from FLEETMEM_TOKEN, as the client takes it)."""
    monkeypatch.setenv("FLEETMEM_TOKEN", server.token)
    with Client(base(server)) as remote:
        yield remote


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model answering from a script, keeping every input it was given."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def scripted(*calls: tuple[str, dict[str, Any]], answer: str = "Done.") -> ScriptedModel:
    """A model that makes each tool call in turn, then answers."""
    steps: list[AIMessage] = [
        AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{i}", "type": "tool_call"}])
        for i, (name, args) in enumerate(calls)
    ]
    return ScriptedModel(messages=iter([*steps, AIMessage(content=answer)]))


def tool_call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", "id": f"call_{name}", "name": name, "args": args}


def run_agent(model: ScriptedModel, client: Client, question: str, **agent: Any) -> list[BaseMessage]:
    graph = create_react_agent(model, memory_tools(client), **agent)
    thread = {"configurable": {"thread_id": agent.pop("thread", str(uuid.uuid4()))}}
    return list(graph.invoke({"messages": [HumanMessage(question)]}, thread)["messages"])


def tool_messages(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def everything_the_model_saw(model: ScriptedModel) -> str:
    return "\n".join(str(m.content) for call in model.seen for m in call)


# --------------------------------------------------------------------------- the tools are the registry's


def test_every_tool_takes_the_registry_parameters(client: Client) -> None:
    tools = memory_tools(client)
    assert [t.name for t in tools] == list(VERBS)
    for tool in tools:
        registry = tool_schema(REGISTRY[tool.name])
        schema = tool.tool_call_schema.model_json_schema()
        assert set(schema["properties"]) == set(registry["properties"]), tool.name
        assert set(schema.get("required") or []) == set(registry.get("required") or []), tool.name
        for name, prop in registry["properties"].items():
            if "enum" in prop:  # a closed set of values stays the registry's
                shown = schema["properties"][name]
                enums = [shown.get("enum")] + [a.get("enum") for a in shown.get("anyOf", [])]
                assert sorted(prop["enum"]) in [sorted(e) for e in enums if e], (tool.name, name)
        assert REGISTRY[tool.name].description.startswith(tool.description.rstrip(".")[:60]), tool.name


# --------------------------------------------------------------------------- two runs, one memory


def test_a_fact_saved_in_one_run_is_recalled_in_the_next(client: Client) -> None:
    editor = f"helix{uuid.uuid4().hex[:6]}"
    fact = f"Dana Example edits code in the {editor} editor"
    first = scripted(
        ("remember", {"fact": fact, "provenance": "chat:langgraph-test", "entity": "people/dana-example"}),
        answer="Saved.",
    )
    saved = tool_messages(run_agent(first, client, f"Remember: Dana uses the {editor} editor."))
    assert len(saved) == 1 and saved[0].status != "error", saved
    assert json.loads(str(saved[0].content))["status"] == "inserted"

    # A second run: another graph, another thread; the hook recalls for the turn, the model asks too.
    second = scripted(("recall", {"entity": "people/dana-example"}), answer="Dana uses it.")
    hook = MemoryContext(client, entities=["people/dana-example"])
    messages = run_agent(second, client, f"Which editor does Dana use, is it {editor}?", pre_model_hook=hook)
    (recalled,) = tool_messages(messages)
    assert recalled.status != "error" and fact in str(recalled.content)
    first_input = second.seen[0]
    assert first_input[0].type == "system", "the hook put memory before the model"
    pack, _, turn = str(first_input[0].content).partition("Recalled from memory for this turn:")
    assert fact in pack and fact in turn, "in the thread's pack and in the turn's recall"


def test_the_async_tools_use_the_async_client(client: Client, server: Server) -> None:
    marker = f"kiln{uuid.uuid4().hex[:6]}"
    client.remember(fact=f"Gus Example fires the {marker} pots", provenance="test:lg", entity="people/gus-example")

    async def ask() -> tuple[ToolMessage, ToolMessage]:
        async with AsyncClient(base(server)) as aclient:
            nowhere = Client(f"http://127.0.0.1:{free_port()}")  # the sync client is never called
            recall, forget = (t for t in memory_tools(nowhere, async_client=aclient) if t.name in {"recall", "forget"})
            found = await recall.ainvoke(tool_call("recall", {"entity": "people/gus-example"}))
            missing = await forget.ainvoke(tool_call("forget", {"id": "f_missing"}))
        return found, missing

    found, missing = asyncio.run(ask())
    assert marker in str(found.content) and found.status != "error"
    assert missing.status == "error" and json.loads(str(missing.content))["error"]["code"] == "not_found"


def test_the_pack_is_injected_once_at_the_start_of_a_thread(client: Client) -> None:
    marker = f"quay{uuid.uuid4().hex[:6]}"
    client.remember(fact=f"Erin Example ships the {marker} release", provenance="test:lg", entity="people/erin-example")
    hook = MemoryContext(client, entities=["people/erin-example"])
    model = scripted(answer="First.")
    graph = create_react_agent(model, memory_tools(client), pre_model_hook=hook, checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "erin"}}
    graph.invoke({"messages": [HumanMessage("Hello")]}, thread)
    model.messages = iter([AIMessage(content="Second.")])
    state = graph.invoke({"messages": [HumanMessage("And again")]}, thread)["messages"]
    packs = [m for m in state if m.id == PACK_MESSAGE_ID]
    assert len(packs) == 1 and state[0].id == PACK_MESSAGE_ID, [m.id for m in state]
    assert marker in str(packs[0].content)
    assert [m.content for m in state if isinstance(m, HumanMessage)] == ["Hello", "And again"]
    assert all(marker in str(call[0].content) for call in model.seen), "each model call got the pack"


# --------------------------------------------------------------------------- scopes and visibility


def test_a_read_tokens_write_is_a_tool_error_with_the_envelope(monkeypatch: pytest.MonkeyPatch, server: Server) -> None:
    args = {"fact": "Read tokens cannot write", "provenance": "test:lg"}
    direct = httpx2.post(
        f"{base(server)}/v1/remember", json=args, headers={"Authorization": f"Bearer {server.read_token}"}, timeout=30
    ).json()
    monkeypatch.setenv("FLEETMEM_TOKEN", server.read_token)
    with Client(base(server)) as reader:
        model = scripted(("remember", args), answer="Could not save.")
        (refused,) = tool_messages(run_agent(model, reader, "Save that."))
    assert refused.status == "error"
    error = json.loads(str(refused.content))["error"]
    assert error["code"] == direct["code"] and error["message"] == direct["message"]
    assert error["fix"]["next"] == direct["fix"]["next"] and error["correlation_id"]
    assert str(refused.content) in everything_the_model_saw(model), "the model reads the refusal"


def test_a_private_fact_never_reaches_the_remote_adapter(client: Client, server: Server) -> None:
    marker = f"vault{uuid.uuid4().hex[:6]}"
    fact = f"Frank Example keeps the {marker} combination"
    model = scripted(
        (
            "remember",
            {"fact": fact, "provenance": "test:lg", "entity": "people/frank-example", "visibility": "private"},
        ),
        answer="Saved.",
    )
    run_agent(model, client, "Remember it privately.")
    reader = scripted(
        ("recall", {"query": marker, "include_private": True}),
        ("context_pack", {"entities": "people/frank-example", "include_private": True}),
        ("entity", {"name": "people/frank-example"}),
        answer="Nothing.",
    )
    hook = MemoryContext(client, entities=["people/frank-example"])
    messages = run_agent(reader, client, f"What is Frank's {marker} combination?", pre_model_hook=hook)
    seen = everything_the_model_saw(reader) + "".join(str(m.content) for m in tool_messages(messages))
    assert fact not in seen and f"the {marker} combination" not in seen
    assert all(m.status != "error" for m in tool_messages(messages))
    stored = Client(data_dir=server.data_dir).list_facts(entity="people/frank-example", state="any")
    assert any(f.fact == fact for f in stored.facts), "it was stored: the trusted local caller sees it"


# --------------------------------------------------------------------------- the store


@pytest.fixture
def store(client: Client) -> FleetmemStore:
    """A store under its own root, so each test starts empty on the shared server."""
    return FleetmemStore(client, root=f"store/t{uuid.uuid4().hex[:8]}")


def test_the_slug_mapping_is_reversible() -> None:
    cases = [
        (("users", "u-1"), "memories"),
        (("Users", "Ann Lee", "😀"), "b32-x"),
        (("a",), "ünïcode key/with/slashes"),
    ]
    for namespace, key in cases:
        slug = slug_of("store", namespace, key)
        assert key_of("store", slug) == (namespace, key)
        assert all(part and part == part.lower() for part in slug.split("/")), slug
    assert slug_of("store", ("users", "u-1"), "memories") == "store/users/u-1/memories"
    assert key_of("store", "people/alice-example") is None
    with pytest.raises(ValueError):
        slug_of("store", ("x" * 150,), "k")


def test_put_get_update_delete(store: FleetmemStore, client: Client) -> None:
    assert isinstance(store, BaseStore)
    namespace = ("users", "User 1")
    store.put(namespace, "prefs", {"food": "ramen", "count": 2, "tags": ["a", "b"], "nested": {"ok": True}})
    item = store.get(namespace, "prefs")
    assert isinstance(item, Item)
    assert (item.namespace, item.key) == (namespace, "prefs")
    assert item.value == {"food": "ramen", "count": 2, "tags": ["a", "b"], "nested": {"ok": True}}
    page = client.get_page(slug=slug_of(store.root, namespace, "prefs"))
    assert page.type == "store-item" and page.title == "prefs" and "food: ramen" in page.content

    store.put(namespace, "prefs", {"food": "udon"})
    again = FleetmemStore(client, root=store.root).get(namespace, "prefs")  # another instance, same pages
    assert again is not None and again.value == {"food": "udon"} and again.updated_at >= item.updated_at

    store.delete(namespace, "prefs")
    assert store.get(namespace, "prefs") is None
    store.delete(namespace, "prefs")  # deleting a missing item is not an error
    assert store.get(("users", "nobody"), "prefs") is None


def test_search_by_namespace_prefix_filter_limit_and_offset(store: FleetmemStore) -> None:
    for i in range(5):
        store.put(("docs", "team-a"), f"doc-{i}", {"n": i, "kind": "even" if i % 2 == 0 else "odd"})
    store.put(("docs", "team-b"), "doc-x", {"n": 9, "kind": "odd"})
    store.put(("other",), "doc-y", {"n": 10, "kind": "odd"})

    under_docs = store.search(("docs",), limit=10)
    assert sorted(i.key for i in under_docs) == ["doc-0", "doc-1", "doc-2", "doc-3", "doc-4", "doc-x"]
    assert [i.key for i in store.search(("docs", "team-b"))] == ["doc-x"]
    assert sorted(i.key for i in store.search(("docs",), filter={"kind": "odd"})) == ["doc-1", "doc-3", "doc-x"]
    assert sorted(i.value["n"] for i in store.search(("docs",), filter={"n": {"$gte": 3}})) == [3, 4, 9]

    first = store.search(("docs",), limit=2)
    rest = store.search(("docs",), limit=10, offset=2)
    assert len(first) == 2 and len(rest) == 4
    assert {i.key for i in first} | {i.key for i in rest} == {i.key for i in under_docs}
    assert not {i.key for i in first} & {i.key for i in rest}


def test_search_with_a_query_recalls_within_the_namespace(store: FleetmemStore) -> None:
    """Ranked by recall (its page snippets, best first), limited to the namespace prefix."""
    word = f"zephyr{uuid.uuid4().hex[:6]}"
    store.put(("notes", "u1"), "trip", {"text": f"Booked the {word} train to Lyon"})
    store.put(("notes", "u1"), "lunch", {"text": "Lunch with the design team"})
    store.put(("elsewhere",), "trip", {"text": f"Another {word} ticket"})
    store.put(("notes", "u1"), "hidden", {"text": f"An unindexed {word} note"}, index=False)

    found = store.search(("notes",), query=f"{word} train")
    assert [(i.namespace, i.key) for i in found][:1] == [(("notes", "u1"), "trip")]
    assert all(i.namespace[0] == "notes" for i in found) and all(i.score is not None for i in found)
    # index=False: the value is kept (frontmatter) but gives the page no searchable body
    hidden = store.client.get_page(slug=slug_of(store.root, ("notes", "u1"), "hidden")).content
    assert hidden.rstrip().endswith("---") and word in hidden


def test_list_namespaces_with_prefix_suffix_depth_limit_offset(store: FleetmemStore) -> None:
    for namespace in [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("f", "b", "c")]:
        store.put(namespace, "k", {"v": 1})
    assert store.list_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("f", "b", "c")]
    assert store.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "e")]
    assert store.list_namespaces(prefix=("*", "b")) == [("a", "b", "c"), ("a", "b", "d"), ("f", "b", "c")]
    assert store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("f", "b", "c")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "e"), ("f", "b")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "e")]


def test_the_async_batch_gives_the_same_answers(store: FleetmemStore) -> None:
    async def flow() -> tuple[Any, Any, Any]:
        await store.aput(("async",), "k1", {"v": "one"})
        got = await store.aget(("async",), "k1")
        listed = await store.asearch(("async",))
        await store.adelete(("async",), "k1")
        return got, listed, await store.aget(("async",), "k1")

    got, listed, gone = asyncio.run(flow())
    assert got is not None and got.value == {"v": "one"}
    assert [i.key for i in listed] == ["k1"] and gone is None


def test_a_store_item_is_a_page_the_read_token_cannot_write(monkeypatch: pytest.MonkeyPatch, server: Server) -> None:
    from fleetmem.client import FleetmemError

    monkeypatch.setenv("FLEETMEM_TOKEN", server.read_token)
    with Client(base(server)) as reader:
        with pytest.raises(FleetmemError) as refused:
            FleetmemStore(reader).put(("users",), "k", {"v": 1})
    assert refused.value.fix.get("next") and refused.value.code != "not_found"


# --------------------------------------------------------------------------- the documented example


def test_the_documented_example_runs_and_recalls_in_its_second_run(server: Server) -> None:
    page = (Path(__file__).parents[2] / "docs" / "langgraph.md").read_text(encoding="utf-8")
    (example,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    env = {**os.environ, "FLEETMEM_URL": base(server), "FLEETMEM_TOKEN": server.token}
    out = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    recalled, stored = out.stdout.strip().splitlines()[-2:]
    assert "Dana Example prefers async standups" in recalled and '"facts"' in recalled
    assert stored == "{'standups': 'async'}"


# --------------------------------------------------------------------------- light at import


def test_the_client_and_the_package_do_not_import_the_frameworks() -> None:
    probe = "import sys, fleetmem, fleetmem.client, fleetmem.integrations\nprint('\\n'.join(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=dict(os.environ), timeout=120
    )
    assert out.returncode == 0, out.stderr
    loaded = out.stdout.split()
    assert "fleetmem.client" in loaded
    assert [m for m in loaded if m.split(".")[0] in {"langgraph", "langchain_core", "langsmith"}] == []
