"""Export and import memory packs in the browser against real `fleetmem serve` instances: the
download is the pack `fleetmem export` writes (member for member) and `fleetmem import` loads it; an
upload into a second, fresh server is checked by a dry run that writes nothing, then imported after
the step-up, and holds the same facts, page and audit trail; a malformed upload is refused with
nothing written; read and write tokens see no pack controls and their crafted posts are refused."""

from __future__ import annotations

import json
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import fleetmem_command
from tests.conformance.test_conformance_local import mint
from tests.console.conftest import Console, follow, shot
from tests.console.test_overview import v1
from tests.console.test_sign_in import sign_in
from tests.mcp.served import Served, server_env

ENTITY = "projects/pack-orbit"


@pytest.fixture(scope="module")
def orbit(serve_console: Console) -> list[str]:
    c = serve_console
    v1(c, c.write, "put_page", slug=ENTITY, content="---\ntitle: Orbit\ntype: project\n---\nThe Orbit project.\n")
    first = v1(c, c.write, "remember", fact="Orbit ships in March", entity=ENTITY, provenance="pack-test")["id"]
    newer = v1(
        c, c.write, "remember", fact="Orbit ships in May", entity=ENTITY, provenance="pack-test", replaces=first
    )["id"]
    other = v1(c, c.write, "remember", fact="Orbit's lead is Ada", entity=ENTITY, provenance="pack-test")["id"]
    return [first, newer, other]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """A second `fleetmem serve` over an empty data directory, with tokens for the same tenant."""
    tmp = tmp_path_factory.mktemp("console-pack-fresh")
    env = server_env(FLEETMEM_MODEL_DIR=str(tmp / "no-model"), FLEETMEM_CONSOLE_SIGN_INS_PER_MINUTE="100000")
    data = tmp / "data"
    server = Served(tmp, env, args=("--surface", "full"))
    server.token = mint(env, data, "read,write,admin", "fresh-admin", tenant="acme")
    read = mint(env, data, "read", "fresh-read", tenant="acme")
    write = mint(env, data, "read,write", "fresh-write", tenant="acme")
    server.start()
    try:
        yield Console(base=server.url, read=read, write=write, admin=server.token, other_admin="", server=server)
    finally:
        server.stop()


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*fleetmem_command(), *args], capture_output=True, text=True, env=env, timeout=180)


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        out = {}
        for info in tar.getmembers():
            f = tar.extractfile(info)
            assert f is not None
            out[info.name] = f.read()
        return out


def download(page: Any, console: Console, tmp: Path) -> Path:
    sign_in(page, console, console.admin)
    page.goto(f"{console.base}/console/packs")
    page.get_by_label("Entity (slug)").fill(ENTITY)
    with page.expect_download() as info:
        page.get_by_role("button", name="Download pack").click()
    path = tmp / "console.fmpack"
    info.value.save_as(str(path))
    return path


def snapshot(console: Console) -> dict[str, Any]:
    """What a pack carries of ENTITY, read back over /v1: facts with states and lineage, the page,
    and each fact's audit trail."""
    facts = v1(console, console.admin, "list_facts", entity=ENTITY, state="any", limit=200)["facts"]
    rows = sorted(facts, key=lambda f: f["fact_id"])
    trails = {f["fact_id"]: len(v1(console, console.admin, "trace_fact", id=f["fact_id"])["events"]) for f in rows}
    page = v1(console, console.admin, "get_page", slug=ENTITY)
    page.pop("last_retrieved_at", None)
    return {"facts": rows, "trails": trails, "page": page}


def test_the_download_is_the_cli_pack_and_imports_into_a_fresh_server_after_a_dry_run(
    page: Any, serve_console: Console, fresh: Console, orbit: list[str], tmp_path: Path
) -> None:
    pack = download(page, serve_console, tmp_path)
    # the same pack `fleetmem export` writes of the same data directory, member for member
    env = serve_console.server.env
    cli_pack = tmp_path / "cli.fmpack"
    done = cli(
        "export", str(cli_pack), "--tenant", "acme", "--entity", ENTITY,
        "--data-dir", str(serve_console.server.data_dir), env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ours, theirs = members(pack), members(cli_pack)
    assert list(ours) == list(theirs) == ["manifest.json", "pages.jsonl", "facts.jsonl", "audit.jsonl"]
    for m in ("pages.jsonl", "facts.jsonl", "audit.jsonl"):
        assert ours[m] == theirs[m], m
    manifest, cli_manifest = json.loads(ours["manifest.json"]), json.loads(theirs["manifest.json"])
    assert {**manifest, "exported_at": None} == {**cli_manifest, "exported_at": None}
    assert manifest["members"]["facts.jsonl"]["count"] == 3 and manifest["members"]["pages.jsonl"]["count"] == 1
    # `fleetmem import` loads the downloaded pack into a fresh data directory
    loaded = cli(
        "import", "--pack", str(pack), "--tenant", "acme", "--data-dir", str(tmp_path / "cli-data"), "--json", env=env
    )
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout)["written"] == {m: manifest["members"][m]["count"] for m in manifest["members"]}

    # the console of a second, fresh server: the dry run writes nothing
    admin = page.context.browser.new_context().new_page()
    try:
        sign_in(admin, fresh, fresh.admin)
        admin.goto(f"{fresh.base}/console/packs")
        admin.get_by_label("Pack file").set_input_files(str(pack))
        follow(admin, admin.get_by_role("button", name="Check (dry run)"))
        dry = admin.locator("section", has_text="Dry run")
        assert "nothing was written" in dry.inner_text()
        rows = dry.locator("tbody tr").all_inner_texts()
        assert rows[1].split() == ["Facts", "3", "3", "0"]
        assert v1(fresh, fresh.admin, "list_facts", state="any")["facts"] == []
        shot(admin, "packs-dry-run")
        # Import needs the signed-in token again
        admin.get_by_label("Your token, to confirm").fill("not-the-token")
        follow(admin, admin.get_by_role("button", name="Import", exact=True))
        assert "Not confirmed." in admin.get_by_role("alert").inner_text()
        assert v1(fresh, fresh.admin, "list_facts", state="any")["facts"] == []
        admin.get_by_label("Your token, to confirm").fill(fresh.admin)
        follow(admin, admin.get_by_role("button", name="Import", exact=True))
        assert admin.url.endswith("/console/packs/imported")
        assert "Imported console.fmpack" in admin.get_by_role("status").inner_text()
        shot(admin, "packs-imported")
        admin.reload()  # the result page is shown once: a reload imports nothing
        assert admin.url.endswith("/console/packs")
    finally:
        admin.context.close()
    assert snapshot(fresh) == snapshot(serve_console)


def test_a_malformed_upload_is_refused_with_nothing_written(page: Any, fresh: Console, tmp_path: Path) -> None:
    bad = tmp_path / "bad.fmpack"
    bad.write_bytes(b"this is not a pack\n")
    before = v1(fresh, fresh.admin, "list_facts", state="any")["facts"]
    sign_in(page, fresh, fresh.admin)
    page.goto(f"{fresh.base}/console/packs")
    page.get_by_label("Pack file").set_input_files(str(bad))
    with page.expect_navigation() as nav:
        page.get_by_role("button", name="Check (dry run)").click()
    assert nav.value.status == 400
    alert = page.get_by_role("alert").inner_text()
    assert "not a readable fleetmem pack" in alert and "nothing was written" in alert
    assert "/tmp" not in alert and "fmpack-" not in alert  # no server path in the message
    assert page.get_by_role("button", name="Import", exact=True).count() == 0
    assert v1(fresh, fresh.admin, "list_facts", state="any")["facts"] == before
    shot(page, "packs-refused")


@pytest.mark.parametrize("who", ["read", "write"])
def test_read_and_write_tokens_see_no_pack_controls_and_crafted_posts_are_refused(
    page: Any, fresh: Console, who: str, tmp_path: Path
) -> None:
    sign_in(page, fresh, getattr(fresh, who))
    assert page.get_by_role("link", name="Packs").count() == 0
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    for path in ("/console/packs", "/console/packs/export?entity=x"):
        r = page.request.get(f"{fresh.base}{path}")
        assert r.status == 403 and "Sign in with a token that has the admin scope" in r.text()
    before = v1(fresh, fresh.admin, "list_facts", state="any")["facts"]
    for path in ("/console/packs/check", "/console/packs/import"):
        r = page.request.post(
            f"{fresh.base}{path}",
            multipart={"csrf": csrf, "pending": "x", "pack": {"name": "p.fmpack", "mimeType": "application/gzip",
                                                              "buffer": b"x"}},
            headers={"origin": fresh.base},
        )  # fmt: skip
        assert r.status == 403 and "scope_denied" in r.text()
        assert "Sign in with a token that has the admin scope" in r.text()
    assert v1(fresh, fresh.admin, "list_facts", state="any")["facts"] == before
