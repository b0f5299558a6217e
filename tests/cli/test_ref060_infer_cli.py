"""remember's entity inference and content_origin on the CLI (the trusted-local lane, D24), and
content_origin through a memory pack: kept on export and import, and absent from the line of a
fact saved without one (a pack of such facts reads in releases that predate the field)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

from fleetmem.adapters.local.sqlite import open_local
from tests.cli.conftest import Fleetmem


def _json(fm: Fleetmem, *args: str) -> Any:
    run = fm(*args, "--json")
    assert run.code == 0, run.stderr
    return run.json()


def test_the_cli_infers_the_entity_and_takes_the_new_flags(fm: Fleetmem) -> None:
    _json(fm, "put-page", "people/priya-raman", "--content", "---\ntitle: Priya Raman\ntype: person\n---\nPM.\n")
    linked = _json(fm, "remember", "Priya Raman moved the review to Friday", "--provenance", "chat")
    assert (linked["entity_slug"], linked["entity_inferred"]) == ("people/priya-raman", "mention")
    off = _json(fm, "remember", "Priya Raman likes tea", "--provenance", "chat", "--no-infer-entity")
    assert (off["entity_slug"], off["warnings"]) == (None, ["NO_ENTITY"])
    tool = _json(
        fm, "remember", "The CI log says build 7 failed", "--provenance", "ci", "--content-origin", "tool_output"
    )
    with open_local(fm.data_dir) as stores:
        assert stores.facts.get("default", tool["id"]).content_origin == "tool_output"


def _fact_lines(pack: Path) -> list[dict[str, Any]]:
    with tarfile.open(pack, "r:gz") as tar:
        member = tar.extractfile("facts.jsonl")
        assert member is not None
        return [json.loads(line) for line in member.read().decode().splitlines() if line.strip()]


def test_content_origin_survives_a_pack_and_is_left_out_when_absent(fm: Fleetmem, tmp_path: Path) -> None:
    said = _json(fm, "remember", "Ops said the cache is cold", "--provenance", "chat", "--content-origin", "user_said")
    plain = _json(fm, "remember", "A plain fact", "--provenance", "chat")
    pack = tmp_path / "brain.fmpack"
    _json(fm, "export", str(pack))
    lines = {line["fact_id"]: line for line in _fact_lines(pack)}
    assert lines[said["id"]]["content_origin"] == "user_said"
    assert "content_origin" not in lines[plain["id"]]
    fresh = tmp_path / "fresh"
    run = fm("import", "--pack", str(pack), "--json", "--data-dir", str(fresh), data_dir=False)
    assert run.code == 0, run.stderr
    with open_local(fresh) as stores:
        assert stores.facts.get("default", said["id"]).content_origin == "user_said"
        assert stores.facts.get("default", plain["id"]).content_origin is None
