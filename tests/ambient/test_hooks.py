"""`fleetmem hook claude-code` driven the way Claude Code drives it: a subprocess per event, the event
JSON on stdin, the context document on stdout (see fleetmem.hooks.claude_code for the contract)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.ambient.conftest import Served, SlowServer, base_env, write_token
from tests.cli.conftest import Fleetmem, fleetmem_command

PAGES = {
    "people/hook-alice": "---\ntitle: Hook Alice\ntype: person\nsummary: Hook Alice leads payments.\n---\n"
    "Hook Alice leads the payments team.\n",
    "companies/hook-acme": "---\ntitle: Hook Acme\ntype: company\nsummary: Hook Acme sells anvils.\n---\n"
    "Hook Acme sells anvils.\n",
    "projects/hook-standing": "---\ntitle: Hook Standing\ntype: project\nsummary: The standing project.\n---\n"
    "A project configured for the whole repository.\n",
}
UNKNOWN = "Quillon Vantablack"


def transcript(path: Path, lines: list[tuple[str, str]], padding: int = 0) -> Path:
    records: list[dict[str, Any]] = [
        {"type": "user", "message": {"role": "user", "content": "filler " * 50}} for _ in range(padding)
    ]
    for role, text in lines:
        content: Any = text if role == "user" else [{"type": "text", "text": text}]
        records.append({"type": role, "message": {"role": role, "content": content}})
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def run_hook(env: dict[str, str], event: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*fleetmem_command(), "hook", "claude-code", *extra],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def brain(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Served:
    fm = Fleetmem(served.data_dir, base_env(tmp_path_factory.mktemp("hook-seed")))
    for slug, text in PAGES.items():
        assert fm("put-page", slug, stdin=text).code == 0
    return served


@pytest.fixture
def project(tmp_path: Path, brain: Served) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    config = {
        "url": brain.url,
        "token_file": str(brain.token_file),
        "entities": ["projects/hook-standing"],
        "compact_budget_tokens": 400,
        "timeout_seconds": 30,  # generous: the machine running the tests may be busy
    }
    (project / ".fleetmem.json").write_text(json.dumps(config), encoding="utf-8")
    return project


def context_of(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    text = doc["hookSpecificOutput"]["additionalContext"]
    assert isinstance(text, str)
    return text


def test_a_session_start_remember_precompact_compact_cycle_rehydrates_the_banked_entities(
    tmp_path: Path, brain: Served, project: Path
) -> None:
    env = {**base_env(tmp_path), "CLAUDE_PROJECT_DIR": str(project)}
    session = "0b5c4a9e-hook-cycle"
    path = tmp_path / "t.jsonl"
    base = {"session_id": session, "transcript_path": str(path), "cwd": str(project)}

    start = run_hook(env, {**base, "hook_event_name": "SessionStart", "source": "startup"})
    text = context_of(start)
    assert "Hook Standing (projects/hook-standing" in text  # the project's standing entity
    assert "Hook Alice" not in text  # nothing banked yet

    fm = Fleetmem(brain.data_dir, env)
    for fact, slug in (
        ("Hook Alice wants the refund report by Friday", "people/hook-alice"),
        ("Hook Acme renewed for two years", "companies/hook-acme"),
    ):
        r = fm(
            "remember",
            fact,
            "--provenance",
            "session 0b5c",
            "--entity",
            slug,
            "--url",
            brain.url,
            "--token-file",
            str(brain.token_file),
            data_dir=False,
        )
        assert r.code == 0, r.stderr

    transcript(
        path,
        [
            ("user", f"Can you ask Hook Alice about the Hook Acme renewal? {UNKNOWN} asked too."),
            ("assistant", f"Hook Alice confirmed; Hook Acme renewed. I could not find {UNKNOWN}."),
        ],
    )
    pre = run_hook(env, {**base, "hook_event_name": "PreCompact", "trigger": "auto", "custom_instructions": ""})
    assert pre.returncode == 0, pre.stderr
    assert pre.stdout == ""  # PreCompact cannot add context: it prints nothing
    bank = json.loads((tmp_path / "state" / "hook-sessions.json").read_text())
    assert sorted(bank["entries"][session]["entities"]) == ["companies/hook-acme", "people/hook-alice"]

    after = context_of(run_hook(env, {**base, "hook_event_name": "SessionStart", "source": "compact"}))
    assert "Hook Alice (people/hook-alice" in after
    assert "Hook Acme (companies/hook-acme" in after
    assert UNKNOWN not in after
    # banked entities come first after a compaction, then the configured one
    asked = next(line for line in after.splitlines() if line.startswith("Entities asked:"))
    banked_last = max(asked.index("people/hook-alice"), asked.index("companies/hook-acme"))
    assert asked.index("projects/hook-standing") > banked_last
    # what was injected is exactly the server's pack at the compaction budget the project set (400)
    entities = asked.removeprefix("Entities asked:").strip()
    pack = fm(
        "context-pack",
        "--entities",
        entities,
        "--budget-tokens",
        "400",
        "--json",
        "--url",
        brain.url,
        "--token-file",
        str(brain.token_file),
        data_dir=False,
    ).json()
    assert pack["text"] == after
    assert pack["budget_tokens"] == 400 and 0 < pack["budget_used"] <= 400


def test_banked_entities_are_newest_first_not_most_mentioned_first(
    tmp_path: Path, brain: Served, project: Path
) -> None:
    env = {**base_env(tmp_path), "CLAUDE_PROJECT_DIR": str(project)}
    path = transcript(
        tmp_path / "t.jsonl",
        [
            ("user", "Hook Standing first. Then Hook Acme, Hook Acme and Hook Acme again."),
            ("assistant", "Noted. Hook Alice is the one to ask."),
        ],
    )
    event = {
        "session_id": "newest-first",
        "transcript_path": str(path),
        "cwd": str(project),
        "hook_event_name": "PreCompact",
        "trigger": "auto",
    }
    assert run_hook(env, event).returncode == 0
    bank = json.loads((tmp_path / "state" / "hook-sessions.json").read_text())
    assert bank["entries"]["newest-first"]["entities"] == [
        "people/hook-alice",
        "companies/hook-acme",
        "projects/hook-standing",
    ]
    # a later compaction's entities go before the earlier ones
    transcript(path, [("user", "Back to Hook Standing.")])
    assert run_hook(env, event).returncode == 0
    bank = json.loads((tmp_path / "state" / "hook-sessions.json").read_text())
    assert bank["entries"]["newest-first"]["entities"] == [
        "projects/hook-standing",
        "people/hook-alice",
        "companies/hook-acme",
    ]


def test_the_transcript_is_read_only_from_its_tail(tmp_path: Path, brain: Served, project: Path) -> None:
    env = {**base_env(tmp_path), "CLAUDE_PROJECT_DIR": str(project)}
    cfg = json.loads((project / ".fleetmem.json").read_text())
    (project / ".fleetmem.json").write_text(json.dumps({**cfg, "transcript_tail_bytes": 4096}))
    path = tmp_path / "t.jsonl"
    records = [{"type": "user", "message": {"role": "user", "content": "Hook Alice started this."}}]
    records += [{"type": "user", "message": {"role": "user", "content": "filler " * 60}} for _ in range(40)]
    records += [
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Now about Hook Acme."}]},
        }
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    event = {
        "session_id": "tail-only",
        "transcript_path": str(path),
        "cwd": str(project),
        "hook_event_name": "PreCompact",
        "trigger": "manual",
    }
    assert run_hook(env, event).returncode == 0
    bank = json.loads((tmp_path / "state" / "hook-sessions.json").read_text())
    assert bank["entries"]["tail-only"]["entities"] == ["companies/hook-acme"]


def test_the_hook_works_on_the_local_lane_too(tmp_path: Path, brain: Served) -> None:
    project = tmp_path / "local-project"
    project.mkdir()
    (project / ".fleetmem.json").write_text(
        json.dumps({"data_dir": str(brain.data_dir), "entities": "people/hook-alice", "timeout_seconds": 30})
    )
    env = {**base_env(tmp_path), "CLAUDE_PROJECT_DIR": str(project)}
    proc = run_hook(
        env,
        {
            "session_id": "local-1",
            "cwd": str(project),
            "hook_event_name": "SessionStart",
            "source": "startup",
            "transcript_path": None,
        },
    )
    assert "Hook Alice (people/hook-alice" in context_of(proc)


# --------------------------------------------------------------------------- failure modes


def failing_project(tmp_path: Path, url: str, token_file: Path, timeout: float = 1) -> dict[str, str]:
    project = tmp_path / "p"
    project.mkdir(exist_ok=True)
    (project / ".fleetmem.json").write_text(
        json.dumps(
            {"url": url, "token_file": str(token_file), "entities": ["people/hook-alice"], "timeout_seconds": timeout}
        )
    )
    return {**base_env(tmp_path), "CLAUDE_PROJECT_DIR": str(project)}


def assert_silent_success(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 0
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0] and "nothing injected" in lines[0], proc.stderr


EVENTS = [
    {"hook_event_name": "SessionStart", "source": "startup"},
    {"hook_event_name": "SessionStart", "source": "compact"},
    {"hook_event_name": "PreCompact", "trigger": "auto"},
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: f"{e['hook_event_name']}-{e.get('source', e.get('trigger'))}")
def test_a_down_server_leaves_the_harness_output_empty(tmp_path: Path, brain: Served, event: dict[str, Any]) -> None:
    from tests.conformance.test_conformance_local import free_port

    env = failing_project(tmp_path, f"http://127.0.0.1:{free_port()}/mcp", brain.token_file, timeout=30)
    path = transcript(tmp_path / "t.jsonl", [("user", "Hook Alice and Hook Acme")])
    proc = run_hook(env, {"session_id": "down", "transcript_path": str(path), **event})
    assert_silent_success(proc, "cannot reach")


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: f"{e['hook_event_name']}-{e.get('source', e.get('trigger'))}")
def test_a_refused_token_leaves_the_harness_output_empty(tmp_path: Path, brain: Served, event: dict[str, Any]) -> None:
    bad = write_token(tmp_path / "bad", "fm_" + "y" * 43)
    env = failing_project(tmp_path, brain.url, bad, timeout=30)  # the refusal, not the clock, must stop it
    path = transcript(tmp_path / "t.jsonl", [("user", "Hook Alice and Hook Acme")])
    proc = run_hook(env, {"session_id": "bad-token", "transcript_path": str(path), **event})
    assert_silent_success(proc, "unauthorized")
    assert "y" * 20 not in proc.stderr
    assert not (tmp_path / "state" / "hook-sessions.json").exists()  # nothing was banked


# one event per hook (the two SessionStart sources share the hook's whole path to the server)
@pytest.mark.parametrize(
    "event", [EVENTS[0], EVENTS[2]], ids=lambda e: f"{e['hook_event_name']}-{e.get('source', e.get('trigger'))}"
)
def test_a_hanging_server_times_out_and_leaves_the_harness_output_empty(
    tmp_path: Path, brain: Served, slow_server: SlowServer, event: dict[str, Any]
) -> None:
    # long enough for a busy machine to connect; the server then never answers
    env = failing_project(tmp_path, slow_server.url, brain.token_file, timeout=5)
    path = transcript(tmp_path / "t.jsonl", [("user", "Hook Alice and Hook Acme")])
    proc = run_hook(env, {"session_id": "slow", "transcript_path": str(path), **event})
    assert slow_server.accepted.wait(10)  # the hook did reach the server, which never answered
    assert_silent_success(proc, "no answer within 5 s")


@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]"])
def test_unreadable_hook_input_is_ignored(tmp_path: Path, stdin: str) -> None:
    proc = subprocess.run(
        [*fleetmem_command(), "hook", "claude-code"],
        input=stdin,
        capture_output=True,
        text=True,
        env=base_env(tmp_path),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout == ""


# --------------------------------------------------------------------------- install / uninstall


def _settings(project: Path, name: str = "settings.local.json") -> Path:
    return project / ".claude" / name


def test_install_merges_into_the_personal_settings_keeps_the_first_backup_and_uninstall_removes_only_ours(
    tmp_path: Path,
) -> None:
    fm = Fleetmem(tmp_path / "data", base_env(tmp_path))
    token_file = write_token(tmp_path / "stage.token", "fm_" + "s" * 43)
    assert (
        fm(
            "profile",
            "add",
            "stage",
            "--url",
            "https://stage.example/mcp",
            "--token-file",
            str(token_file),
            data_dir=False,
        ).code
        == 0
    )
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    theirs = {
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {
            "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}],
            "PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "ruff format"}]}],
        },
    }
    committed = {"permissions": {"allow": ["Bash(git status)"]}}
    settings = _settings(project)
    settings.write_text(json.dumps(theirs, indent=2))
    _settings(project, "settings.json").write_text(json.dumps(committed, indent=2))

    r = fm(
        "hook",
        "install",
        "--harness",
        "claude-code",
        "--project",
        str(project),
        "--profile",
        "stage",
        "--json",
        data_dir=False,
    )
    assert r.code == 0, r.stderr
    report = r.json()
    assert report["settings"] == str(settings)
    assert json.loads(Path(report["backup"]).read_text()) == theirs
    # the committed settings carry no path of this clone: they are not touched at all
    assert json.loads(_settings(project, "settings.json").read_text()) == committed
    doc = json.loads(settings.read_text())
    assert doc["permissions"] == theirs["permissions"]
    assert doc["hooks"]["PostToolUse"] == theirs["hooks"]["PostToolUse"]
    starts = doc["hooks"]["SessionStart"]
    assert starts[0] == theirs["hooks"]["SessionStart"][0]
    ours = starts[1]
    assert ours["matcher"] == "startup|resume|clear|compact"
    assert ours["hooks"][0]["type"] == "command"
    assert ours["hooks"][0]["command"].endswith("hook claude-code --profile stage")
    assert isinstance(ours["hooks"][0]["timeout"], int)
    assert doc["hooks"]["PreCompact"] == [{"matcher": "manual|auto", "hooks": ours["hooks"]}]

    again = fm("hook", "install", "--harness", "claude-code", "--project", str(project), "--json", data_dir=False)
    assert again.code == 0 and again.json()["replaced"] == 2
    doc = json.loads(settings.read_text())
    assert len(doc["hooks"]["SessionStart"]) == 2 and len(doc["hooks"]["PreCompact"]) == 1
    # the backup still holds the settings as they were before fleetmem's first change
    assert again.json()["backup"] == report["backup"]
    assert json.loads(Path(report["backup"]).read_text()) == theirs

    gone = fm("hook", "uninstall", "--harness", "claude-code", "--project", str(project), "--json", data_dir=False)
    assert gone.code == 0 and gone.json()["removed"] == 2
    assert json.loads(settings.read_text()) == theirs
    assert json.loads(Path(report["backup"]).read_text()) == theirs


def test_install_takes_an_earlier_install_out_of_the_committed_settings(tmp_path: Path) -> None:
    fm = Fleetmem(tmp_path / "data", base_env(tmp_path))
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    earlier = {"type": "command", "command": "/some/clone/.venv/bin/fleetmem hook claude-code", "timeout": 10}
    theirs = {"permissions": {"allow": ["Bash(ls:*)"]}}
    _settings(project, "settings.json").write_text(
        json.dumps({**theirs, "hooks": {"SessionStart": [{"matcher": "startup", "hooks": [earlier]}]}})
    )
    r = fm("hook", "install", "--harness", "claude-code", "--project", str(project), "--json", data_dir=False)
    assert r.code == 0, r.stderr
    assert r.json()["moved_from"] == str(_settings(project, "settings.json"))
    assert json.loads(_settings(project, "settings.json").read_text()) == theirs
    assert set(json.loads(_settings(project).read_text())["hooks"]) == {"SessionStart", "PreCompact"}


def test_install_with_an_endpoint_that_cannot_work_fails_with_the_fix_and_writes_nothing(tmp_path: Path) -> None:
    fm = Fleetmem(tmp_path / "data", base_env(tmp_path))
    project = tmp_path / "proj"
    project.mkdir()
    r = fm(
        "hook",
        "install",
        "--harness",
        "claude-code",
        "--project",
        str(project),
        "--url",
        "http://127.0.0.1:8765/mcp",
        data_dir=False,
    )
    assert r.code == 2, r.stderr
    assert "No token for http://127.0.0.1:8765/mcp" in r.stderr and "--token-file PATH" in r.stderr
    assert not (project / ".claude").exists()
    # with the token in the environment it installs, and says where the hook will look for it
    ok = fm(
        "hook",
        "install",
        "--harness",
        "claude-code",
        "--project",
        str(project),
        "--url",
        "http://127.0.0.1:8765/mcp",
        env={"FLEETMEM_TOKEN": "fm_" + "e" * 43},
        data_dir=False,
    )
    assert ok.code == 0, ok.stderr
    assert "$FLEETMEM_TOKEN" in ok.stderr and "e" * 10 not in ok.stdout + ok.stderr
    assert "FLEETMEM_TOKEN" not in _settings(project).read_text() and "eeeeee" not in _settings(project).read_text()
    # a local lane on a data directory without a memory would inject nothing, ever: refused too
    typo = tmp_path / "dta"
    local = fm(
        "hook",
        "install",
        "--harness",
        "claude-code",
        "--project",
        str(project),
        "--data-dir",
        str(typo),
        "--json",
        data_dir=False,
    )
    assert local.code == 2 and local.json()["code"] == "data_dir_not_found"
    assert "--data-dir" not in _settings(project).read_text() and not typo.exists()


def test_install_refuses_to_overwrite_settings_it_cannot_read(tmp_path: Path) -> None:
    fm = Fleetmem(tmp_path / "data", base_env(tmp_path))
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    for name in ("settings.local.json", "settings.json"):
        settings = _settings(project, name)
        settings.write_text("{ not json")
        r = fm("hook", "install", "--harness", "claude-code", "--project", str(project), data_dir=False)
        assert r.code == 1 and "nothing was changed" in r.stderr
        assert settings.read_text() == "{ not json"
        settings.unlink()
    assert not list((project / ".claude").iterdir())


def test_install_into_a_fresh_project_creates_the_personal_settings_file(tmp_path: Path) -> None:
    fm = Fleetmem(tmp_path / "data", base_env(tmp_path))
    project = tmp_path / "fresh"
    project.mkdir()
    r = fm("hook", "install", "--harness", "claude-code", "--project", str(project), "--json", data_dir=False)
    assert r.code == 0 and r.json()["backup"] is None
    doc = json.loads(_settings(project).read_text())
    assert set(doc["hooks"]) == {"SessionStart", "PreCompact"}
    assert not _settings(project, "settings.json").exists()
    assert fm("hook", "uninstall", "--harness", "claude-code", "--project", str(project), data_dir=False).code == 0
    assert json.loads(_settings(project).read_text()) == {}


# --------------------------------------------------------------------------- a configuration that cannot work


def test_an_unknown_profile_in_the_project_file_is_shown_to_the_user_with_its_fix(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".fleetmem.json").write_text(json.dumps({"entities": ["people/hook-alice"], "profile": "prod"}))
    env = {**base_env(tmp_path), "CLAUDE_PROJECT_DIR": str(project)}
    for event in EVENTS:
        proc = run_hook(env, {"session_id": "no-profile", "cwd": str(project), **event})
        assert proc.returncode == 0  # the session goes on
        shown = json.loads(proc.stdout)["systemMessage"]  # Claude Code shows it to the user
        assert "No profile named 'prod'" in shown and str(project / ".fleetmem.json") in shown, shown
        assert "fleetmem profile add prod --url URL --token-file PATH" in shown
        assert "hookSpecificOutput" not in proc.stdout
        line = proc.stderr.strip().splitlines()
        assert len(line) == 1 and "No profile named 'prod'" in line[0] and "nothing injected" in line[0]
    assert "No profile named 'prod'" in (tmp_path / "state" / "hook.log").read_text()


def test_install_checks_the_profile_the_project_file_names(tmp_path: Path) -> None:
    fm = Fleetmem(tmp_path / "data", base_env(tmp_path))
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".fleetmem.json").write_text(json.dumps({"profile": "prod"}))
    r = fm("hook", "install", "--harness", "claude-code", "--project", str(project), data_dir=False)
    assert r.code == 2, r.stderr
    assert "No profile named 'prod'" in r.stderr and "fleetmem profile add prod" in r.stderr
    assert not (project / ".claude").exists()
    token_file = write_token(tmp_path / "prod.token", "fm_" + "p" * 43)
    assert (
        fm(
            "profile",
            "add",
            "prod",
            "--url",
            "https://prod.example/mcp",
            "--token-file",
            str(token_file),
            data_dir=False,
        ).code
        == 0
    )
    assert fm("hook", "install", "--harness", "claude-code", "--project", str(project), data_dir=False).code == 0


def _session_start_command(project: Path) -> str:
    doc = json.loads(_settings(project).read_text())
    return str(doc["hooks"]["SessionStart"][0]["hooks"][0]["command"])


def test_install_pins_the_data_directory_of_the_environment_and_the_hook_reads_it(
    tmp_path: Path, brain: Served
) -> None:
    env = {**base_env(tmp_path), "FLEETMEM_DATA_DIR": str(brain.data_dir)}  # as `scripts/serve` had it
    fm = Fleetmem(brain.data_dir, env)
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".fleetmem.json").write_text(json.dumps({"entities": ["people/hook-alice"], "timeout_seconds": 30}))
    r = fm("hook", "install", "--harness", "claude-code", "--project", str(project), data_dir=False)
    assert r.code == 0, r.stderr
    command = _session_start_command(project)
    assert f"FLEETMEM_DATA_DIR={brain.data_dir}" in command and "--data-dir" not in command
    # Claude Code runs the command through a shell, in an environment without the variable
    harness_env = {k: v for k, v in base_env(tmp_path).items() if k != "FLEETMEM_DATA_DIR"}
    harness_env["HOME"] = str(tmp_path / "home")  # no per-user memory there
    event = {"session_id": "pinned", "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}
    proc = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        env=harness_env,
        cwd=project,
        timeout=120,
        check=False,
    )
    assert "Hook Alice (people/hook-alice" in context_of(proc)
    # a $FLEETMEM_DATA_DIR without a memory would inject nothing, ever: refused like --data-dir
    empty = tmp_path / "empty"
    refused = fm(
        "hook",
        "install",
        "--harness",
        "claude-code",
        "--project",
        str(project),
        "--json",
        env={"FLEETMEM_DATA_DIR": str(empty)},
        data_dir=False,
    )
    assert refused.code == 2 and refused.json()["code"] == "data_dir_not_found"
    assert _session_start_command(project) == command and not empty.exists()


def test_install_refuses_the_fleetmem_checkout_unless_forced(tmp_path: Path) -> None:
    fm = Fleetmem(tmp_path / "data", base_env(tmp_path))
    clone = Path(__file__).resolve().parents[2]  # `--project .` from the clone's root
    before = _settings(clone).read_text() if _settings(clone).exists() else None
    r = fm("hook", "install", "--harness", "claude-code", "--project", str(clone), "--json", data_dir=False)
    if r.code == 0 and before is None:  # a regression wrote into the clone: leave it as it was
        fm("hook", "uninstall", "--harness", "claude-code", "--project", str(clone), data_dir=False)
        _settings(clone).unlink(missing_ok=True)
        for leftover in _settings(clone).parent.glob("*.fleetmem.bak"):
            leftover.unlink()
        if not any(_settings(clone).parent.iterdir()):
            _settings(clone).parent.rmdir()
    assert r.code == 2, r.stdout
    doc = r.json()
    assert "fleetmem source checkout" in doc["message"] and "nothing was written" in doc["message"]
    assert "--project ~/path/to/your-project" in doc["suggestion"] and "--force" in doc["suggestion"]
    assert (_settings(clone).read_text() if _settings(clone).exists() else None) == before
    copy = tmp_path / "another-clone"
    copy.mkdir()
    (copy / "pyproject.toml").write_text('[project]\nname = "fleetmem"\nversion = "0"\n')
    assert fm("hook", "install", "--harness", "claude-code", "--project", str(copy), data_dir=False).code == 2
    assert not (copy / ".claude").exists()
    forced = fm("hook", "install", "--harness", "claude-code", "--project", str(copy), "--force", data_dir=False)
    assert forced.code == 0, forced.stderr
    assert set(json.loads(_settings(copy).read_text())["hooks"]) == {"SessionStart", "PreCompact"}
