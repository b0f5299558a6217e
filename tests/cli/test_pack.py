"""Memory packs on the local backend: `fleetmem export`, `fleetmem import --pack`, `fleetmem backup`
(docs/portability.md). Real SQLite stores, the deterministic hash embedder."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from fleetmem.adapters.local.sqlite import open_local
from fleetmem.adapters.local.sqlite.db import DB_FILENAME
from tests.cli.conftest import Fleetmem

QUERIES = ("alice tea", "acme anvils", "deadline", "research")


def seed(fm: Fleetmem, tenant: str = "default") -> dict[str, str]:
    """A brain with every fact state, lineage, private items, links, a timeline and a deleted page."""

    def call(*args: str) -> Any:
        run = fm(*args, "--tenant", tenant, "--json")
        assert run.code == 0, run.stderr
        return run.json()

    call(
        "put-page",
        "people/alice-example",
        "--content",
        "---\ntitle: Alice Example\naliases: [Ali]\ntype: person\nlinks:\n  - {type: works_at, target: "
        "companies/acme-example}\ntimeline:\n  - {date: 2026-05-01, text: joined Acme}\n---\nAlice leads research.\n",
    )
    call(
        "put-page",
        "companies/acme-example",
        "--content",
        "# Acme Example\n\nAcme sells anvils. See [[people/alice-example]].",
    )
    call("put-page", "scratch/gone", "--content", "temporary")
    call("delete-page", "scratch/gone")
    ids: dict[str, str] = {}
    ids["old"] = call("remember", "Alice prefers tea", "--provenance", "chat 1", "--entity", "people/alice-example")[
        "id"
    ]
    ids["new"] = call(
        "remember",
        "Alice now prefers green tea",
        "--provenance",
        "chat 2",
        "--entity",
        "people/alice-example",
        "--supersedes",
        ids["old"],
    )["id"]
    ids["forgotten"] = call(
        "remember", "The deadline is 2027-01-10", "--provenance", "chat 3", "--entity", "companies/acme-example"
    )["id"]
    call("forget", ids["forgotten"], "--reason", "user corrected it")
    ids["expired"] = call("remember", "Acme had a sale", "--provenance", "chat 4", "--ttl", "2026-01-01")["id"]
    ids["private"] = call("remember", "Alice's phone is private", "--provenance", "chat 5", "--visibility", "private")[
        "id"
    ]
    return ids


def state(data_dir: Path, tenant: str = "default") -> dict[str, Any]:
    """Everything a pack carries, read straight from the store (vectors and tenant aside)."""
    with open_local(data_dir) as stores:

        def scan(store: Any, drop: set[str]) -> list[dict[str, Any]]:
            out, after = [], None
            while True:
                batch, after = store.scan(tenant, after=after, limit=2)  # small batches: paging is exercised
                out += [item.model_dump(mode="json", exclude=drop) for item in batch]
                if after is None:
                    return out

        return {
            "pages": scan(stores.pages, {"tenant"}),
            "facts": scan(stores.facts, {"tenant", "vector", "vector_model"}),
            "audit": scan(stores.audit, {"tenant"}),
        }


def counters(data_dir: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(data_dir / DB_FILENAME)
    try:
        return con.execute(
            "SELECT 'change', tenant, kind, seq FROM change_seq UNION ALL SELECT 'seq', tenant, '', seq FROM fact_seq "
            "UNION ALL SELECT 'audit', tenant, '', count(*) FROM audit GROUP BY tenant "
            "UNION ALL SELECT 'docs', tenant, '', count(*) FROM docs GROUP BY tenant ORDER BY 1, 2, 3"
        ).fetchall()
    finally:
        con.close()


def recall(fm: Fleetmem, query: str, data_dir: Path) -> list[tuple[str, str]]:
    body = fm(
        "recall", "--query", query, "--include-private", "--json", "--data-dir", str(data_dir), data_dir=False
    ).json()
    return [(f["fact_id"], f["fact"]) for f in body["facts"]] + [
        (p.get("slug", ""), "page") for p in body.get("pages", [])
    ]


@pytest.fixture
def pack(fm: Fleetmem, tmp_path: Path) -> Path:
    seed(fm)
    path = tmp_path / "brain.fmpack"
    run = fm("export", str(path), "--json")
    assert run.code == 0, run.stderr
    return path


def test_round_trip_keeps_pages_facts_states_lineage_audit_and_recall(fm: Fleetmem, pack: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    run = fm("import", "--pack", str(pack), "--json", "--data-dir", str(fresh), data_dir=False)
    assert run.code == 0, run.stderr
    assert state(fresh) == state(fm.data_dir)
    facts = {f["text"]: f for f in state(fresh)["facts"]}
    assert facts["Alice prefers tea"]["superseded_by"] == facts["Alice now prefers green tea"]["fact_id"]
    assert facts["The deadline is 2027-01-10"]["expired_reason"] == "user corrected it"
    assert {f["visibility"] for f in facts.values()} == {"world", "private"}
    found = [recall(fm, query, fresh) for query in QUERIES]
    assert found == [recall(fm, query, fm.data_dir) for query in QUERIES]
    assert all(found), found  # every query finds something, so the comparison says something
    # the fact sequence continues above the imported seqs (recall's integer ids stay unique)
    new = fm(
        "remember", "A fact after the import", "--provenance", "t", "--json", "--data-dir", str(fresh), data_dir=False
    ).json()["id"]
    seqs = [f["seq"] for f in state(fresh)["facts"]]
    assert len(set(seqs)) == len(seqs) and max(seqs) == next(
        f["seq"] for f in state(fresh)["facts"] if f["fact_id"] == new
    )


def test_a_second_import_changes_nothing(fm: Fleetmem, pack: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    args = ("import", "--pack", str(pack), "--json", "--data-dir", str(fresh))
    assert fm(*args, data_dir=False).code == 0
    before, numbers = state(fresh), counters(fresh)
    again = fm(*args, data_dir=False)
    assert again.code == 0, again.stderr
    assert set(again.json()["written"].values()) == {0}
    assert state(fresh) == before and counters(fresh) == numbers


def test_delta_followers_see_imported_items(fm: Fleetmem, pack: Path, tmp_path: Path) -> None:
    target = tmp_path / "target"
    where = ("--data-dir", str(target))
    assert fm("init", *where, data_dir=False).code == 0
    first = fm("delta", "--session-id", "follower", "--json", *where, data_dir=False)
    assert first.code == 0, first.stderr  # the first wake only sets the cursor
    assert fm("import", "--pack", str(pack), *where, data_dir=False).code == 0
    body = fm("delta", "--session-id", "follower", "--json", *where, data_dir=False).json()
    assert {p["slug"] for p in body["pages"]} >= {"people/alice-example", "companies/acme-example"}
    assert "Alice now prefers green tea" in {f["fact"] for f in body["facts"]}


def test_export_filters_by_entity_state_and_since(fm: Fleetmem, tmp_path: Path) -> None:
    ids = seed(fm)

    def export(*flags: str) -> dict[str, list[dict[str, Any]]]:
        path = tmp_path / f"p{len(list(tmp_path.iterdir()))}.fmpack"
        assert fm("export", str(path), *flags).code == 0
        fresh = tmp_path / f"fresh-{path.stem}"
        assert fm("import", "--pack", str(path), "--data-dir", str(fresh), data_dir=False).code == 0
        return state(fresh)

    alice = export("--entity", "people/alice-example")
    assert [p["slug"] for p in alice["pages"]] == ["people/alice-example"]
    assert {f["fact_id"] for f in alice["facts"]} == {ids["old"], ids["new"]}
    assert {e["subject"] for e in alice["audit"]} == {"people/alice-example", ids["old"], ids["new"]}
    forgotten = export("--state", "forgotten")
    assert (forgotten["pages"], [f["fact_id"] for f in forgotten["facts"]]) == ([], [ids["forgotten"]])
    assert export("--since", "2999-01-01") == {"pages": [], "facts": [], "audit": []}


def test_export_refuses_to_overwrite_a_file_and_a_bad_since(fm: Fleetmem, pack: Path) -> None:
    run = fm("export", str(pack), "--json")
    assert run.code == 2 and "--force" in run.json()["suggestion"]
    assert fm("export", str(pack), "--force").code == 0
    assert fm("export", str(pack) + "2", "--since", "last week").code == 2


# --------------------------------------------------------------------------- hostile packs


def rewrite(
    pack: Path,
    dest: Path,
    *,
    member: str | None = None,
    edit: Any = None,
    manifest: Any = None,
    fix_checksums: bool = True,
) -> Path:
    """A copy of `pack` with `edit(lines) -> lines` applied to `member` and/or `manifest(doc)` to the
    manifest; with `fix_checksums` the manifest is made to match, so only the edit itself is wrong."""
    import gzip
    import hashlib
    import io
    import tarfile

    with tarfile.open(pack) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    doc = json.loads(files["manifest.json"])
    if member is not None:
        files[member] = b"".join(line + b"\n" for line in edit(files[member].splitlines()))
        if fix_checksums:
            doc["members"][member] = {
                "count": files[member].count(b"\n"),
                "bytes": len(files[member]),
                "sha256": hashlib.sha256(files[member]).hexdigest(),
            }
    if manifest is not None:
        manifest(doc)
    files["manifest.json"] = json.dumps(doc).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb") as gz, tarfile.open(fileobj=gz, mode="w") as tar:  # type: ignore[call-overload]
        for name in ("manifest.json", "pages.jsonl", "facts.jsonl", "audit.jsonl"):
            info = tarfile.TarInfo(name)
            info.size = len(files[name])
            tar.addfile(info, io.BytesIO(files[name]))
    dest.write_bytes(buf.getvalue())
    return dest


def set_field(index: int, **fields: Any) -> Any:
    def edit(lines: list[bytes]) -> list[bytes]:
        item = json.loads(lines[index])
        item.update(fields)
        return [*lines[:index], json.dumps(item).encode(), *lines[index + 1 :]]

    return edit


def refused(fm: Fleetmem, bad: Path, tmp_path: Path, *extra: str) -> dict[str, Any]:
    """Import `bad` into a fresh directory and into the seeded one: refused with exit 2, the fresh
    directory never created, the seeded one unchanged."""
    fresh = tmp_path / "never"
    run = fm("import", "--pack", str(bad), "--json", *extra, "--data-dir", str(fresh), data_dir=False)
    assert run.code == 2, run.stdout + run.stderr
    assert not fresh.exists()
    before, numbers = state(fm.data_dir), counters(fm.data_dir)
    again = fm("import", "--pack", str(bad), *extra)
    assert again.code == 2
    assert state(fm.data_dir) == before and counters(fm.data_dir) == numbers
    body: dict[str, Any] = run.json()
    assert body["code"] == "invalid_pack" and body["suggestion"]
    return body


def test_a_truncated_pack_is_refused(fm: Fleetmem, pack: Path, tmp_path: Path) -> None:
    bad = tmp_path / "truncated.fmpack"
    data = pack.read_bytes()
    bad.write_bytes(data[: len(data) * 2 // 3])
    assert "nothing was written" in refused(fm, bad, tmp_path)["message"]


def test_a_pack_whose_member_does_not_match_its_checksum_is_refused(fm: Fleetmem, pack: Path, tmp_path: Path) -> None:
    bad = rewrite(
        pack,
        tmp_path / "sum.fmpack",
        member="facts.jsonl",
        edit=set_field(0, text="Alice prefers coffee"),
        fix_checksums=False,
    )
    body = refused(fm, bad, tmp_path)
    assert "facts.jsonl does not match its checksum" in body["message"]


def test_an_unknown_field_is_refused_naming_the_member_and_line(fm: Fleetmem, pack: Path, tmp_path: Path) -> None:
    bad = rewrite(pack, tmp_path / "extra.fmpack", member="facts.jsonl", edit=set_field(1, vector=[0.1, 0.2]))
    body = refused(fm, bad, tmp_path)
    assert "facts.jsonl line 2" in body["message"] and "unknown field 'vector'" in body["message"]


@pytest.mark.parametrize(
    ("member", "fields", "expect"),
    [
        ("facts.jsonl", {"text": "x" * 2001}, "longer than 2000"),
        ("facts.jsonl", {"provenance": " "}, "provenance is blank"),
        ("facts.jsonl", {"entity_slug": "../../etc"}, "not a page slug"),
        ("pages.jsonl", {"body": "y" * (350 * 1024 + 1)}, "larger than 350 KB"),
        ("pages.jsonl", {"aliases": ["a"] * 51}, "aliases"),
        ("pages.jsonl", {"slug": "Not A Slug"}, "not a page slug"),
        ("audit.jsonl", {"action": "grant_admin"}, "action"),
    ],
)
def test_values_the_verbs_refuse_are_refused(
    fm: Fleetmem, pack: Path, tmp_path: Path, member: str, fields: dict[str, Any], expect: str
) -> None:
    bad = rewrite(pack, tmp_path / "over.fmpack", member=member, edit=set_field(0, **fields))
    body = refused(fm, bad, tmp_path)
    assert f"{member} line 1" in body["message"] and expect in body["message"]


def test_a_newer_pack_version_is_refused_with_the_upgrade_fix(fm: Fleetmem, pack: Path, tmp_path: Path) -> None:
    bad = rewrite(pack, tmp_path / "v9.fmpack", manifest=lambda d: d.update(format_version=9, future_field=True))
    body = refused(fm, bad, tmp_path)
    assert "version 9" in body["message"] and "upgrade" in body["suggestion"].lower()


def test_a_manifest_nested_too_deep_to_parse_is_refused(fm: Fleetmem, pack: Path, tmp_path: Path) -> None:
    """Regression: a manifest nested deeper than the JSON parser's recursion limit raised
    RecursionError (not a ValueError) out of the pack reader instead of the `invalid_pack` answer."""
    import gzip
    import io
    import tarfile

    marked = rewrite(pack, tmp_path / "marked.fmpack", manifest=lambda d: d.update(deep="DEEP"))
    with tarfile.open(marked) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    files["manifest.json"] = files["manifest.json"].replace(b'"DEEP"', b"[" * 5000 + b"]" * 5000)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb") as gz, tarfile.open(fileobj=gz, mode="w") as tar:  # type: ignore[call-overload]
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    bad = tmp_path / "deep.fmpack"
    bad.write_bytes(buf.getvalue())
    assert "manifest.json is not JSON" in refused(fm, bad, tmp_path)["message"]


def test_a_pack_of_another_tenant_is_refused_unless_its_tenant_is_named(
    fm: Fleetmem, pack: Path, tmp_path: Path
) -> None:
    body = refused(fm, pack, tmp_path, "--tenant", "other")
    assert "'default'" in body["message"] and "--from-tenant default" in body["suggestion"]
    refused(fm, pack, tmp_path, "--tenant", "other", "--from-tenant", "acme")
    run = fm("import", "--pack", str(pack), "--tenant", "other", "--from-tenant", "default")
    assert run.code == 0, run.stderr
    assert state(fm.data_dir, "other") == state(fm.data_dir, "default")


# --------------------------------------------------------------------------- backup


def test_backup_during_a_write_burst_holds_every_acknowledged_write(fm: Fleetmem, tmp_path: Path) -> None:
    """A writer on its own connection (as a running server is) keeps committing facts while the
    backup runs; the copy passes integrity_check and holds every fact acknowledged before it started."""
    from datetime import UTC, datetime

    from fleetmem.models import Fact

    acked: list[str] = []
    stop, warm = threading.Event(), threading.Event()
    stores = open_local(fm.data_dir)

    def burst() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            fact = Fact(
                tenant="default",
                fact_id=f"f_burst{n:06d}",
                seq=stores.facts.next_seq("default"),
                text=f"burst fact {n}",
                provenance="burst",
                client_id="burst",
                created_at=datetime.now(UTC),
            )
            stores.facts.put(fact)
            acked.append(fact.fact_id)
            if n == 200:
                warm.set()

    writer = threading.Thread(target=burst)
    writer.start()
    try:
        assert warm.wait(120)
        before = list(acked)  # acknowledged before the backup starts
        run = fm("backup", str(tmp_path / "copy"), "--json")
    finally:
        stop.set()
        writer.join()
        stores.close()
    assert run.code == 0, run.stderr
    assert run.json()["integrity_check"] == "ok"
    con = sqlite3.connect(tmp_path / "copy" / DB_FILENAME)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        copied = {r[0] for r in con.execute("SELECT fact_id FROM facts WHERE tenant = 'default'")}
    finally:
        con.close()
    assert set(before) <= copied
    # restore = serve (or read) the copy as a data directory
    run = fm("recall", "--json", "--data-dir", str(tmp_path / "copy"), data_dir=False)
    assert run.code == 0 and run.json()["facts"]


def test_backup_refuses_a_destination_holding_a_memory(fm: Fleetmem, tmp_path: Path) -> None:
    run = fm("backup", str(fm.data_dir), "--json")
    assert run.code == 2 and "already holds" in run.json()["message"]


def test_a_pack_holding_a_fact_twice_is_refused(fm: Fleetmem, pack: Path, tmp_path: Path) -> None:
    bad = rewrite(pack, tmp_path / "twice.fmpack", member="facts.jsonl", edit=lambda lines: [*lines, lines[0]])
    body = refused(fm, bad, tmp_path)
    assert "appears twice" in body["message"] and "facts.jsonl line" in body["message"]


def test_the_pack_is_read_from_one_copy_so_a_change_after_the_check_is_not_written(
    fm: Fleetmem, pack: Path, tmp_path: Path
) -> None:
    """The file is replaced by a pack with another fact between the check and the write: the import
    writes what it checked."""
    import random

    from fleetmem.adapters.local.clock import SystemClock
    from fleetmem.adapters.local.hash_embedder import HashEmbedder
    from fleetmem.adapters.local.ids import SortableIds
    from fleetmem.pack import PackReader
    from fleetmem.pack_transfer import import_pack
    from fleetmem.ports import Deps

    # a body that does not compress, so the pack is far larger than any read buffer
    rng = random.Random(7)
    body = " ".join(f"{rng.getrandbits(64):x}" for _ in range(15_000))
    rewrite(pack, pack, member="pages.jsonl", edit=set_field(0, body=body))
    other = rewrite(pack, tmp_path / "other.fmpack", member="facts.jsonl", edit=set_field(0, text="Swapped in later"))
    fresh = tmp_path / "fresh"
    with PackReader(pack) as reader, open_local(fresh) as stores:
        reader.verify()
        pack.write_bytes(other.read_bytes())
        deps = Deps.over(stores, clock=SystemClock(), ids=SortableIds(), embedder=HashEmbedder())
        import_pack(reader, deps, tenant="default")
    texts = {f["text"] for f in state(fresh)["facts"]}
    assert "Alice prefers tea" in texts and "Swapped in later" not in texts


def test_import_without_a_folder_or_a_pack_is_a_usage_error(fm: Fleetmem) -> None:
    run = fm("import", "--json")
    assert run.code == 2 and "--pack" in run.json()["suggestion"]
