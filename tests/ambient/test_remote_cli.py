"""The CLI as a remote client, over real HTTP against `fleetmem serve` (127.0.0.1, free port)."""

from __future__ import annotations

import json
import shlex
import stat
from pathlib import Path
from typing import Any

import pytest

from fleetmem import invocation
from tests.ambient.conftest import Served, base_env, write_token
from tests.cli.conftest import Fleetmem
from tests.conformance.test_conformance_local import mint

ALICE = """---
title: Alice Remote
type: person
aliases: [Ali R]
summary: Alice Remote runs the platform team.
---
Alice Remote works with [[companies/acme-remote]].
"""
ACME = """---
title: Acme Remote
type: company
---
Acme Remote makes widgets.
"""

#: Fields that differ per call by design (timing, tracing); nothing else is masked.
PER_CALL = {"latency_ms", "correlation_id"}


def masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: masked(v) for k, v in value.items() if k not in PER_CALL}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def remote(served: Served) -> list[str]:
    return ["--url", served.url, "--token-file", str(served.token_file)]


@pytest.fixture(scope="module")
def seeded(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Served:
    """Pages and facts written once, locally, into the data directory the server serves."""
    from tests.ambient.conftest import base_env

    fm = Fleetmem(served.data_dir, base_env(tmp_path_factory.mktemp("seed")))
    assert fm("put-page", "people/alice-remote", stdin=ALICE).code == 0
    assert fm("put-page", "companies/acme-remote", stdin=ACME).code == 0
    r = fm(
        "remember",
        "Alice Remote prefers written updates",
        "--provenance",
        "chat 2026-11-30",
        "--entity",
        "people/alice-remote",
        "--json",
    )
    assert r.code == 0, r.stderr
    return served


@pytest.mark.parametrize(
    "argv",
    [
        ["entity", "Alice Remote"],
        ["entity", "Ali R"],
        ["entity", "Nobody Here At All"],
        ["recall", "--entity", "people/alice-remote"],
        ["recall", "--query", "widgets", "--budget-tokens", "200"],
        ["context-pack", "--entities", "people/alice-remote,companies/acme-remote", "--budget-tokens", "300"],
        ["get-page", "companies/acme-remote"],
        ["list-pages"],
    ],
)
def test_the_same_verb_answers_the_same_json_body_locally_and_over_http(
    fmx: Fleetmem, seeded: Served, argv: list[str]
) -> None:
    local = fmx(*argv, "--json")
    over_http = fmx(*argv, "--json", *remote(seeded), data_dir=False)
    assert local.code == 0, local.stdout + local.stderr
    assert over_http.code == local.code, over_http.stdout + over_http.stderr
    assert masked(over_http.json()) == masked(local.json())


def test_human_output_is_rendered_by_the_same_renderer(fmx: Fleetmem, seeded: Served) -> None:
    local = fmx("entity", "Alice Remote")
    over_http = fmx("entity", "Alice Remote", *remote(seeded), data_dir=False)
    assert over_http.code == local.code == 0
    strip = [line for line in local.stdout.splitlines() if "ms)" not in line]
    assert [line for line in over_http.stdout.splitlines() if "ms)" not in line] == strip
    assert "Alice Remote  (people/alice-remote, person)" in over_http.stdout


def test_a_server_error_keeps_its_envelope_fix_and_exit_code(fmx: Fleetmem, seeded: Served) -> None:
    local = fmx("recall", "--budget-tokens", "0", "--json")
    over_http = fmx("recall", "--budget-tokens", "0", "--json", *remote(seeded), data_dir=False)
    assert local.code == over_http.code == 2
    body = over_http.json()
    assert body["code"] == "invalid_params" and body["correlation_id"]
    assert body["fix"]["mcp"]["arguments"]["budget_tokens"] >= 1
    assert body["suggestion"]


def test_the_human_fix_of_a_remote_error_targets_the_same_endpoint(fmx: Fleetmem, seeded: Served) -> None:
    local = fmx("recall", "--budget-tokens", "0")
    over_http = fmx("recall", "--budget-tokens", "0", *remote(seeded), data_dir=False)
    assert local.code == over_http.code == 2
    local_fix = next(line for line in local.stderr.splitlines() if line.strip().startswith("Fix:"))
    remote_fix = next(line for line in over_http.stderr.splitlines() if line.strip().startswith("Fix:"))
    assert "--url" not in local_fix
    assert remote_fix.strip().startswith(f"Fix: {shlex.join(invocation.command())} recall")
    assert remote_fix.endswith(" ".join(remote(seeded)))
    assert remote_fix.removesuffix(" " + " ".join(remote(seeded))) == local_fix


def test_a_refused_token_shows_the_servers_401_envelope(fmx: Fleetmem, seeded: Served, tmp_path: Path) -> None:
    bad = write_token(tmp_path / "bad-token", "fm_" + "x" * 43)
    r = fmx("entity", "Alice Remote", "--json", "--url", seeded.url, "--token-file", str(bad), data_dir=False)
    assert r.code == 1
    body = r.json()
    assert body["code"] == "unauthorized"
    assert body["fix"]["argv"][:3] == ["fleetmem", "token", "create"]
    assert "fm_xxxx" not in r.stdout + r.stderr


def test_an_unreachable_endpoint_fails_with_unavailable(fmx: Fleetmem, seeded: Served) -> None:
    from tests.conformance.test_conformance_local import free_port

    url = f"http://127.0.0.1:{free_port()}/mcp"
    r = fmx("entity", "x", "--json", "--url", url, "--token-file", str(seeded.token_file), data_dir=False)
    assert r.code == 1
    doc = r.json()
    assert doc["error"] == "command_failed" and doc["code"] == "unavailable"
    assert url in doc["message"]


def test_remote_calls_never_widen_to_private_facts(fmx: Fleetmem, seeded: Served) -> None:
    wrote = fmx(
        "remember",
        "Alice Remote's private phone is 555",
        "--provenance",
        "chat",
        "--entity",
        "people/alice-remote",
        "--visibility",
        "private",
        "--json",
        *remote(seeded),
        data_dir=False,
    )
    assert wrote.code == 0, wrote.stdout + wrote.stderr
    args = ["recall", "--entity", "people/alice-remote", "--include-private", "--json"]
    over_http = fmx(*args, *remote(seeded), data_dir=False).json()
    local = fmx(*args).json()
    assert "555" not in json.dumps(over_http)
    assert any("555" in f["fact"] for f in local["facts"])


def test_a_token_comes_from_the_environment_and_never_from_an_argument(fmx: Fleetmem, seeded: Served) -> None:
    token = seeded.token_file.read_text().strip()
    r = fmx("entity", "Alice Remote", "--json", "--url", seeded.url, env={"FLEETMEM_TOKEN": token}, data_dir=False)
    assert r.code == 0 and r.json()["found"] is True
    r = fmx("entity", "x", "--url", seeded.url, "--token", token, data_dir=False)
    assert r.code == 2  # there is no --token option


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--tenant", "t2"], "tenant comes from the token"),
        (["--data-dir", "/tmp/x"], "not both"),
        ([], "No token"),
    ],
)
def test_conflicting_or_incomplete_remote_options_are_usage_errors(
    fmx: Fleetmem, seeded: Served, extra: list[str], needle: str
) -> None:
    token = [] if not extra else ["--token-file", str(seeded.token_file)]
    r = fmx("entity", "x", "--url", seeded.url, *token, *extra, data_dir=False)
    assert r.code == 2
    assert needle in r.stderr


def test_profiles_are_saved_0600_without_the_token_and_used_by_name(
    fmx: Fleetmem, seeded: Served, tmp_path: Path
) -> None:
    r = fmx("profile", "add", "stage", "--url", seeded.url, "--token-file", str(seeded.token_file), data_dir=False)
    assert r.code == 0, r.stderr
    path = tmp_path / "config" / "profiles.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert seeded.token_file.read_text().strip() not in path.read_text()
    listed = fmx("profile", "list", "--json", data_dir=False).json()
    assert listed["profiles"] == [{"name": "stage", "url": seeded.url, "token_file": str(seeded.token_file)}]

    by_flag = fmx("entity", "Alice Remote", "--json", "--profile", "stage", data_dir=False)
    by_env = fmx("entity", "Alice Remote", "--json", env={"FLEETMEM_PROFILE": "stage"}, data_dir=False)
    assert by_flag.code == by_env.code == 0
    assert masked(by_flag.json()) == masked(by_env.json())
    assert by_flag.json()["found"] is True

    missing = fmx("entity", "x", "--profile", "nope", data_dir=False)
    assert missing.code == 2 and "fleetmem profile add nope" in missing.stderr
    assert fmx("profile", "remove", "stage", data_dir=False).code == 0
    assert fmx("profile", "list", "--json", data_dir=False).json()["profiles"] == []


def test_purge_confirmation_names_the_remote_endpoint(fmx: Fleetmem, seeded: Served, tmp_path: Path) -> None:
    saved = fmx("remember", "A fact to purge", "--provenance", "test", "--json", *remote(seeded), data_dir=False)
    # the existence check runs on the server: a token without admin scope is refused there
    denied = fmx("purge-fact", saved.json()["id"], "--json", *remote(seeded), data_dir=False)
    assert denied.code == 1 and denied.json()["code"] == "scope_denied"
    admin = write_token(tmp_path / "admin.token", mint(base_env(tmp_path), seeded.data_dir, "read,write,admin", "ops"))
    r = fmx("purge-fact", saved.json()["id"], "--json", "--url", seeded.url, "--token-file", str(admin), data_dir=False)
    assert r.code == 3
    argv = r.json()["fix"]["argv"]
    assert argv[argv.index("--url") + 1] == seeded.url
    assert "--data-dir" not in argv
