"""The hook and heartbeat commands call memory through the typed client (`fleetmem.client.Client`):
over `/v1` to a real `fleetmem serve` (tests/ambient/conftest.py) and in-process on its data
directory, answering as a lane; a data directory without a memory is still a configuration the
user is shown, with its fix, and nothing is injected."""

from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path

from fleetmem.client import Client
from fleetmem.hooks.claude_code import ProjectConfig, _lane_for
from tests.ambient.conftest import Served, base_env
from tests.ambient.test_hooks import EVENTS, run_hook, transcript


def test_the_hooks_lanes_are_the_typed_client_remotely_and_locally(served: Served, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".fleetmem.json").write_text(json.dumps({"url": served.url, "token_file": str(served.token_file)}))
    remote = _lane_for(Namespace(), ProjectConfig.find(project), 30.0)
    local = _lane_for(Namespace(data_dir=str(served.data_dir)), ProjectConfig.find(project), 30.0)
    try:
        assert isinstance(remote.client, Client) and isinstance(local.client, Client)
        assert (remote.remote, remote.label, local.remote) == (True, served.url, False)
        who, refused = remote.call_many([("whoami", {}), ("get_page", {"slug": "people/nobody-here"})])
        assert not who.is_error and who.body["remote"] is True and who.body["client_id"] == "ambient-agent"
        assert refused.is_error and refused.body["code"] == "not_found" and refused.body["correlation_id"]
        mine = local.call("whoami", {})
        assert not mine.is_error and mine.body["remote"] is False
    finally:
        remote.close()
        local.close()


def test_a_data_directory_without_a_memory_is_shown_to_the_user_with_its_fix(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    empty = tmp_path / "no-memory-here"
    empty.mkdir()
    (project / ".fleetmem.json").write_text(json.dumps({"entities": ["people/hook-alice"], "data_dir": str(empty)}))
    env = {**base_env(tmp_path), "CLAUDE_PROJECT_DIR": str(project)}
    said = transcript(tmp_path / "t.jsonl", [("user", "Ask Hook Alice about people/hook-alice.")])
    for event in EVENTS:
        proc = run_hook(env, {"session_id": "no-memory", "cwd": str(project), "transcript_path": str(said), **event})
        assert proc.returncode == 0  # the session goes on
        shown = json.loads(proc.stdout)["systemMessage"]
        assert f"No fleetmem memory in {empty}" in shown and "fleetmem init --data-dir" in shown, shown
        assert "hookSpecificOutput" not in proc.stdout
    assert not (empty / "fleetmem.db").exists()  # nothing was started there
