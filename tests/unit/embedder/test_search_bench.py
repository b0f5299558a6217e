"""`fleetmem bench search` on a tiny store: every row is produced and hybrid search is not degraded.

Timings are printed by the benchmark, never asserted here.
"""

from __future__ import annotations

from pathlib import Path

from fleetmem.bench.search import render, run_search_bench


def test_a_tiny_search_benchmark_reports_every_row_with_hybrid_search(minilm_model_dir: Path, tmp_path: Path) -> None:
    result = run_search_bench(
        minilm_model_dir, pages=40, chunks_per_page=2, big_chunks=120, runs=3, data_dir=tmp_path, log=lambda _: None
    )
    assert result["recall_degraded"] is None
    assert result["recall_chunks"] == 80 and result["big_chunks"] == 120
    assert result["embedding"]["onnx_texts_per_s"] > 0
    table = render(result)
    for label in ("texts/s, batch 32 (onnxruntime)", "recall(query) p50 / p99, 80 chunks", "RSS growth loading 120"):
        assert label in table
    assert "degraded" not in table
