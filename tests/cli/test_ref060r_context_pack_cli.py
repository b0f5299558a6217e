"""`fleetmem context-pack` as the reference 0.60 takes context_pack (D32), on the trusted local lane
over a real data directory: `--entities` optional (the core block alone) and a comma list that is
always names (never parsed as JSON)."""

from __future__ import annotations

from tests.cli.conftest import Fleetmem


def test_context_pack_without_entities_is_the_core_block_and_entities_are_always_names(fm: Fleetmem) -> None:
    fm("put-page", "me/profile", stdin="---\ntitle: Profile\ncore: true\n---\nI prefer short answers.\n")
    run = fm("context-pack", "--json")
    assert run.code == 0, run.stdout + run.stderr
    body = run.json()
    assert body["entities"] == [] and body["core"]["pages"] == ["me/profile"]
    assert "I prefer short answers." in body["text"]
    # a comma list is names, even where a value would parse as JSON
    run = fm("context-pack", "--entities", "123,true", "--json")
    assert run.code == 0, run.stdout + run.stderr
    assert run.json()["entities"] == ["123", "true"]
