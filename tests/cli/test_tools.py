"""Registry tools as generated subcommands on the trusted-local lane: output, --json, exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetmem.cli import build_parser
from fleetmem.cli.tools import ToolCommand
from fleetmem.memory.verbs import REGISTRY
from tests.cli.conftest import Fleetmem


def remember(fm: Fleetmem, fact: str, *extra: str) -> str:
    run = fm("remember", fact, "--provenance", "cli test", *extra, "--json")
    assert run.code == 0, run.stdout + run.stderr
    return str(run.json()["id"])


def test_every_registry_tool_is_a_generated_subcommand() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in REGISTRY:
        assert name.replace("_", "-") in sub.choices, name


def test_every_parameter_of_every_tool_has_an_option() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, spec in REGISTRY.items():
        tool_parser = sub.choices[name.replace("_", "-")]
        options = {o for a in tool_parser._actions for o in a.option_strings}
        for param in ToolCommand(spec).props:
            assert "--" + param.replace("_", "-") in options, f"{name}.{param}"


def test_a_cli_fix_renders_back_to_the_same_arguments() -> None:
    cmd = ToolCommand(REGISTRY["recall"])
    argv = cmd.argv({"query": "acme pricing", "limit": 10, "include_private": True})
    parser = build_parser()
    args = parser.parse_args(argv[1:])
    assert cmd.arguments(args) == {"query": "acme pricing", "limit": 10, "include_private": True}


def test_remember_then_recall_by_entity_round_trips(fm: Fleetmem) -> None:
    fact_id = remember(fm, "Alice prefers async standups", "--entity", "people/alice")
    run = fm("recall", "--entity", "people/alice", "--json", subprocess=True)
    assert run.code == 0, run.stderr
    body = run.json()
    assert body["protocol_version"] == 1
    assert [f["fact_id"] for f in body["facts"]] == [fact_id]
    assert body["facts"][0]["provenance"] == "cli test"


def test_human_recall_output_names_the_fact_and_its_id(fm: Fleetmem) -> None:
    fact_id = remember(fm, "Bob moved to Lisbon", "--entity", "people/bob")
    run = fm("recall", "--entity", "people/bob")
    assert run.code == 0
    assert fact_id in run.stdout


def test_private_facts_are_readable_on_the_trusted_local_lane(fm: Fleetmem) -> None:
    fact_id = remember(fm, "Carol's door code is 4711", "--entity", "people/carol", "--visibility", "private")
    hidden = fm("recall", "--entity", "people/carol", "--json").json()
    assert fact_id not in [f["fact_id"] for f in hidden["facts"]]
    shown = fm("recall", "--entity", "people/carol", "--include-private", "--json").json()
    assert fact_id in [f["fact_id"] for f in shown["facts"]]


def test_json_error_is_the_envelope_and_exits_2_for_a_caller_mistake(fm: Fleetmem) -> None:
    run = fm("remember", "No provenance here", "--json", subprocess=True)
    assert run.code == 2
    body = run.json()
    assert body["code"] == "invalid_params"
    assert body["suggestion"]
    assert body["contract_version"] == 1


def test_blank_provenance_is_provenance_required_exit_2(fm: Fleetmem) -> None:
    run = fm("remember", "A fact", "--provenance", "  ", "--json")
    assert run.code == 2
    assert run.json()["code"] == "provenance_required"


def test_human_error_goes_to_stderr_with_a_runnable_cli_fix(fm: Fleetmem) -> None:
    run = fm("remember", "Deadline moved", "--provenance", "chat", "--ttl", "P30D", subprocess=True)
    assert run.code == 2
    assert run.stdout == ""
    assert "[invalid_params]" in run.stderr
    assert "fleetmem remember" in run.stderr


def test_string_limit_passes_through_to_validation_as_invalid_params(fm: Fleetmem) -> None:
    run = fm("recall", "--query", "anything", "--limit", "abc", "--json")
    assert run.code == 2
    assert run.json()["code"] == "invalid_params"


def test_forget_of_an_unknown_id_exits_2_not_found(fm: Fleetmem) -> None:
    run = fm("forget", "f_doesnotexist", "--json")
    assert run.code == 2
    assert run.json()["code"] == "not_found"


def test_forget_is_idempotent(fm: Fleetmem) -> None:
    fact_id = remember(fm, "Temporary plan", "--entity", "projects/x")
    first = fm("forget", fact_id, "--reason", "done", "--json")
    second = fm("forget", fact_id, "--json")
    assert (first.code, second.code) == (0, 0)
    assert first.json()["expired"] is True
    assert second.json()["expired"] is False


def test_purge_without_yes_exits_3_and_deletes_nothing(fm: Fleetmem) -> None:
    fact_id = remember(fm, "Delete me on request", "--entity", "people/dana")
    run = fm("purge-fact", fact_id, "--json", subprocess=True)
    assert run.code == 3
    doc = run.json()
    assert doc["code"] == "confirmation_required"
    assert doc["fix"]["next"] == "ask_user"
    assert "--yes" in doc["fix"]["argv"]
    still = fm("recall", "--entity", "people/dana", "--json").json()
    assert [f["fact_id"] for f in still["facts"]] == [fact_id]


def test_purge_with_yes_deletes_the_fact(fm: Fleetmem) -> None:
    fact_id = remember(fm, "Delete me on request", "--entity", "people/dana")
    run = fm("purge-fact", fact_id, "--yes", "--json")
    assert run.code == 0, run.stdout + run.stderr
    gone = fm("recall", "--entity", "people/dana", "--include-expired", "--include-private", "--json").json()
    assert gone["facts"] == []


def test_empty_recall_exits_0_unless_fail_on_empty_is_set(fm: Fleetmem) -> None:
    assert fm("recall", "--entity", "people/nobody", "--json").code == 0
    run = fm("recall", "--entity", "people/nobody", "--json", env={"FLEETMEM_FAIL_ON_EMPTY": "1"}, subprocess=True)
    assert run.code == 12
    assert run.json()["facts"] == []


def test_entity_miss_exits_12_only_with_fail_on_empty(fm: Fleetmem) -> None:
    assert fm("entity", "Nobody Known").code == 0
    assert fm("entity", "Nobody Known", env={"FLEETMEM_FAIL_ON_EMPTY": "1"}).code == 12


def test_a_usage_error_exits_2_with_the_fallback_document(fm: Fleetmem) -> None:
    run = fm("recall", "--json", "--limit", subprocess=True)
    assert run.code == 2
    doc = run.json()
    assert doc["error"] == "command_failed"
    assert doc["code"] == "usage"
    assert doc["exit_code"] == 2


def test_put_page_reads_content_from_a_file(fm: Fleetmem, tmp_path: Path) -> None:
    page = tmp_path / "erin.md"
    page.write_text("---\ntitle: Erin Example\ntype: person\n---\nErin runs the platform team.\n", encoding="utf-8")
    run = fm("put-page", "people/erin", "--file", str(page), "--json")
    assert run.code == 0, run.stdout + run.stderr
    got = fm("entity", "Erin Example", "--json").json()
    assert got["found"] is True
    assert got["card"]["entity"]["slug"] == "people/erin"


def test_put_page_reads_content_from_stdin(fm: Fleetmem) -> None:
    run = fm(
        "put-page",
        "people/frank",
        "--json",
        subprocess=True,
        stdin="---\ntitle: Frank Example\n---\nFrank writes docs.\n",
    )
    assert run.code == 0, run.stdout + run.stderr
    assert fm("entity", "people/frank", "--json").json()["found"] is True


def test_context_pack_takes_comma_separated_entities(fm: Fleetmem) -> None:
    fm("put-page", "people/gina", stdin="---\ntitle: Gina Example\n---\nGina leads sales.\n")
    run = fm("context-pack", "--entities", "people/gina,people/nobody", "--json")
    assert run.code == 0, run.stderr
    body = run.json()
    assert [c["entity"]["slug"] for c in body["cards"]] == ["people/gina"]


@pytest.mark.parametrize("tenant", ["default", "team-b"])
def test_tenant_option_isolates_brains(fm: Fleetmem, tenant: str) -> None:
    fact_id = remember(fm, "Tenant scoped fact", "--entity", "projects/t", "--tenant", "team-a")
    run = fm("recall", "--entity", "projects/t", "--tenant", tenant, "--json")
    assert fact_id not in [f["fact_id"] for f in run.json()["facts"]]
