"""The OpenAI Agents SDK integration (`fleetmem.integrations.openai_agents`) against a real
`fleetmem serve` on 127.0.0.1 (a free port), driven by the SDK's own scripted model
(`agents.testing.ScriptedModel`, a `Model` subclass answering with scripted tool calls and then a
final message; no network, no model calls, tracing disabled).

Shown: the tools' schemas are the registry's; a fact saved in one run is recalled in the next (by
the next run's context pack and by its recall); a read token's write comes back to the model as a
tool error carrying the envelope, and the run goes on; a private fact never reaches the model
through the remote adapter; the SDK is imported only with the integration.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from fleetmem.client import AsyncClient, Client
from fleetmem.contract.tools import tool_schema
from fleetmem.integrations.openai_agents import FleetmemHooks, memory_tools, strict_allowed
from fleetmem.memory.verbs import REGISTRY
from fleetmem.protocol import VERB_NAMES
from tests.clients.served import base, server, token_env, v1  # noqa: F401 (fixtures)
from tests.conformance.test_conformance_local import Server

pytestmark = pytest.mark.xdist_group("frameworks")

set_tracing_disabled(True)

ALICE = "people/alice-example"
DOC = Path(__file__).resolve().parents[2] / "docs" / "openai-agents.md"


def run(server: Server, model: ScriptedModel, prompt: str, **hooks_args: Any) -> tuple[Any, FleetmemHooks]:
    """One run of an agent with the memory tools and hooks (a new client, agent and hooks: nothing
    carries over from an earlier run but what the memory holds)."""

    async def go() -> tuple[Any, FleetmemHooks]:
        async with AsyncClient(base(server), retry_wait_s=0) as memory:
            hooks = FleetmemHooks(memory, **hooks_args)
            agent = Agent(name="ops-agent", instructions=hooks.instructions("You run ops."), tools=memory_tools(memory))
            result = await Runner.run(
                agent, prompt, hooks=hooks, run_config=RunConfig(model=model, tracing_disabled=True)
            )
            return result, hooks

    return asyncio.run(go())


def tool_outputs(model: ScriptedModel) -> list[str]:
    """Every tool output the model was shown (the `function_call_output` items of its inputs)."""
    outputs: list[str] = []
    for call in model.calls:
        items = call.input if isinstance(call.input, list) else []
        outputs.extend(
            str(i["output"]) for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        )
    return outputs


def everything_seen(model: ScriptedModel) -> str:
    return "\n".join(f"{c.system_instructions}\n{json.dumps(c.input, default=str)}" for c in model.calls)


# --------------------------------------------------------------------------- the tools are the registry's


def test_every_tool_is_a_verb_with_the_registrys_description_and_parameters() -> None:
    tools = memory_tools(AsyncClient(data_dir="/nonexistent-never-called"))
    assert [t.name for t in tools] == list(VERB_NAMES)
    for tool in tools:
        schema = tool_schema(REGISTRY[tool.name])
        assert tool.params_json_schema == schema, tool.name
        assert tool.description == REGISTRY[tool.name].description
        # every verb has an optional parameter, which strict mode would turn into a required one
        assert set(schema["properties"]) != set(schema.get("required") or []), tool.name
        assert tool.strict_json_schema is False, tool.name


def test_strict_mode_is_used_when_every_parameter_is_required() -> None:
    closed = {"type": "object", "properties": {"slug": {"type": "string"}}, "required": ["slug"]}
    assert strict_allowed(closed) is True
    assert strict_allowed({**closed, "required": []}) is False
    assert strict_allowed({**closed, "additionalProperties": True}) is False


def test_the_sdk_is_imported_with_the_integration_only() -> None:
    probe = (
        "import sys, fleetmem, fleetmem.client\n"
        "print('before', 'agents' in sys.modules, 'openai' in sys.modules)\n"
        "import fleetmem.integrations.openai_agents\n"
        "print('after', 'agents' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=dict(os.environ), timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["before", "False", "False", "after", "True"]


# --------------------------------------------------------------------------- two runs, one memory


def test_a_fact_saved_in_one_run_is_recalled_in_the_next(token_env: Server) -> None:
    marker = f"email-{uuid.uuid4().hex[:8]}"
    fact = f"Alice prefers {marker} over calls"
    page = v1(token_env, "put_page", {"slug": ALICE, "content": "---\ntitle: Alice Example\n---\nAlice runs payments."})
    assert "code" not in page, page
    first = ScriptedModel(
        [
            [
                function_call(
                    "remember", {"fact": fact, "provenance": "user said in chat", "entity": ALICE}, call_id="c1"
                )
            ],
            [assistant_message(f"Noted that Alice prefers {marker}.")],
        ]
    )
    result, hooks = run(token_env, first, "Remember that Alice prefers email.", entities=[ALICE])
    assert result.final_output == f"Noted that Alice prefers {marker}."
    saved = json.loads(tool_outputs(first)[0])
    assert saved["status"] == "inserted" and saved["entity_slug"] == ALICE
    assert hooks.errors == [] and len(hooks.banked) == 1

    second = ScriptedModel(
        [
            [function_call("recall", {"entity": ALICE}, call_id="c2")],
            [assistant_message("Alice prefers email.")],
        ]
    )
    run(token_env, second, "How should I reach Alice?", entities=[ALICE])
    assert fact in (second.calls[0].system_instructions or ""), "the next run's pack carries the fact"
    assert (second.calls[0].system_instructions or "").startswith("You run ops.")
    recalled = json.loads(tool_outputs(second)[0])
    assert fact in {f["fact"] for f in recalled["facts"]}, "and its recall finds it"
    banked = v1(token_env, "list_facts", {"entity": ALICE, "provenance": "openai-agents agent ops-agent"})
    assert f"Noted that Alice prefers {marker}." in {f["fact"] for f in banked["facts"]}


# --------------------------------------------------------------------------- scopes and privacy


def test_a_read_tokens_write_comes_back_as_a_tool_error_with_the_envelope(
    monkeypatch: pytest.MonkeyPatch, server: Server
) -> None:
    monkeypatch.setenv("FLEETMEM_TOKEN", server.read_token)
    fact = f"Read-only write {uuid.uuid4().hex[:8]}"
    model = ScriptedModel(
        [
            [function_call("remember", {"fact": fact, "provenance": "test:openai-agents"}, call_id="c3")],
            [assistant_message("I could not save that.")],
        ]
    )
    result, hooks = run(server, model, "Save it.", entities=[ALICE])
    assert result.final_output == "I could not save that.", "the refusal did not end the run"
    (output,) = tool_outputs(model)
    assert output.startswith("Tool error: fleetmem refused remember (scope_denied)")
    envelope = json.loads(output.split("\n", 1)[1])["error"]
    assert envelope["code"] == "scope_denied" and envelope["fix"]["next"] and envelope["correlation_id"]
    assert envelope["message"] in output and f"Next: {envelope['fix']['next']}." in output
    # the hooks' own write (banking the output) is refused the same way, and kept, not raised
    assert [e.code for e in hooks.errors] == ["scope_denied"] and hooks.banked == []
    listed = v1(server, "list_facts", {"provenance": "test:openai-agents", "state": "any", "limit": 200})
    assert fact not in {f["fact"] for f in listed["facts"]}


def test_a_private_fact_never_reaches_the_model_through_the_remote_adapter(token_env: Server) -> None:
    marker = f"vault-{uuid.uuid4().hex[:8]}"
    secret = f"code-{uuid.uuid4().hex[:12]}"
    saving = ScriptedModel(
        [
            [
                function_call(
                    "remember",
                    {
                        "fact": f"The {marker} opens with {secret}",
                        "provenance": "user said",
                        "entity": ALICE,
                        "visibility": "private",
                    },
                    call_id="c4",
                )
            ],
            [assistant_message("Saved privately.")],
        ]
    )
    run(token_env, saving, "Keep the vault code private.", entities=[ALICE])
    assert json.loads(tool_outputs(saving)[0])["status"] == "inserted"

    asking = ScriptedModel(
        [
            [
                function_call("recall", {"query": marker, "include_private": True}, call_id="c5"),
                function_call("context_pack", {"entities": ALICE, "include_private": True}, call_id="c6"),
                function_call("entity", {"name": ALICE}, call_id="c7"),
            ],
            [assistant_message("I do not know the code.")],
        ]
    )
    run(token_env, asking, "What is the vault code?", entities=[ALICE])
    assert len(tool_outputs(asking)) == 3 and not any(o.startswith("Tool error") for o in tool_outputs(asking))
    assert secret not in everything_seen(asking)
    local = Client(data_dir=token_env.data_dir).list_facts(entity=ALICE, state="any", limit=200)
    assert any(secret in f.fact for f in local.facts), "the private fact was stored (the trusted local caller sees it)"


def test_arguments_that_are_not_an_object_come_back_as_a_tool_error(token_env: Server) -> None:
    model = ScriptedModel(
        [[function_call("recall", "[1, 2]", call_id="c8")], [assistant_message("Let me try again later.")]]
    )
    result, _ = run(token_env, model, "Recall.", bank=False)
    assert result.final_output == "Let me try again later."
    (output,) = tool_outputs(model)
    assert output.startswith("Tool error: fleetmem refused recall (invalid_params)")
    assert json.loads(output.split("\n", 1)[1])["error"]["fix"]["next"]


# --------------------------------------------------------------------------- the documented example


def test_the_documented_example_runs_and_recalls_in_its_second_run(token_env: Server) -> None:
    doc = DOC.read_text(encoding="utf-8")
    example = doc.split("## Example", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    env = {**os.environ, "FLEETMEM_URL": base(token_env), "FLEETMEM_TOKEN": token_env.token}
    out = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    first, second, instructions = out.stdout.split("\n", 2)
    assert (first, second) == ("Noted: Alice prefers email.", "Email her.")
    assert instructions.startswith("You run ops.") and "Alice prefers email over calls" in instructions


def test_the_output_is_banked_under_the_entities_the_runs_tool_calls_named(token_env: Server) -> None:
    acme, globex = (f"companies/{n}-{uuid.uuid4().hex[:6]}" for n in ("acme", "globex"))
    model = ScriptedModel(
        [
            [
                function_call("recall", {"entity": acme}, call_id="c9"),
                function_call("context_pack", {"entities": f"{globex}, {acme}"}, call_id="c10"),
            ],
            [assistant_message("Acme and Globex have no open threads.")],
        ]
    )
    _, hooks = run(token_env, model, "Anything open with Acme or Globex?")
    assert hooks.errors == [] and len(hooks.banked) == 2
    for slug in (acme, globex):
        facts = v1(token_env, "list_facts", {"entity": slug})["facts"]
        assert [(f["fact"], f["provenance"]) for f in facts] == [
            ("Acme and Globex have no open threads.", "openai-agents agent ops-agent")
        ], slug
