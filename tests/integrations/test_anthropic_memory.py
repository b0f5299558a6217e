"""Claude on fleetmem, against a real `fleetmem serve` on 127.0.0.1 (a free port):

- the anthropic SDK's memory tool backed by fleetmem pages (`fleetmem.integrations.anthropic_memory`),
  driven by the SDK's typed command objects and by the SDK's own tool runner. The runner talks to a
  scripted Messages API (an httpx2 MockTransport answering with tool_use blocks): the Anthropic API
  is the one thing mocked, since it cannot run here; the memory tool and fleetmem are real;
- the Claude Agent SDK wiring (`fleetmem.integrations.claude_agent`): its MCP server entry, opened
  with the official MCP client exactly as configured, and its session-start pack hook.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
from anthropic import Anthropic
from anthropic.lib.tools import ToolError
from anthropic.tools.memory import BetaLocalFilesystemMemoryTool
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from fleetmem.client import AsyncClient, Client, FleetmemError
from fleetmem.contract.tools import tool_schema
from fleetmem.integrations.anthropic_memory import (
    PAGE_TYPE,
    FleetmemMemoryTool,
    decode_segment,
    encode_segment,
    path_to_slug,
    slug_to_path,
)
from fleetmem.integrations.claude_agent import SessionPack, agent_options
from fleetmem.memory.slugs import is_canonical_slug
from fleetmem.memory.verbs import REGISTRY
from fleetmem.protocol import VERB_NAMES
from tests.clients.served import base, server, token_env, v1  # noqa: F401 (fixtures)
from tests.conformance.test_conformance_local import Server

pytestmark = pytest.mark.xdist_group("frameworks")


def fresh_namespace() -> str:
    """A namespace of its own for each test (one server serves the module)."""
    return f"memories/t{uuid.uuid4().hex[:10]}"


def run(tool: Any, command: Any) -> tuple[str, str]:
    """("ok", result) or ("error", the ToolError's text): what the model would read."""
    try:
        return "ok", str(tool.execute(command))
    except ToolError as err:
        return "error", str(err)


# --------------------------------------------------------------------------- paths and slugs


NAMES = [
    "notes.md",
    "user_preferences.md",
    "Team Notes",
    "2026-12-06.md",
    "-lead",
    "trail-",
    "a--b",
    "-",
    "quarterly q&a.txt",
    "qq",
    "README",
    "Zoë Müller ✓",
    ".hidden",
    "北京办公室",
    "back\\slash",
]


@pytest.mark.parametrize("name", NAMES)
def test_a_path_segment_maps_to_a_canonical_slug_segment_and_back(name: str) -> None:
    encoded = encode_segment(name)
    assert is_canonical_slug(encoded) and set(encoded) <= set("abcdefghijklmnopqrstuvwxyz0123456789-"), encoded
    assert decode_segment(encoded) == name


def test_paths_map_to_slugs_under_the_namespace_and_back() -> None:
    assert path_to_slug("/memories/Team Notes/user_preferences.md") == "memories/qcteamqsqcnotes/userqupreferencesqdmd"
    assert slug_to_path("memories/qcteamqsqcnotes/userqupreferencesqdmd") == "/memories/Team Notes/user_preferences.md"
    assert path_to_slug("/memories/a.md", "memories/ops-bot") == "memories/ops-bot/aqdmd"
    assert slug_to_path("memories/ops-bot/aqdmd", "memories/ops-bot") == "/memories/a.md"
    assert [encode_segment(a) == encode_segment(b) for a, b in [("A", "a"), ("a.b", "a_b"), ("x-y", "x y")]] == [
        False
    ] * 3
    for bad in ("people/alice", "memories/qz", "memories/q"):
        with pytest.raises(ValueError):
            slug_to_path(bad)


# --------------------------------------------------------------------------- the six commands


def commands(missing: str) -> list[Any]:
    """One script of commands, each of the six, with the SDK's error cases among them."""
    view, create = BetaMemoryTool20250818ViewCommand, BetaMemoryTool20250818CreateCommand
    replace, insert = BetaMemoryTool20250818StrReplaceCommand, BetaMemoryTool20250818InsertCommand
    rename, delete = BetaMemoryTool20250818RenameCommand, BetaMemoryTool20250818DeleteCommand
    return [
        create(command="create", path="/memories/notes/Acme Plan.md", file_text="# Acme\nAlice leads.\nAlice signs.\n"),
        create(command="create", path="/memories/notes/Acme Plan.md", file_text="again"),
        view(command="view", path="/memories/notes/Acme Plan.md"),
        view(command="view", path="/memories/notes/Acme Plan.md", view_range=[2, -1]),
        replace(command="str_replace", path="/memories/notes/Acme Plan.md", old_str="Alice", new_str="Bob"),
        replace(command="str_replace", path="/memories/notes/Acme Plan.md", old_str="Carol", new_str="Bob"),
        replace(command="str_replace", path="/memories/notes/Acme Plan.md", old_str="leads", new_str="runs it"),
        insert(command="insert", path="/memories/notes/Acme Plan.md", insert_line=1, insert_text="Founded 2019.\n"),
        insert(command="insert", path="/memories/notes/Acme Plan.md", insert_line=99, insert_text="late"),
        view(command="view", path="/memories/notes/Acme Plan.md"),
        view(command="view", path=missing),
        replace(command="str_replace", path=missing, old_str="a", new_str="b"),
        insert(command="insert", path=missing, insert_line=0, insert_text="a"),
        view(command="view", path="/etc/passwd"),
        create(command="create", path="/memories/../escape.md", file_text="x"),
        view(command="view", path="/memories/notes/../../etc"),
        create(command="create", path="/memories/b.md", file_text="b\n"),
        rename(command="rename", old_path="/memories/notes/Acme Plan.md", new_path="/memories/b.md"),
        rename(command="rename", old_path="/memories/notes/Acme Plan.md", new_path="/memories/archive/acme.md"),
        rename(command="rename", old_path=missing, new_path="/memories/c.md"),
        view(command="view", path="/memories/archive/acme.md"),
        view(command="view", path="/memories/notes/Acme Plan.md"),
        delete(command="delete", path="/memories/b.md"),
        delete(command="delete", path="/memories/b.md"),
        delete(command="delete", path="/memories"),
        rename(command="rename", old_path="/memories", new_path="/memories/x"),
    ]


def test_the_commands_answer_as_the_sdks_own_memory_tool(token_env: Server, tmp_path: Path) -> None:
    """Every command's answer, and every error, is the one the SDK's local-filesystem memory tool
    gives for the same command (its texts are the memory tool's semantics)."""
    with Client(base(token_env)) as client:
        ours = FleetmemMemoryTool(client, namespace=fresh_namespace())
        theirs = BetaLocalFilesystemMemoryTool(str(tmp_path / "sdk"))
        script = commands(missing="/memories/nothing-here.md")
        got = [run(ours, c) for c in script]
        expected = [run(theirs, c) for c in script]
    assert got == expected
    assert [kind for kind, _ in got].count("error") >= 12  # the script exercises the error cases


def test_each_file_is_a_page_of_the_callers_tenant(token_env: Server) -> None:
    namespace = fresh_namespace()
    with Client(base(token_env)) as client:
        tool = FleetmemMemoryTool(client, namespace=namespace)
        tool.execute(
            BetaMemoryTool20250818CreateCommand(
                command="create", path="/memories/Alice.md", file_text="---\nx: 1\n---\nhi\n"
            )
        )
    page = v1(token_env, "get_page", {"slug": f"{namespace}/qcaliceqdmd"})
    assert (page["type"], page["title"]) == (PAGE_TYPE, "/memories/Alice.md")
    assert page["content"].endswith("\n---\n---\nx: 1\n---\nhi\n")  # the file as written, frontmatter and all
    with Client(base(token_env)) as client:
        view = FleetmemMemoryTool(client, namespace=namespace).execute(
            BetaMemoryTool20250818ViewCommand(command="view", path="/memories/Alice.md")
        )
    assert view.endswith("     1\t---\n     2\tx: 1\n     3\t---\n     4\thi\n     5\t")


def test_a_directory_view_lists_two_levels_without_hidden_items(token_env: Server) -> None:
    with Client(base(token_env)) as client:
        tool = FleetmemMemoryTool(client, namespace=fresh_namespace())
        for path in (
            "/memories/a.md",
            "/memories/d/b.md",
            "/memories/d/e/f.md",
            "/memories/d/e/g/h.md",
            "/memories/.x/y",
        ):
            tool.execute(BetaMemoryTool20250818CreateCommand(command="create", path=path, file_text="t"))
        root = tool.execute(BetaMemoryTool20250818ViewCommand(command="view", path="/memories"))
        sub = tool.execute(BetaMemoryTool20250818ViewCommand(command="view", path="/memories/d"))
    assert root.splitlines()[1:] == [
        "/memories",
        "/memories/a.md",
        "/memories/d/",
        "/memories/d/b.md",
        "/memories/d/e/",
    ]
    assert sub.splitlines()[1:] == [
        "/memories/d",
        "/memories/d/b.md",
        "/memories/d/e/",
        "/memories/d/e/f.md",
        "/memories/d/e/g/",
    ]
    assert (
        root.splitlines()[0]
        == "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:"
    )


# --------------------------------------------------------------------------- the SDK's tool runner


class ScriptedMessages:
    """The Messages API, scripted: each request is answered with the next reply (tool_use blocks or
    a final text); every request body is kept, so the tool results the runner sent can be read."""

    def __init__(self, *replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=self.reply(json.loads(request.read())))

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        content = self.replies.pop(0) if self.replies else [{"type": "text", "text": "Done."}]
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        message = {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": "claude-scripted",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        return message

    def tool_results(self) -> list[dict[str, Any]]:
        return [
            block
            for body in self.requests
            for message in body["messages"]
            if isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]


def memory_call(call_id: str, **command: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "memory", "input": command}


def converse(server: Server, namespace: str, script: ScriptedMessages, prompt: str) -> ScriptedMessages:
    """One run: a new fleetmem client, memory tool and Anthropic client, driven by the tool runner."""
    anthropic = Anthropic(api_key="sk-test", http_client=httpx2.Client(transport=httpx2.MockTransport(script.handle)))
    with Client(base(server)) as memory:
        runner = anthropic.beta.messages.tool_runner(
            model="claude-sonnet-5-5",
            max_tokens=1024,
            tools=[FleetmemMemoryTool(memory, namespace=namespace)],
            messages=[{"role": "user", "content": prompt}],
        )
        runner.until_done()
    return script


def test_a_file_saved_in_one_run_is_recalled_in_the_next(token_env: Server) -> None:
    namespace = fresh_namespace()
    first = ScriptedMessages(
        [memory_call("toolu_1", command="view", path="/memories")],
        [memory_call("toolu_2", command="create", path="/memories/prefs.md", file_text="Alice prefers oolong tea.\n")],
    )
    converse(token_env, namespace, first, "Remember that Alice prefers oolong tea.")
    assert [r.get("is_error", False) for r in first.tool_results()] == [False, False]
    assert first.requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]

    second = ScriptedMessages(
        [memory_call("toolu_3", command="view", path="/memories")],
        [memory_call("toolu_4", command="view", path="/memories/prefs.md")],
    )
    converse(token_env, namespace, second, "What tea does Alice like?")
    listing, file = (json.dumps(r["content"]) for r in second.tool_results())
    assert "/memories/prefs.md" in listing
    assert "Alice prefers oolong tea." in file


def test_a_read_only_tokens_write_is_a_tool_error_with_the_envelope(
    monkeypatch: pytest.MonkeyPatch, server: Server
) -> None:
    namespace = fresh_namespace()
    monkeypatch.setenv("FLEETMEM_TOKEN", server.read_token)
    script = ScriptedMessages(
        [memory_call("toolu_1", command="create", path="/memories/plan.md", file_text="Ship on Friday.\n")]
    )
    converse(server, namespace, script, "Note the plan.")
    [result] = script.tool_results()
    text = json.dumps(result["content"])
    assert result["is_error"] is True
    assert "[scope_denied]" in text and '\\"next\\": ' in text and "correlation_id c_" in text
    assert v1(server, "get_page", {"slug": f"{namespace}/planqdmd"})["code"] == "not_found"
    with Client(base(server)) as client, pytest.raises(ToolError) as raised:
        FleetmemMemoryTool(client, namespace=namespace).execute(
            BetaMemoryTool20250818CreateCommand(command="create", path="/memories/plan.md", file_text="x")
        )
    assert "[scope_denied]" in str(raised.value)


# --------------------------------------------------------------------------- privacy


def test_a_private_page_or_section_never_reaches_the_memory_tool(token_env: Server) -> None:
    namespace = fresh_namespace()
    secret = f"vault-{uuid.uuid4().hex[:8]}"
    common = {"type": PAGE_TYPE, "title": "t"}
    v1(
        token_env,
        "put_page",
        {"slug": f"{namespace}/keysqdmd", "content": f"The {secret} code.\n", "visibility": "private", **common},
    )
    shared = f"Public line.\n<!-- private -->\nThe {secret} code.\n<!-- /private -->\nLast line.\n"
    assert (
        v1(token_env, "put_page", {"slug": f"{namespace}/teamqdmd", "content": shared, **common})["status"] == "created"
    )
    with Client(base(token_env)) as client:
        tool = FleetmemMemoryTool(client, namespace=namespace)
        listing = tool.execute(BetaMemoryTool20250818ViewCommand(command="view", path="/memories"))
        team = tool.execute(BetaMemoryTool20250818ViewCommand(command="view", path="/memories/team.md"))
        kind, keys = run(tool, BetaMemoryTool20250818ViewCommand(command="view", path="/memories/keys.md"))
    assert "/memories/team.md" in listing and "keys.md" not in listing
    assert "Public line." in team and "Last line." in team and secret not in team
    assert (kind, keys) == ("error", "The path /memories/keys.md does not exist. Please provide a valid path.")


def pack(server: Server, session: str, event: str = "UserPromptSubmit", **kwargs: Any) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with AsyncClient(base(server)) as client:
            hook = SessionPack(client, **kwargs)
            return await hook({"hook_event_name": event, "session_id": session}, None, {"signal": None})

    return asyncio.run(go())


def test_the_session_pack_injects_world_memory_once_per_session_and_never_a_private_fact(token_env: Server) -> None:
    tag = uuid.uuid4().hex[:8]
    entity = f"people/dana-{tag}"
    v1(token_env, "put_page", {"slug": entity, "content": f"Dana {tag} runs the Lisbon office.", "type": "person"})
    v1(
        token_env,
        "remember",
        {"fact": f"Dana {tag} prefers written updates", "provenance": "test:claude", "entity": entity},
    )
    v1(
        token_env,
        "remember",
        {
            "fact": f"Dana {tag} keeps the safe code",
            "provenance": "test:claude",
            "entity": entity,
            "visibility": "private",
        },
    )

    async def twice() -> list[dict[str, Any]]:
        async with AsyncClient(base(token_env)) as client:
            hook = SessionPack(client, entities=[entity])
            first = await hook({"hook_event_name": "UserPromptSubmit", "session_id": "s-1"}, None, {"signal": None})
            again = await hook({"hook_event_name": "UserPromptSubmit", "session_id": "s-1"}, None, {"signal": None})
            return [first, again]

    first, again = asyncio.run(twice())
    out = first["hookSpecificOutput"]
    assert out["hookEventName"] == "UserPromptSubmit"
    assert f"Dana {tag} prefers written updates" in out["additionalContext"]
    assert "safe code" not in json.dumps(first)
    assert again == {}
    start = pack(token_env, "s-2", event="SessionStart", entities=[entity])
    assert start["hookSpecificOutput"]["hookEventName"] == "SessionStart"


def test_a_failed_pack_never_stops_the_agent(monkeypatch: pytest.MonkeyPatch, server: Server) -> None:
    monkeypatch.setenv("FLEETMEM_TOKEN", "fm_not-a-token")
    answer = pack(server, "s-3")
    assert set(answer) == {"systemMessage"} and "fleetmem: no context pack" in answer["systemMessage"]
    assert "fm_not-a-token" not in answer["systemMessage"]


# --------------------------------------------------------------------------- the Agent SDK's MCP entry


def test_the_agent_options_reach_the_registrys_tools_over_mcp(token_env: Server) -> None:
    """The options' server entry, opened with the official MCP client as configured, lists every
    allowed tool with the registry's input schema."""
    from mcp.client import Client as McpClient
    from mcp.client.streamable_http import streamable_http_client

    options = agent_options(base(token_env))
    [(name, entry)] = options["mcp_servers"].items()
    assert (name, entry["type"], entry["url"]) == ("fleetmem", "http", token_env.url)
    assert options["allowed_tools"] == [f"mcp__fleetmem__{verb}" for verb in VERB_NAMES]

    async def listed() -> dict[str, Any]:
        async with httpx2.AsyncClient(headers=entry["headers"], timeout=30) as http:
            async with McpClient(streamable_http_client(entry["url"], http_client=http)) as mcp:
                return {tool.name: tool.input_schema for tool in (await mcp.list_tools()).tools}

    tools = asyncio.run(listed())
    for allowed in options["allowed_tools"]:
        tool = allowed.removeprefix("mcp__fleetmem__")
        assert tools[tool] == tool_schema(REGISTRY[tool]), tool


def test_the_agent_options_need_a_token_from_the_environment(monkeypatch: pytest.MonkeyPatch, server: Server) -> None:
    monkeypatch.delenv("FLEETMEM_TOKEN", raising=False)
    with pytest.raises(FleetmemError) as raised:
        agent_options(base(server))
    assert raised.value.code == "invalid_params" and raised.value.next


def test_importing_the_integrations_loads_no_server_stack_and_the_client_no_framework() -> None:
    probe = (
        "import sys, fleetmem, fleetmem.client\n"
        "assert 'anthropic' not in sys.modules\n"
        "import fleetmem.integrations.claude_agent\n"
        "assert 'anthropic' not in sys.modules and 'claude_agent_sdk' not in sys.modules\n"
        "import fleetmem.integrations.anthropic_memory\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=dict(os.environ), timeout=120
    )
    assert out.returncode == 0, out.stderr
    loaded = out.stdout.split()
    assert "anthropic" in loaded
    stack = ("fleetmem.transport", "fleetmem.wiring", "fleetmem.adapters", "fleetmem.memory", "mcp", "starlette")
    assert [m for m in loaded if any(m == s or m.startswith(s + ".") for s in stack)] == []


def test_an_edit_never_overwrites_a_change_made_since_it_read_the_file(token_env: Server) -> None:
    """Another writer lands between the edit's read and its write: the edit is refused, not merged over."""
    namespace = fresh_namespace()

    class Raced(FleetmemMemoryTool):
        def _read(self, path: str) -> tuple[str, str] | None:
            found = super()._read(path)
            v1(token_env, "put_page", {"slug": path_to_slug(path, namespace), "content": "---\n---\nrewritten\n"})
            return found

    with Client(base(token_env)) as client:
        FleetmemMemoryTool(client, namespace=namespace).execute(
            BetaMemoryTool20250818CreateCommand(command="create", path="/memories/a.md", file_text="one\n")
        )
        kind, text = run(
            Raced(client, namespace=namespace),
            BetaMemoryTool20250818StrReplaceCommand(
                command="str_replace", path="/memories/a.md", old_str="one", new_str="two"
            ),
        )
    assert (kind, text) == ("error", "The file /memories/a.md changed since it was read; view it again and retry.")
    assert v1(token_env, "get_page", {"slug": path_to_slug("/memories/a.md", namespace)})["content"].endswith(
        "\nrewritten\n"
    )


@contextmanager
def messages_api_on_loopback(script: ScriptedMessages) -> Iterator[str]:
    """The scripted Messages API served over HTTP on 127.0.0.1 (a free port), for a process that
    reaches the model by URL (`ANTHROPIC_BASE_URL`): only the model is scripted, as above."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            raw = json.dumps(script.reply(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_docs_example_runs_as_written_and_its_second_run_finds_what_the_first_saved(token_env: Server) -> None:
    """docs/claude.md's first example, run twice in new processes as written, with the model
    scripted over loopback HTTP (the Messages API cannot run here)."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "claude.md").read_text(encoding="utf-8")
    example = docs.split("```python\n", 1)[1].split("```", 1)[0]
    name = f"/memories/docs-{uuid.uuid4().hex[:8]}.md"
    runs = [
        ScriptedMessages(
            [memory_call("toolu_1", command="create", path=name, file_text="Alice prefers oolong tea.\n")]
        ),
        ScriptedMessages([memory_call("toolu_2", command="view", path=name)]),
    ]
    for script in runs:
        with messages_api_on_loopback(script) as model_url:
            env = {
                **os.environ,
                "ANTHROPIC_BASE_URL": model_url,
                "ANTHROPIC_API_KEY": "sk-test",
                "FLEETMEM_URL": base(token_env),
                "FLEETMEM_TOKEN": token_env.token,
            }
            run = subprocess.run([sys.executable, "-c", example], env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
    created, viewed = (script.tool_results() for script in runs)
    assert [r.get("is_error", False) for r in created + viewed] == [False, False]
    assert "Alice prefers oolong tea." in json.dumps(viewed[0]["content"])
