"""`fleetmem bench`: the corpus has the reference shape and a tiny run produces the table.

Timings are printed by the benchmark, never asserted here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleetmem.bench.corpus import FACTS_PER_PAGE, FACTS_PER_TARGET, TARGETS, seed_corpus, slug_for
from fleetmem.ports import Deps
from tests.cli.conftest import Fleetmem

NOW = datetime(2026, 6, 11, 9, 30, tzinfo=UTC)


def test_corpus_has_one_alias_one_link_and_two_facts_per_page_plus_target_facts(deps: Deps) -> None:
    corpus = seed_corpus(deps, tenant="bench", pages=120, now=NOW)
    assert corpus.pages == 120 and len(corpus.targets) == TARGETS
    page = deps.pages.get("bench", slug_for(77))
    assert page is not None and len(page.aliases) == 1 and len(page.links) == 1
    ordinary = deps.fact_listing.by_entity("bench", slug_for(77), now=NOW, limit=100)
    assert len(ordinary) == FACTS_PER_PAGE
    target = deps.fact_listing.by_entity("bench", corpus.targets[0], now=NOW, limit=100)
    assert len(target) == FACTS_PER_PAGE + FACTS_PER_TARGET
    hits = deps.pages.lookup("bench", aliases=["alias-000077"], titles=[], slugs=[], suffix="", world_only=True)
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


def test_a_tiny_http_run_reports_the_floor_of_the_same_server_and_each_read_as_a_multiple_of_it(
    fm: Fleetmem, tmp_path: Path
) -> None:
    run = fm(
        "bench",
        "--pages",
        "60",
        "--iterations",
        "4",
        "--delta-baseline",
        "60",
        "--clients",
        "1",
        "--throughput-requests",
        "4",
        "--data-dir",
        str(tmp_path / "bench"),
        data_dir=False,
    )
    assert run.code == 0, run.stderr
    lines = run.stdout.splitlines()
    for label in ("GET /health (floor)", "tools/call whoami (floor)"):
        row = next(line for line in lines if line.startswith(f"| {label}"))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1:3] == ["–", "–"] and all(float(cell) > 0 for cell in cells[3:5]), row
    multiples = next(line for line in lines if line.startswith("HTTP p99 as a multiple of the no-op"))
    for label in ("entity (title)", "recall (entity)", "delta (20 changes)"):
        assert f"{label} " in multiples and "×" in multiples.split(label, 1)[1].split(",")[0]
    assert "remember" not in multiples  # writes are not read against the floor


def test_bench_options_parse_and_refuse_a_zero_concurrency() -> None:
    import pytest

    from fleetmem.bench.runner import parser

    args = parser().parse_args(["--mixed", "--concurrency", "4", "--seconds", "2.5", "--pages", "200"])
    assert (args.mixed, args.concurrency, args.seconds, args.pages, args.embedder) == (True, 4, 2.5, ["200"], None)
    defaults = parser().parse_args([])
    assert (defaults.mixed, defaults.concurrency, defaults.seconds, defaults.server_threads) == (False, 32, 30.0, None)
    assert parser().parse_args(["--mixed", "--server-threads", "6"]).server_threads == 6
    with pytest.raises(SystemExit):
        parser().parse_args(["--mixed", "--concurrency", "0"])


def test_mixed_results_aggregate_calls_errors_and_percentiles_per_verb() -> None:
    from fleetmem.bench.mixed import MIX, MixedResult, format_mixed

    result = MixedResult(clients=3, seconds=2.0)
    for ms in (1.0, 2.0, 3.0, 4.0):
        result.record("recall", ms, None)
    result.record("remember", 9.0, "invalid_params")
    result.record("remember", 5.0, "transport:ReadTimeout")
    result.record("entity", 1.5, None)
    assert result.calls == 7 and result.rate() == 3.5
    assert dict(result.errors) == {"invalid_params": 1, "transport:ReadTimeout": 1}
    assert result.verbs["recall"].pct(0.5) in (2.0, 3.0) and result.verbs["recall"].pct(0.99) == 4.0
    table = format_mixed(result, pages=100, embedder="hash", threads=8)
    assert "7 calls, 4 calls/s, 2 errors" in table
    assert table[0].endswith("embedder `hash`, 8 server threads")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table if line.startswith("| ")}
    assert all(verb in rows for verb, _ in MIX)
    assert rows["remember"].startswith("| remember | 2 | 2 |") and rows["put_page"] == "| put_page | 0 | 0 | – | – |"
    assert rows["invalid_params"] == "| invalid_params | 1 |"


def test_a_short_mixed_run_over_real_mcp_sessions_counts_every_verb_without_errors(
    fm: Fleetmem, tmp_path: Path
) -> None:
    run = fm(
        "bench",
        "--mixed",
        "--concurrency",
        "3",
        "--seconds",
        "3",
        "--pages",
        "80",
        "--embedder",
        "hash",
        "--server-threads",
        "2",
        "--data-dir",
        str(tmp_path / "bench"),
        data_dir=False,
    )
    assert run.code == 0, run.stderr
    table = run.stdout
    assert "embedder `hash`, 2 server threads" in table
    summary = next(line for line in table.splitlines() if " calls/s, " in line)
    calls = int(summary.split(" calls,")[0].replace(",", ""))
    assert calls > 0 and summary.endswith(" 0 errors"), summary
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    verbs = {r[0].lstrip("| "): r for r in rows[1:]}
    assert set(verbs) == {"recall", "entity", "remember", "context_pack", "delta", "put_page"}
    assert sum(int(r[1].replace(",", "")) for r in verbs.values()) == calls
    assert all(r[2] == "0" for r in verbs.values())


def test_bench_quality_refuses_an_unknown_set_and_names_the_ones_it_has(fm: Fleetmem) -> None:
    run = fm("bench", "quality", "--set", "longest")
    assert run.code == 2
    assert "unknown set longest" in run.stderr
    assert "default, conversations, long-conversations" in run.stderr


def test_entity_names_bench_measures_both_arms_in_process_and_over_http(fm: Fleetmem) -> None:
    """A tiny `bench entity-names`: a row in process and a row against the `fleetmem serve` it starts
    on 127.0.0.1; every call answered without an error (the bench raises on one, exiting non-zero)."""
    run = fm("bench", "entity-names", "--pages", "24", "--rounds", "2", data_dir=False)
    assert run.code == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith(("| in process", "| MCP over HTTP"))]
    assert [r.split("|")[1].strip() for r in rows] == [
        "in process (SQLite, dispatch)",
        "MCP over HTTP (fleetmem serve)",
    ]
    for row in rows:
        singles, batch, ratio = (float(c) for c in row.split("|")[2:5])
        # the ratio is of the unrounded p50s: it agrees with the printed ones within their rounding
        assert singles > 0 and batch > 0
        assert abs(ratio - batch / singles) <= ratio * (0.05 / singles + 0.05 / batch) + 0.005


def test_a_tiny_floor_run_reports_every_call_with_ratios_to_health(fm: Fleetmem) -> None:
    """`bench floor` against a real `fleetmem serve` on 127.0.0.1: one row per call, each answered
    as expected (no errors), every ratio taken against /health of the same run. The shape only; the
    timings are printed, never compared."""
    run = fm("bench", "floor", "--calls", "8", "--rounds", "2", "--warmup", "2", "--json", data_dir=False)
    assert run.code == 0, run.stderr
    doc = run.json()
    rows = {row["call"]: row for row in doc["rows"]}
    assert list(rows) == ["GET /health", "tools/call whoami", "POST /v1/whoami", "tools/call get_page (miss)"]
    for row in rows.values():
        assert row["calls"] == 8 and row["errors"] == 0, row
        assert row["p50_ms"] > 0 and row["p99_ms"] >= row["p50_ms"]
        health = rows["GET /health"]
        assert row["p50_ratio"] == pytest.approx(row["p50_ms"] / health["p50_ms"], rel=0.05, abs=0.01)
        assert row["p99_ratio"] == pytest.approx(row["p99_ms"] / health["p99_ms"], rel=0.05, abs=0.01)
    assert rows["GET /health"]["p50_ratio"] == 1.0 and rows["GET /health"]["p99_ratio"] == 1.0
    table = fm("bench", "floor", "--calls", "2", "--rounds", "1", "--warmup", "0", data_dir=False)
    assert table.code == 0, table.stderr
    assert "| tools/call whoami | 2 |" in table.stdout and "| p50 / health |" in table.stdout


def test_recall_arms_bench_reaches_every_part_and_leaves_no_wrapper_behind(fm: Fleetmem, tmp_path: Path) -> None:
    """`bench recall-arms` on a tiny latency corpus: one row per part, each part really reached by the
    calls (its wrapper saw time), and the functions it wraps are the originals again afterwards. The
    shape only; the timings are printed, never compared."""
    from fleetmem.adapters.local.sqlite.search import SqliteSearchIndex
    from fleetmem.bench import recall_arms
    from fleetmem.memory import search

    owners = [SqliteSearchIndex if owner == recall_arms.INDEX else owner for _, owner, _ in recall_arms.PARTS]
    names = [name for _, _, name in recall_arms.PARTS]
    originals = [getattr(owner, name) for owner, name in zip(owners, names, strict=True)]
    report = recall_arms.run_arms(tmp_path / "arms", pages=60, runs=4, embedder="hash")
    assert [getattr(owner, name) for owner, name in zip(owners, names, strict=True)] == originals
    assert search.query_vector is originals[0] and SqliteSearchIndex._keyword is originals[2]
    rows = {row["part"]: row for row in report["rows"]}
    assert len(rows) == len(recall_arms.PARTS) + 2
    for label, _, _ in recall_arms.PARTS:
        assert rows[label]["calls_reached"] == 4, label
    run = fm(
        "bench", "recall-arms", "--pages", "60", "--runs", "2", "--data-dir", str(tmp_path / "cli"), data_dir=False
    )
    assert run.code == 0, run.stderr
    assert "| keyword arm (`_keyword`: FTS5 BM25) |" in run.stdout and "| whole call |" in run.stdout


def test_a_tiny_remember_pool_run_reports_one_row_per_entity_size(fm: Fleetmem) -> None:
    """`bench remember-pool` fills an entity per size and times remember calls on each; every call
    must save a new fact (the bench exits non-zero otherwise). The shape only; the timings are
    printed, never compared."""
    run = fm("bench", "remember-pool", "--sizes", "6,0", "--calls", "3", "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert doc["embedder"] == "hash-384"
    assert [(r["facts_on_entity"], r["pool"], r["calls"]) for r in doc["rows"]] == [(0, 0, 3), (6, 6, 3)]
    assert all(r["p90_ms"] >= r["p50_ms"] > 0 for r in doc["rows"])
    bad = fm("bench", "remember-pool", "--sizes", "ten")
    assert bad.code == 2 and "--sizes takes comma-separated whole numbers" in bad.stderr, bad.stderr
    assert "--sizes 0,100,500" in bad.stderr  # the fix
