"""Issue 8 item 11, on the real CLI: FLEETMEM_FAIL_ON_EMPTY for query recalls, `serve` with a bad or
taken port, `--version`, private data files, `purge-fact` on an unknown id. Servers and listeners
only on 127.0.0.1 (free ports)."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest

from fleetmem import __version__
from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.sqlite import DB_FILENAME
from tests.cli.conftest import Fleetmem

PAGE = "---\ntitle: Orchid Health\ntype: company\n---\nOrchid Health pays invoices within thirty days.\n"


def seeded(fm: Fleetmem, tmp_path: Path) -> None:
    run = fm("remember", "Alice prefers green tea", "--provenance", "chat", "--entity", "people/alice", "--json")
    assert run.code == 0, run.stderr
    page = tmp_path / "orchid.md"
    page.write_text(PAGE, encoding="utf-8")
    assert fm("put-page", "companies/orchid-health", "--file", str(page), "--json").code == 0


# -- FLEETMEM_FAIL_ON_EMPTY ------------------------------------------------------------------------


def test_a_query_recall_with_only_weak_neighbours_exits_12_with_fail_on_empty(fm: Fleetmem, tmp_path: Path) -> None:
    seeded(fm, tmp_path)
    unrelated = fm("recall", "--query", "quantum submarine telemetry", "--json")
    body = unrelated.json()
    # What makes it "never empty" today: vector neighbours and the ranked facts arm always answer.
    assert body["facts"] or body["results"]
    assert all(r["evidence"] == "weak_semantic" for r in body["results"])
    run = fm(
        "recall",
        "--query",
        "quantum submarine telemetry",
        "--json",
        env={"FLEETMEM_FAIL_ON_EMPTY": "1"},
        subprocess=True,
    )
    assert run.code == 12, run.stderr
    assert run.json()["protocol_version"] == 1  # the body is still printed


@pytest.mark.parametrize("query", ["green tea", "Orchid Health"])
def test_a_query_recall_with_a_real_hit_exits_0_with_fail_on_empty(fm: Fleetmem, tmp_path: Path, query: str) -> None:
    seeded(fm, tmp_path)
    run = fm("recall", "--query", query, "--json", env={"FLEETMEM_FAIL_ON_EMPTY": "1"})
    assert run.code == 0, run.stdout


def test_a_filtered_recall_counts_its_facts(fm: Fleetmem, tmp_path: Path) -> None:
    seeded(fm, tmp_path)
    hit = fm("recall", "--query", "zzz", "--entity", "people/alice", "--json", env={"FLEETMEM_FAIL_ON_EMPTY": "1"})
    assert hit.code == 0
    miss = fm("recall", "--query", "zzz", "--entity", "people/bob", "--json", env={"FLEETMEM_FAIL_ON_EMPTY": "1"})
    assert miss.code == 12


# -- serve -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_serve_with_an_impossible_port_is_a_usage_error_without_a_traceback(fm: Fleetmem, port: str) -> None:
    run = fm("serve", "--port", port, "--host", "127.0.0.1", subprocess=True)
    assert run.code == 2
    assert "Traceback" not in run.stderr
    assert "--port" in run.stderr and "port number" in run.stderr
    assert "fleetmem MCP server on" not in run.stderr + run.stdout


@pytest.mark.parametrize("threads", ["0", "257", "many"])
def test_serve_with_an_impossible_thread_count_is_a_usage_error_without_a_traceback(fm: Fleetmem, threads: str) -> None:
    run = fm("serve", "--threads", threads, "--host", "127.0.0.1", "--port", "0", subprocess=True)
    assert run.code == 2
    assert "Traceback" not in run.stderr
    assert "--threads" in run.stderr and "1 to 256" in run.stderr
    assert "fleetmem MCP server on" not in run.stderr + run.stdout


def test_a_bad_thread_count_in_the_environment_names_the_variable_and_the_fix(fm: Fleetmem) -> None:
    run = fm("serve", "--host", "127.0.0.1", "--port", "0", env={"FLEETMEM_CALL_THREADS": "lots"}, subprocess=True)
    assert run.code == 2
    assert "Traceback" not in run.stderr
    assert "[invalid_config]" in run.stderr and "'lots'" in run.stderr
    assert "Unset FLEETMEM_CALL_THREADS or pass --threads 8." in run.stderr
    assert "fleetmem MCP server on" not in run.stderr + run.stdout


def test_serve_on_a_port_in_use_exits_1_with_a_clear_message_and_no_banner(fm: Fleetmem) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        run = fm("serve", "--host", "127.0.0.1", "--port", str(port), "--embedder", "hash", subprocess=True)
    assert run.code == 1, run.stderr
    assert "fleetmem MCP server on" not in run.stderr + run.stdout  # no banner for a server that never ran
    assert "Traceback" not in run.stderr
    assert f"127.0.0.1:{port}" in run.stderr and "already listening" in run.stderr
    assert "--port" in run.stderr  # says what to do instead


# -- --version -------------------------------------------------------------------------------------


def test_version_prints_the_package_version_and_exits_0(fm: Fleetmem) -> None:
    run = fm("--version", data_dir=False, subprocess=True)
    assert run.code == 0, run.stderr
    assert run.stdout.startswith(f"fleetmem {__version__}")


# -- private files ---------------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_data_directory_and_files_are_private_to_their_owner(fm: Fleetmem) -> None:
    run = fm("token", "create", "--client", "a", "--scopes", "read", subprocess=True)
    assert run.code == 0, run.stderr
    assert _mode(fm.data_dir) == 0o700
    assert _mode(fm.data_dir / DB_FILENAME) == 0o600
    # WAL and SHM exist while a connection is open, with the database file's mode.
    stores = open_local(fm.data_dir)
    try:
        stores.clients.list()
        siblings = [fm.data_dir / f"{DB_FILENAME}-wal", fm.data_dir / f"{DB_FILENAME}-shm"]
        assert all(p.exists() for p in siblings)
        assert [_mode(p) for p in siblings] == [0o600, 0o600]
    finally:
        stores.close()


def test_an_existing_world_readable_store_is_tightened_on_open(tmp_path: Path) -> None:
    data = tmp_path / "data"
    open_local(data).close()
    data.chmod(0o755)
    (data / DB_FILENAME).chmod(0o644)
    open_local(data).close()
    assert _mode(data / DB_FILENAME) == 0o600


def test_a_shared_directory_that_already_holds_other_files_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    (shared / "notes.txt").write_text("not ours")
    open_local(shared).close()
    assert _mode(shared) == 0o755  # not ours to change
    assert _mode(shared / DB_FILENAME) == 0o600


# -- purge-fact ------------------------------------------------------------------------------------


def test_purge_of_an_unknown_id_answers_not_found_without_asking(fm: Fleetmem) -> None:
    run = fm("purge-fact", "f_01JDZZZZZZZZZZZZZZZZZZZZZZ", "--json", subprocess=True)
    assert run.code == 2, run.stdout
    doc = run.json()
    assert doc["code"] == "not_found"
    assert doc["fix"]["next"] != "ask_user"
    human = fm("purge-fact", "f_01JDZZZZZZZZZZZZZZZZZZZZZZ")
    assert human.code == 2 and "not_found" in human.stderr and "[AGENT]" not in human.stderr


def test_purge_of_a_known_id_still_asks_and_the_check_deletes_nothing(fm: Fleetmem) -> None:
    saved = fm("remember", "Delete me later", "--provenance", "p", "--entity", "people/dana", "--json").json()
    run = fm("purge-fact", saved["id"], "--json")
    assert run.code == 3 and run.json()["code"] == "confirmation_required"
    still = fm("recall", "--entity", "people/dana", "--json").json()
    assert [f["fact_id"] for f in still["facts"]] == [saved["id"]]
