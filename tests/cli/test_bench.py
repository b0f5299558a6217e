"""`fleetmem bench`: the corpus has the reference shape and a tiny run produces the table.

Timings are printed by the benchmark, never asserted here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from fleetmem.bench.corpus import FACTS_PER_PAGE, FACTS_PER_TARGET, TARGETS, seed_corpus, slug_for
from fleetmem.ports import Deps
from tests.cli.conftest import Fleetmem

NOW = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)


def test_corpus_has_one_alias_one_link_and_two_facts_per_page_plus_target_facts(deps: Deps) -> None:
    corpus = seed_corpus(deps, tenant="bench", pages=120, now=NOW)
    assert corpus.pages == 120 and len(corpus.targets) == TARGETS
    page = deps.pages.get("bench", slug_for(77))
    assert page is not None and len(page.aliases) == 1 and len(page.links) == 1
    ordinary = deps.facts.by_entity("bench", slug_for(77), now=NOW, limit=100)
    assert len(ordinary) == FACTS_PER_PAGE
    target = deps.facts.by_entity("bench", corpus.targets[0], now=NOW, limit=100)
    assert len(target) == FACTS_PER_PAGE + FACTS_PER_TARGET
    hits = deps.pages.lookup("bench", alias="alias-000077", title="", slugs=[], suffix="", world_only=True)
    assert [m.page.slug for m in hits] == [slug_for(77)]


def test_a_tiny_benchmark_run_prints_a_row_per_call_without_errors(fm: Fleetmem, tmp_path: Path) -> None:
    run = fm(
        "bench",
        "--pages",
        "120",
        "--iterations",
        "3",
        "--delta-baseline",
        "60",
        "--no-http",
        "--data-dir",
        str(tmp_path / "bench"),
        data_dir=False,
    )
    assert run.code == 0, run.stderr
    table = run.stdout
    for label in (
        "entity (title)",
        "recall (entity)",
        "recall (query)",
        "context_pack (8)",
        "delta (20 changes)",
        "remember",
    ):
        row = next(line for line in table.splitlines() if line.startswith(f"| {label}"))
        assert "errors" not in row
    assert "delta p50 for 20 changes" in table
