"""`fleetmem bench search` on a tiny store: every row is produced and hybrid search is not degraded.

Timings are printed by the benchmark, never asserted here.
"""

from __future__ import annotations

from pathlib import Path

from fleetmem.bench.search import named_questions, render, run_search_bench
from fleetmem.memory.ranking import topic


def test_a_tiny_search_benchmark_reports_every_row_with_hybrid_search(minilm_model_dir: Path, tmp_path: Path) -> None:
    result = run_search_bench(
        minilm_model_dir, pages=40, chunks_per_page=2, big_chunks=120, runs=3, data_dir=tmp_path, log=lambda _: None
    )
    assert result["recall_degraded"] is None
    assert result["recall_chunks"] == 80 and result["big_chunks"] == 120
    assert result["embedding"]["onnx_texts_per_s"] > 0
    table = render(result)
    assert result["recall_named"]["p50_ms"] > 0
    labels = (
        "texts/s, batch 32 (onnxruntime)",
        "recall(query) p50 / p99, 80 chunks",
        "recall(question naming someone) p50 / p99, 80 chunks",
        "x the query's p50",
        "RSS growth loading 120",
    )
    for label in labels:
        assert label in table
    assert "degraded" not in table


def test_the_named_questions_each_search_a_topic_without_the_name() -> None:
    """The second kind of query costs what a question naming someone costs: one more search."""
    for question in named_questions(20):
        about = topic(question)
        assert about is not None and about.startswith("What did say about "), question


def test_the_cli_seeds_where_data_dir_says(minilm_model_dir: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """`scripts/bench search --data-dir DIR` keeps the seeded store in DIR for the next run (the
    CLI's own --data-dir option used to swallow it, and every run seeded afresh)."""
    from fleetmem.cli import main

    monkeypatch.setenv("FLEETMEM_MODEL_DIR", str(minilm_model_dir))
    args = ["bench", "search", "--pages", "20", "--chunks-per-page", "1", "--big-chunks", "0", "--runs", "2"]
    assert main([*args, "--data-dir", str(tmp_path)]) == 0
    assert (tmp_path / "search-20").is_dir()
    assert "recall(question naming someone)" in capsys.readouterr().out
