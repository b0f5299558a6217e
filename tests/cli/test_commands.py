"""`fleetmem import`, `doctor` and `protocol`."""

from __future__ import annotations

from pathlib import Path

from fleetmem.memory.verbs import REGISTRY
from fleetmem.protocol import PAGE_BODY_MAX_BYTES
from tests.cli.conftest import Fleetmem


def write(root: Path, rel: str, text: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")


def test_import_reports_each_bad_file_by_name_and_imports_the_rest(fm: Fleetmem, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    write(
        root,
        "people/alice-example.md",
        "---\ntitle: Alice Example\naliases: [Ali]\n---\nAlice leads research.\n",
    )
    write(
        root,
        "companies/acme-example.md",
        "---\ntitle: Acme Example\ntype: company\n---\nAcme sells anvils.\n",
    )
    write(root, "people/broken.md", b"\xff\xfe not utf-8 \x80")
    write(root, "people/huge.md", "---\ntitle: Huge\n---\n" + "x" * (PAGE_BODY_MAX_BYTES + 10))
    run = fm("import", str(root), "--json", subprocess=True)
    assert run.code == 1
    report = run.json()
    assert (report["total"], report["imported"], report["failed"]) == (4, 2, 2)
    assert sorted(e["file"] for e in report["errors"]) == ["people/broken.md", "people/huge.md"]
    assert {e["code"] for e in report["errors"]} == {"invalid_params"}
    assert "people/broken.md" in run.stderr and "people/huge.md" in run.stderr
    card = fm("entity", "Ali", "--json").json()
    assert card["card"]["entity"]["slug"] == "people/alice-example"
    assert fm("entity", "companies/acme-example", "--json").json()["found"] is True


def test_import_of_a_clean_folder_exits_0_with_a_summary(fm: Fleetmem, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    write(root, "projects/apollo.md", "# Apollo\n\nA moonshot.\n")
    run = fm("import", str(root))
    assert run.code == 0, run.stderr
    assert "1 of 1" in run.stderr


def test_import_of_a_missing_folder_is_a_usage_error(fm: Fleetmem, tmp_path: Path) -> None:
    run = fm("import", str(tmp_path / "nope"), "--json")
    assert run.code == 2
    assert run.json()["error"] == "command_failed"


def test_doctor_reports_a_missing_embedder_with_the_build_fix(fm: Fleetmem) -> None:
    run = fm("doctor", "--json", env={"FLEETMEM_EMBEDDER": "minilm"})
    assert run.code == 0, run.stdout + run.stderr
    report = run.json()
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["data_dir"]["status"] == "ok"
    assert checks["embedder"]["status"] == "warn"
    assert checks["embedder"]["fix"]["argv"] == [
        "fleetmem",
        "embedder",
        "build",
        "--data-dir",
        str(fm.data_dir),
    ]
    assert checks["tokens"]["status"] == "warn"
    assert report["configured"]["data_dir"] == str(fm.data_dir)
    assert report["status"] == "warn"


def test_doctor_counts_active_tokens_and_unembedded_items(fm: Fleetmem) -> None:
    fm("token", "create", "--client", "agent-a", "--scopes", "read")
    fm("remember", "Keyword-only fact", "--provenance", "test", env={"FLEETMEM_EMBEDDER": "none"})
    report = fm("doctor", "--json").json()
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["tokens"]["status"] == "ok" and checks["tokens"]["count"] == 1
    assert checks["unembedded"]["status"] == "warn"
    assert checks["unembedded"]["fix"]["argv"] == ["fleetmem", "reindex", "--data-dir", str(fm.data_dir)]


def test_reindex_embeds_what_doctor_reported(fm: Fleetmem) -> None:
    fm("remember", "Keyword-only fact", "--provenance", "test", env={"FLEETMEM_EMBEDDER": "none"})
    run = fm("reindex", "--json")
    assert run.code == 0, run.stdout + run.stderr
    checks = {c["id"]: c for c in fm("doctor", "--json").json()["checks"]}
    assert checks["unembedded"]["status"] == "ok"


def test_protocol_json_describes_every_registry_tool(fm: Fleetmem) -> None:
    run = fm("protocol", "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert doc["protocol_version"] == 1
    assert sorted(t["name"] for t in doc["tools"]) == sorted(REGISTRY)
    for tool in doc["tools"]:
        schema = tool["inputSchema"]
        assert schema["type"] == "object" and "properties" in schema and "required" in schema
        assert tool["scope"] in ("read", "write", "admin")


def test_protocol_schemas_are_the_tools_list_objects(fm: Fleetmem) -> None:
    from fleetmem.transport.listing import tool_definition

    doc = fm("protocol", "--json").json()
    by_name = {t["name"]: t for t in doc["tools"]}
    for name, spec in REGISTRY.items():
        listed = tool_definition(spec).model_dump(by_alias=True, exclude_none=True, mode="json")
        assert by_name[name]["inputSchema"] == listed["inputSchema"]
        assert by_name[name]["description"] == listed["description"]


def test_import_refuses_oversized_slugs_titles_and_aliases_by_file(fm: Fleetmem, tmp_path: Path) -> None:
    """D16 on the import path: each page over a size limit is reported by name, nothing of it is
    stored, and the rest still import."""
    root = tmp_path / "notes"
    write(root, "people/fine.md", "---\ntitle: Fine\n---\nok\n")
    write(root, "people/" + "a" * 101 + ".md", "a long segment\n")
    write(root, "people/long-title.md", "---\ntitle: " + "T" * 301 + "\n---\nx\n")
    write(root, "people/many-aliases.md", "---\naliases: [" + ", ".join(f"n{i}" for i in range(51)) + "]\n---\nx\n")
    run = fm("import", str(root), "--json", subprocess=True)
    assert run.code == 1
    report = run.json()
    assert (report["imported"], report["failed"]) == (1, 3)
    assert {e["code"] for e in report["errors"]} == {"invalid_params"}
    listed = fm("list-pages", "--json").json()
    assert [p["slug"] for p in listed["pages"]] == ["people/fine"]


def test_import_of_many_files_stores_every_good_page_with_its_vectors(fm: Fleetmem, tmp_path: Path) -> None:
    """150 pages and one unreadable file in the middle: every good page is stored, the bad one is
    reported by name, and no search doc is left without a vector."""
    from fleetmem.adapters.local import open_local
    from fleetmem.adapters.local.hash_embedder import HashEmbedder

    root = tmp_path / "notes"
    for i in range(150):
        write(root, f"people/p{i:03d}.md", f"---\ntitle: Person {i}\n---\nPerson {i} likes topic {i % 7}.\n")
    write(root, "people/p075-bad.md", b"\xff\xfe not utf-8")
    run = fm("import", str(root), "--json")
    assert run.code == 1
    report = run.json()
    assert (report["total"], report["imported"], report["failed"]) == (151, 150, 1)
    assert [e["file"] for e in report["errors"]] == ["people/p075-bad.md"]
    with open_local(fm.data_dir) as stores:
        assert stores.maintenance.unembedded(HashEmbedder().model_id)["docs"] == 0
        heads = stores.page_listing.list("default", world_only=False, limit=500)
        assert [h.slug for h in heads] == [f"people/p{i:03d}" for i in range(150)]


def test_import_on_many_threads_stores_and_reports_exactly_what_one_thread_does(tmp_path: Path) -> None:
    """`--jobs 8` against `--jobs 1` over the same folder (good pages, pages linking to each other,
    an unreadable file and an oversized one between them): the same report, errors in file
    order, and the same pages, links and search docs stored."""
    import os

    from fleetmem.adapters.local import open_local

    root = tmp_path / "notes"
    for i in range(60):
        link = f"links: [{{type: works_with, target: people/p{(i + 1) % 60:03d}}}]"
        write(root, f"people/p{i:03d}.md", f"---\ntitle: Person {i}\n{link}\n---\nPerson {i} likes tea.\n")
    write(root, "people/p020-bad.md", b"\xff\xfe not utf-8")
    write(root, "people/p040-huge.md", "x" * (PAGE_BODY_MAX_BYTES + 10))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETMEM_")}
    env |= {"FLEETMEM_EMBEDDER": "hash", "FLEETMEM_MODEL_DIR": str(tmp_path / "no-model")}
    reports, stored = [], []
    for jobs in ("1", "8"):
        fm = Fleetmem(tmp_path / f"data-{jobs}", env)
        run = fm("import", str(root), "--jobs", jobs, "--json")
        assert run.code == 1
        report = run.json()
        report.pop("path")
        reports.append(report)
        with open_local(fm.data_dir) as stores:
            slugs = [h.slug for h in stores.page_listing.list("default", world_only=False, limit=500)]
            backlinks = [stores.page_listing.backlinks("default", slug, world_only=False)[1] for slug in slugs]
            stored.append((slugs, backlinks, stores.maintenance.unembedded("hash-384")))
    assert reports[0] == reports[1]
    assert [e["file"] for e in reports[0]["errors"]] == ["people/p020-bad.md", "people/p040-huge.md"]
    assert (reports[0]["imported"], reports[0]["failed"]) == (60, 2)
    assert stored[0] == stored[1]
    slugs, backlinks, unembedded = stored[0]
    assert slugs == [f"people/p{i:03d}" for i in range(60)]
    assert backlinks == [1] * 60  # each page is linked from the one before it
    assert unembedded["docs"] == 0  # every page's search docs carry their vectors


def test_import_with_an_impossible_job_count_is_a_usage_error(fm: Fleetmem, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    write(root, "projects/apollo.md", "# Apollo\n")
    for jobs in ("0", "65", "all"):
        run = fm("import", str(root), "--jobs", jobs, subprocess=True)
        assert run.code == 2 and "Traceback" not in run.stderr
        assert "--jobs" in run.stderr and "1 to 64" in run.stderr
