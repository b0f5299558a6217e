"""`fleetmem entity` with the reference 0.60 reads (D35): one name stays the positional shortcut now
that `name` is no longer schema-required, and `--names` answers the batch, printed one line per name."""

from __future__ import annotations

from tests.cli.conftest import Fleetmem


def test_entity_keeps_its_positional_name_and_takes_names(fm: Fleetmem) -> None:
    put = fm(
        "put-page", "people/alice-example", "--content", "---\ntitle: Alice Example\naliases: [Ali]\n---\nAlice leads."
    )
    assert put.code == 0, put.stderr
    one = fm("entity", "Ali", "--json")
    assert one.code == 0 and one.json()["card"]["entity"]["slug"] == "people/alice-example"
    batch = fm("entity", "--names", "Ali,Nobody Here", "--json")
    assert batch.code == 0, batch.stderr
    assert (batch.json()["found"], batch.json()["missing"]) == (1, 1)
    text = fm("entity", "--names", "Ali,Nobody Here")
    assert text.code == 0
    assert text.stdout.splitlines()[:3] == [
        "1 found, 1 missing",
        "  Ali: people/alice-example — Alice Example (None)",
        "      Alice leads.",
    ]
    assert "Nobody Here: not found" in text.stdout
