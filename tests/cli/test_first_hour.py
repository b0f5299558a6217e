"""A new user's first hour, followed literally: the README's commands, the commands the CLI and the
server print, and the mistakes a first hour makes (a mistyped --data-dir, an abbreviated option)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from fleetmem.cli import build_parser
from fleetmem.hooks.claude_code import DEFAULT_TIMEOUT_S as HOOK_TIMEOUT_S
from tests.cli.conftest import Fleetmem, Run, fleetmem_command
from tests.conformance.test_conformance_local import free_port, wait_until_listening

README = Path(__file__).resolve().parents[2] / "README.md"
VENV_FLEETMEM = fleetmem_command()[0]
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


def path_without_fleetmem() -> str:
    """PATH as after `scripts/serve`: the venv's bin directory is not on it."""
    venv_bin = str(Path(VENV_FLEETMEM).parent)
    return os.pathsep.join(p for p in os.environ.get("PATH", os.defpath).split(os.pathsep) if p != venv_bin)


def path_with_fleetmem() -> str:
    """PATH after `source .venv/bin/activate`."""
    return os.pathsep.join([str(Path(VENV_FLEETMEM).parent), path_without_fleetmem()])


def run_printed(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a command line exactly as printed (no PATH fix-up: a bare `fleetmem` must resolve)."""
    return subprocess.run(shlex.split(command), capture_output=True, text=True, env=env, timeout=120, check=False)


def init_command(stderr: str) -> str:
    """The `init` command a data_dir_not_found error prints (the end of its suggestion)."""
    found = re.search(r"(\S*fleetmem init --data-dir \S+)$", stderr, flags=re.M)
    assert found, stderr
    return found.group(1)


# --------------------------------------------------------------------------- parsing and help


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def test_no_parser_or_subparser_accepts_an_abbreviated_option() -> None:
    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 30  # every tool, token, hook and profile subcommand is walked
    assert [p.prog for p in parsers if p.allow_abbrev] == []


@pytest.mark.parametrize(
    "argv",
    [
        ["recall", "--query", "x", "--token", "fm_x", "--json"],
        ["heartbeat", "--session-id", "s", "--token", "fm_x", "--json"],
        ["hook", "install", "--harness", "claude-code", "--project", "{tmp}", "--tok", "fm_x", "--json"],
        ["token", "create", "--client", "a", "--scopes", "read", "--ten", "acme", "--json"],
    ],
)
def test_an_abbreviated_option_is_a_usage_error_not_another_option(
    fm: Fleetmem, tmp_path: Path, argv: list[str]
) -> None:
    run = fm(*(a.replace("{tmp}", str(tmp_path)) for a in argv))
    assert run.code == 2, run.stdout
    doc = run.json()
    assert doc["code"] == "usage" and "unrecognized arguments" in doc["message"]
    assert "fm_x" not in doc.get("suggestion", "")
    assert not (tmp_path / ".claude").exists()


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_top_level_help_shows_every_description_in_full(fm: Fleetmem) -> None:
    from fleetmem.cli.tools import tool_commands

    run = fm("--help", env={"COLUMNS": "1000"}, data_dir=False, subprocess=True)  # no wrapping: one line each
    assert run.code == 0, run.stderr
    assert "…" not in run.stdout
    lines = [" ".join(line.split()) for line in run.stdout.splitlines()]
    for cmd in tool_commands().values():
        assert f"{cmd.name} {_flat(cmd.summary())}" in lines, cmd.name
    assert any(len(cmd.summary()) > 72 for cmd in tool_commands().values())  # what used to be cut


def test_the_hook_help_states_the_hooks_own_timeout(fm: Fleetmem) -> None:
    for argv in (["hook", "claude-code", "--help"], ["hook", "install", "--help"]):
        run = fm(*argv, data_dir=False, subprocess=True)
        assert run.code == 0, run.stderr
        assert f"remote call timeout (default {HOOK_TIMEOUT_S:g})" in _flat(run.stdout), argv
        assert "(default 30)" not in run.stdout
    assert "remote call timeout (default 30)" in _flat(fm("recall", "--help", data_dir=False, subprocess=True).stdout)


# --------------------------------------------------------------------------- import


def test_a_second_import_of_unchanged_files_says_they_are_unchanged(fm: Fleetmem, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    for i in range(3):
        (root / "projects").mkdir(parents=True, exist_ok=True)
        (root / "projects" / f"p{i}.md").write_text(f"# Project {i}\n\nThe {i}th project.\n", encoding="utf-8")
    first = fm("import", str(root), "--json")
    assert first.code == 0, first.stderr
    assert (first.json()["imported"], first.json()["unchanged"]) == (3, 0)
    (root / "projects" / "p0.md").write_text("# Project 0\n\nRenamed.\n", encoding="utf-8")
    again = fm("import", str(root), "--json")
    assert again.code == 0, again.stderr
    assert (again.json()["imported"], again.json()["unchanged"], again.json()["failed"]) == (1, 2, 0)
    assert "Imported 1 of 3 page(s)" in again.stderr and "2 unchanged" in again.stderr
    third = fm("import", str(root))
    assert "Imported 0 of 3 page(s)" in third.stderr and "3 unchanged" in third.stderr


# --------------------------------------------------------------------------- the data directory


READERS = [
    ["recall", "--query", "alice"],
    ["entity", "Alice"],
    ["context-pack", "--entities", "people/alice"],
    ["delta", "--since", "2026-01-01T00:00:00Z"],
    ["get-page", "people/alice"],
    ["list-pages"],
    ["forget", "f_01JDZZZZZZZZZZZZZZZZZZZZZZ", "--reason", "typo"],
    ["token", "list"],
    ["token", "revoke", "tok_x"],
    ["heartbeat", "--session-id", "hb"],
    ["reindex"],
]


@pytest.mark.parametrize("argv", READERS, ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("exists", [False, True], ids=["no-such-dir", "empty-dir"])
def test_a_command_that_reads_refuses_a_data_directory_without_a_memory(
    fm: Fleetmem, tmp_path: Path, argv: list[str], exists: bool
) -> None:
    typo = tmp_path / "fleetmem-dta"
    if exists:
        typo.mkdir()
    run = fm(*argv, "--json", "--data-dir", str(typo), data_dir=False)
    assert run.code == 2, run.stdout + run.stderr
    doc = run.json()
    assert doc["code"] == "data_dir_not_found"
    assert str(typo) in doc["message"] and ("no such directory" if not exists else "no fleetmem.db") in doc["message"]
    assert f"fleetmem init --data-dir {typo}" in doc["suggestion"]
    assert typo.exists() == exists and (not exists or not any(typo.iterdir()))  # nothing was created


def test_recall_on_a_mistyped_data_dir_no_longer_answers_zero_facts(fm: Fleetmem, tmp_path: Path) -> None:
    assert fm("remember", "Alice prefers tea", "--provenance", "chat").code == 0
    run = fm("recall", "--query", "tea", "--data-dir", str(tmp_path / "dta"), data_dir=False)
    assert run.code == 2
    assert "0 fact(s)" not in run.stdout and "No fleetmem memory in" in run.stderr
    assert "1 fact(s)" in fm("recall", "--query", "tea").stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["remember", "Alice prefers tea", "--provenance", "chat"],
        ["token", "create", "--client", "a", "--scopes", "read"],
    ],
    ids=["remember", "token create"],
)
def test_a_command_that_stores_starts_a_new_memory_and_says_so(fm: Fleetmem, tmp_path: Path, argv: list[str]) -> None:
    new = tmp_path / "new-brain"
    run = fm(*argv, "--data-dir", str(new), data_dir=False)
    assert run.code == 0, run.stderr
    assert "Note [data_dir_created]" in run.stderr and str(new) in run.stderr
    again = fm(*argv, "--data-dir", str(new), data_dir=False)
    assert again.code == 0 and "data_dir_created" not in again.stderr
    assert fm("token", "list", "--json", "--data-dir", str(new), data_dir=False).code == 0


def test_init_starts_a_memory_once_and_then_the_readers_accept_it(fm: Fleetmem, tmp_path: Path) -> None:
    new = tmp_path / "brain"
    first = fm("init", "--json", "--data-dir", str(new), data_dir=False)
    assert first.code == 0 and first.json() == {"data_dir": str(new), "created": True}
    second = fm("init", "--data-dir", str(new), data_dir=False)
    assert second.code == 0 and "nothing changed" in second.stdout
    recall = fm("recall", "--query", "x", "--json", "--data-dir", str(new), data_dir=False)
    assert recall.code == 0 and recall.json()["facts"] == []


def test_doctor_reports_a_missing_memory_and_creates_nothing(fm: Fleetmem, tmp_path: Path) -> None:
    typo = tmp_path / "dta"
    report = fm("doctor", "--json", "--data-dir", str(typo), data_dir=False).json()
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["data_dir"]["status"] == "warn" and "does not exist" in checks["data_dir"]["detail"]
    assert checks["data_dir"]["fix"]["argv"] == ["fleetmem", "init", "--data-dir", str(typo)]
    assert "embedder" in checks and "store" not in checks
    assert not typo.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["recall", "--query", "x"],
        ["remember", "x", "--provenance", "p"],
        ["token", "create", "--client", "a", "--scopes", "read"],
        ["import", "."],
        ["init"],
        ["serve", "--host", "127.0.0.1", "--port", "0", "--embedder", "hash"],
    ],
    ids=lambda a: a[0],
)
def test_a_data_dir_that_is_a_file_is_a_clear_usage_error(fm: Fleetmem, tmp_path: Path, argv: list[str]) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a directory\n")
    run = fm(*argv, "--data-dir", str(a_file), data_dir=False, subprocess=True)
    assert run.code == 2, run.stderr
    assert "FileExistsError" not in run.stderr and "Traceback" not in run.stderr
    assert f"The data directory {a_file} is a file, not a directory" in run.stderr
    assert a_file.read_text() == "not a directory\n"


# --------------------------------------------------------------------------- printed commands run as printed


def test_printed_fixes_name_the_absolute_command_when_fleetmem_is_not_on_path(fm: Fleetmem, tmp_path: Path) -> None:
    typo = tmp_path / "dta"
    env = {**fm.env, "PATH": path_without_fleetmem()}
    assert shutil.which("fleetmem", path=env["PATH"]) is None  # a bare `fleetmem` would exit 127
    run = fm("recall", "--query", "x", "--data-dir", str(typo), env=env, data_dir=False, subprocess=True)
    assert run.code == 2
    printed = init_command(run.stderr)
    assert printed.startswith(f"{VENV_FLEETMEM} init --data-dir "), run.stderr
    done = run_printed(printed, env)
    assert done.returncode == 0, done.stderr
    assert fm("recall", "--query", "x", "--data-dir", str(typo), env=env, data_dir=False).code == 0


def test_printed_fixes_say_fleetmem_once_it_is_on_path(fm: Fleetmem, tmp_path: Path) -> None:
    typo = tmp_path / "dta"
    env = {**fm.env, "PATH": path_with_fleetmem()}
    run = fm("recall", "--query", "x", "--data-dir", str(typo), env=env, data_dir=False, subprocess=True)
    printed = init_command(run.stderr)
    assert printed.startswith("fleetmem init --data-dir "), run.stderr
    assert run_printed(printed, env).returncode == 0


def test_the_no_tokens_hint_keeps_the_tenant_and_data_directory(fm: Fleetmem) -> None:
    run = fm("token", "list", "--tenant", "acme", env={"PATH": path_with_fleetmem()})
    assert run.code == 0
    hint = run.stderr.strip().removeprefix("No tokens. Create one: ")
    assert shlex.split(hint) == [
        "fleetmem",
        "token",
        "create",
        "--client",
        "NAME",
        "--scopes",
        "read,write",
        "--tenant",
        "acme",
        "--data-dir",
        str(fm.data_dir),
    ]


# --------------------------------------------------------------------------- a real server


@dataclass
class Server:
    url: str
    port: int
    log: Path
    env: dict[str, str]

    def banner(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def serving(tmp: Path, env: dict[str, str], *args: str) -> Iterator[Server]:
    port = free_port()
    log = tmp / f"serve-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [VENV_FLEETMEM, "serve", "--host", "127.0.0.1", "--port", str(port), "--embedder", "hash", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:
            try:
                wait_until_listening(proc, port)
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}\n{log.read_text(errors='replace')}") from exc
            yield Server(f"http://127.0.0.1:{port}", port, log, env)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def accepted(server: Server, token: str) -> bool:
    r = httpx.post(server.url + "/mcp", json=LIST, headers={**HEADERS, "Authorization": f"Bearer {token}"}, timeout=30)
    return r.status_code == 200


def test_the_banners_token_line_runs_as_printed_and_mints_a_token_the_server_accepts(
    fm: Fleetmem, tmp_path: Path
) -> None:
    data = tmp_path / "srv-data"
    env = {**fm.env, "PATH": path_without_fleetmem()}
    with serving(tmp_path, env, "--data-dir", str(data)) as server:
        banner = server.banner()
        assert "(new: it held no fleetmem memory, so this one starts empty)" in banner
        line = next(ln.strip() for ln in banner.splitlines() if "token create" in ln)
        assert line.startswith(f"{VENV_FLEETMEM} token create"), banner
        minted = run_printed(line.replace("NAME", "my-agent"), env)
        assert minted.returncode == 0, minted.stderr
        assert accepted(server, minted.stdout.strip())
    with serving(tmp_path, env, "--data-dir", str(data)) as server:
        assert "(new:" not in server.banner()  # the second start found the memory


def _readme_section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    return text[start : text.index("\n## ", start + 1)]


def _bash_lines(section: str) -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [ln.split("  #")[0].strip() for block in blocks for ln in block.splitlines() if ln.strip()]


def test_the_readme_connecting_steps_after_the_quickstart_end_in_an_accepted_token(
    fm: Fleetmem, tmp_path: Path
) -> None:
    quickstart = _bash_lines(_readme_section("Quickstart"))
    assert "source .venv/bin/activate" in quickstart  # how `fleetmem` gets on PATH
    steps = _bash_lines(_readme_section("Connecting an MCP client"))
    assert steps[0] == "source .venv/bin/activate"
    assert not [s for s in steps if s.startswith("fleetmem serve")]  # the quickstart's server is running
    # the quickstart's server: `scripts/serve` = `fleetmem serve` on the default data directory
    env = {**fm.env, "FLEETMEM_DATA_DIR": str(tmp_path / "default-data"), "PATH": path_with_fleetmem()}
    with serving(tmp_path, env) as server:
        tokens = []
        for step in steps[1:]:
            if step.startswith("fleetmem "):
                done = run_printed(step, env)
                assert done.returncode == 0, (step, done.stderr)
                tokens.append(done.stdout.strip())
        assert tokens and all(accepted(server, t) for t in tokens)


def test_a_second_serve_on_the_quickstarts_port_fails_loudly(fm: Fleetmem, tmp_path: Path) -> None:
    env = {**fm.env, "PATH": path_with_fleetmem()}
    with serving(tmp_path, env, "--data-dir", str(tmp_path / "a")) as server:
        second = fm(
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(server.port),
            "--data-dir",
            str(tmp_path / "b"),
            env=env,
            data_dir=False,
            subprocess=True,
        )
    assert second.code == 1
    assert f"127.0.0.1:{server.port}" in second.stderr and "already listening" in second.stderr
    assert "Stop the other server, or pick a free port: fleetmem serve --port" in second.stderr
    assert not (tmp_path / "b").exists()


def _remote(server: Server, token_file: Path) -> list[str]:
    return ["--url", server.url + "/mcp", "--token-file", str(token_file)]


def _token_file(path: Path, token: str) -> Path:
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def test_the_scope_denied_fix_keeps_the_tenant_and_data_directory_and_its_token_works(
    fm: Fleetmem, tmp_path: Path
) -> None:
    data = tmp_path / "acme-data"
    env = {**fm.env, "PATH": path_with_fleetmem()}
    local = Fleetmem(data, env)
    assert local("remember", "Acme renews in March", "--provenance", "call", "--tenant", "acme").code == 0
    reader = local("token", "create", "--client", "acme-bot", "--scopes", "read", "--tenant", "acme", "--json")
    read_file = _token_file(tmp_path / "read.token", reader.json()["token"])
    with serving(tmp_path, env, "--data-dir", str(data)) as server:
        denied = fm(
            "remember",
            "Acme asked for a discount",
            "--provenance",
            "call",
            "--json",
            *_remote(server, read_file),
            env=env,
            data_dir=False,
        )
        body = denied.json()
        assert body["code"] == "scope_denied", body
        argv = body["fix"]["argv"]
        assert argv[:3] == ["fleetmem", "token", "create"]
        assert argv[argv.index("--tenant") + 1] == "acme"
        assert argv[argv.index("--data-dir") + 1] == str(data)
        assert argv[argv.index("--client") + 1] == "acme-bot"
        assert argv[argv.index("--scopes") + 1] == "read,write"
        human = fm(
            "remember",
            "Acme asked for a discount",
            "--provenance",
            "call",
            *_remote(server, read_file),
            env=env,
            data_dir=False,
        )
        assert f"Fix: {shlex.join(argv)}" in human.stderr
        minted = run_printed(shlex.join(argv), env)  # followed literally
        assert minted.returncode == 0, minted.stderr
        write_file = _token_file(tmp_path / "write.token", minted.stdout.strip())
        wrote = fm(
            "remember",
            "Acme asked for a discount",
            "--provenance",
            "call",
            "--json",
            *_remote(server, write_file),
            env=env,
            data_dir=False,
        )
        assert wrote.code == 0, wrote.stdout
        found = fm("recall", "--query", "Acme renews", "--json", *_remote(server, write_file), env=env, data_dir=False)
        assert "Acme renews in March" in [f["fact"] for f in found.json()["facts"]]  # the same tenant's memory


def test_the_401_fix_runs_as_printed_by_the_cli(fm: Fleetmem, tmp_path: Path) -> None:
    data = tmp_path / "srv"
    env = {**fm.env, "PATH": path_without_fleetmem()}
    with serving(tmp_path, env, "--data-dir", str(data)) as server:
        bad = _token_file(tmp_path / "bad.token", "fm_" + "z" * 43)
        run: Run = fm("entity", "x", *_remote(server, bad), env=env, data_dir=False, subprocess=True)
        assert run.code == 1
        printed = next(ln for ln in run.stderr.splitlines() if ln.strip().startswith("Fix:")).split("Fix: ", 1)[1]
        assert printed.startswith(f"{VENV_FLEETMEM} token create") and "--data-dir '<data_dir>'" in printed
        assert str(data) not in run.stdout + run.stderr  # a 401 never names the server's directory
        # the operator fills in the directory the server printed at startup
        minted = run_printed(printed.replace("'<data_dir>'", shlex.quote(str(data))), env)
        assert minted.returncode == 0, minted.stderr
        assert accepted(server, minted.stdout.strip())


def test_json_documents_keep_the_commands_name(fm: Fleetmem, tmp_path: Path) -> None:
    run = fm(
        "recall",
        "--json",
        "--data-dir",
        str(tmp_path / "dta"),
        env={"PATH": path_without_fleetmem()},
        data_dir=False,
        subprocess=True,
    )
    assert json.loads(run.stdout)["suggestion"].endswith(f"fleetmem init --data-dir {tmp_path / 'dta'}")


# --------------------------------------------------------------------------- profiles and the first hour as written


def test_an_unknown_profile_says_what_why_and_the_command_that_adds_it(fm: Fleetmem, tmp_path: Path) -> None:
    env = {"FLEETMEM_CONFIG_DIR": str(tmp_path / "config")}
    for argv, source in ((["--profile", "prod"], "--profile"), ([], "$FLEETMEM_PROFILE")):
        run = fm(
            "recall",
            "--query",
            "alice",
            *argv,
            "--json",
            data_dir=False,
            env={**env, **({} if argv else {"FLEETMEM_PROFILE": "prod"})},
        )
        assert run.code == 2, run.stdout
        doc = run.json()
        assert doc["message"].startswith(f"No profile named 'prod' (named by {source}): a profile is a saved endpoint")
        assert str(tmp_path / "config" / "profiles.json") in doc["message"] and "holds none" in doc["message"]
        assert doc["suggestion"].startswith("Save it first: fleetmem profile add prod --url URL --token-file PATH")


def _fenced_lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    blocks = re.findall(r"```(?:bash|cron|ini)\n(.*?)```", text, flags=re.S)
    return [ln for block in blocks for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


@pytest.mark.parametrize("doc", [README, README.parent / "docs" / "ambient.md"], ids=lambda p: p.name)
def test_every_profile_the_docs_use_is_added_before_its_first_use(doc: Path) -> None:
    added: set[str] = set()
    used = []
    for line in _fenced_lines(doc):
        added.update(re.findall(r"fleetmem profile add (\S+)", line))
        for name in re.findall(r'--profile (\w[\w.-]*)|FLEETMEM_PROFILE=(\w[\w.-]*)|"profile": "([^"]+)"', line):
            name = next(n for n in name if n)
            used.append(name)
            assert name in added, f"{doc.name}: `{line.strip()}` uses profile {name!r} before `fleetmem profile add`"
    assert used  # the docs do show profiles in use


def _first_hour_block() -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"<!-- first-hour:begin -->\n```bash\n(.*?)```\n<!-- first-hour:end -->", text, flags=re.S)
    assert found, "README.md lost its first-hour block"
    return found.group(1)


def test_the_readmes_first_hour_runs_as_written_and_the_next_session_starts_with_the_memory(tmp_path: Path) -> None:
    """The README's first-hour block, run by bash line for line in a fresh home directory (no
    FLEETMEM_* and no XDG_* variables, so every per-user directory is the default one under it)
    against `fleetmem serve` as `scripts/serve` starts it: the default data directory, its port
    swapped for a free one. Then the SessionStart hook it installed, run the way Claude Code runs
    it, injects what the block remembered."""
    block = _first_hour_block()
    assert "fleetmem profile add local" in block
    assert block.index("fleetmem profile add local") < block.index("--profile local")
    assert block.index("fleetmem profile add local") < block.index('"profile": "local"')
    home = tmp_path / "home"
    project = home / "code" / "my-project"
    project.mkdir(parents=True)  # the user's own project
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FLEETMEM_", "XDG_", "VIRTUAL_ENV")) and k != "CLAUDE_PROJECT_DIR"
    }
    env.update(HOME=str(home), PATH=path_without_fleetmem(), FLEETMEM_MODEL_DIR=str(tmp_path / "no-model"))
    env["FLEETMEM_EMBEDDER"] = "hash"  # the server's and the CLI's: no model to build in a test
    with serving(tmp_path, env) as server:
        script = block.replace("127.0.0.1:8765", f"127.0.0.1:{server.port}")
        ran = subprocess.run(
            ["bash", "-e", "-x", "-c", script],
            cwd=README.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr
        assert "Alice prefers async standups" in ran.stdout  # the recall
        assert "Saved profile local: http://127.0.0.1:" in ran.stdout
        assert (home / ".local" / "share" / "fleetmem" / "fleetmem.db").is_file()  # the server's default directory
        settings = json.loads((project / ".claude" / "settings.local.json").read_text())
        command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
        assert not (README.parent / ".claude" / "settings.local.json").exists()  # not into the clone
        harness = {k: v for k, v in env.items() if k != "FLEETMEM_EMBEDDER"}
        event = {
            "session_id": "first-hour",
            "cwd": str(project),
            "hook_event_name": "SessionStart",
            "source": "startup",
            "transcript_path": None,
        }
        hook = subprocess.run(
            ["/bin/sh", "-c", command],
            input=json.dumps(event),
            cwd=project,
            env=harness,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert hook.returncode == 0 and hook.stderr == "", hook.stderr
    context = json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Alice prefers async standups" in context
