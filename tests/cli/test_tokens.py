"""`fleetmem token create|list|revoke` against a real data directory."""

from __future__ import annotations

from tests.cli.conftest import Fleetmem


def test_token_create_json_prints_the_token_once_with_client_tenant_and_scopes(fm: Fleetmem) -> None:
    run = fm("token", "create", "--client", "agent-a", "--scopes", "read,write", "--json", subprocess=True)
    assert run.code == 0, run.stderr
    doc = run.json()
    assert doc["token"].startswith("fm_")
    assert doc["client"] == "agent-a"
    assert doc["tenant"] == "default"
    assert doc["scopes"] == ["read", "write"]


def test_token_create_human_prints_only_the_token_on_stdout(fm: Fleetmem) -> None:
    run = fm("token", "create", "--client", "agent-a", "--scopes", "read", "--tenant", "team-x", subprocess=True)
    assert run.code == 0, run.stderr
    assert run.stdout.strip().startswith("fm_")
    assert len(run.stdout.strip().splitlines()) == 1


def test_token_list_never_shows_a_token(fm: Fleetmem) -> None:
    token = fm("token", "create", "--client", "agent-a", "--scopes", "read,write", "--json").json()["token"]
    listed = fm("token", "list", "--json")
    assert listed.code == 0, listed.stderr
    (entry,) = listed.json()["tokens"]
    assert set(entry) == {"token_id", "client", "tenant", "scopes", "created", "revoked", "tier"}
    assert entry["client"] == "agent-a" and entry["revoked"] is None and entry["tier"] is None
    human = fm("token", "list")
    assert token not in listed.stdout + listed.stderr + human.stdout + human.stderr


def test_a_tier_is_refused_locally_where_there_are_no_usage_plans(fm: Fleetmem) -> None:
    """`--tier` names an AWS stage's usage plan; the local server has none, so it is refused
    instead of dropped, and nothing is minted."""
    run = fm("token", "create", "--client", "agent-a", "--scopes", "read", "--tier", "fleet", "--json")
    assert run.code == 2, run.stdout
    assert "usage plans" in run.stdout + run.stderr  # says why, not an unknown option
    assert fm("token", "list", "--json").json()["tokens"] == []


def test_token_revoke_marks_the_token_revoked_in_the_list(fm: Fleetmem) -> None:
    fm("token", "create", "--client", "agent-a", "--scopes", "read", "--json")
    token_id = fm("token", "list", "--json").json()["tokens"][0]["token_id"]
    run = fm("token", "revoke", token_id)
    assert run.code == 0, run.stderr
    (entry,) = fm("token", "list", "--json").json()["tokens"]
    assert entry["revoked"] is not None


def test_token_revoke_of_an_unknown_id_exits_2_with_a_fallback_document(fm: Fleetmem) -> None:
    run = fm("token", "revoke", "tok_doesnotexist", "--json", subprocess=True)
    assert run.code == 2
    doc = run.json()
    assert doc["error"] == "command_failed"
    assert doc["code"] == "not_found"
    assert doc["exit_code"] == 2 and doc["contract_version"] == 1
    assert doc["suggestion"]


def test_token_create_with_an_unknown_scope_is_a_usage_error(fm: Fleetmem) -> None:
    run = fm("token", "create", "--client", "agent-a", "--scopes", "read,superuser", "--json")
    assert run.code == 2
    assert run.json()["code"] == "invalid_params"
    assert fm("token", "list", "--json").json()["tokens"] == []


def test_data_dir_works_before_the_command_name(fm: Fleetmem) -> None:
    fm("token", "create", "--client", "agent-a", "--scopes", "read")
    run = fm("--data-dir", str(fm.data_dir), "token", "list", "--json", data_dir=False)
    assert run.code == 0, run.stderr
    assert [t["client"] for t in run.json()["tokens"]] == ["agent-a"]


def test_data_dir_defaults_to_the_environment_variable(fm: Fleetmem) -> None:
    fm("token", "create", "--client", "agent-a", "--scopes", "read")
    run = fm("token", "list", "--json", data_dir=False, env={"FLEETMEM_DATA_DIR": str(fm.data_dir)})
    assert [t["client"] for t in run.json()["tokens"]] == ["agent-a"]
