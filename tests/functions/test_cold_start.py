"""Cold start: every handler imports in a fresh interpreter; the report (printed, not asserted —
times depend on the machine) comes from `python -m infra.cold_start`."""

from __future__ import annotations

import pytest
from infra.cold_start import functions, measure


@pytest.mark.slow
def test_each_handler_imports_in_a_fresh_interpreter_and_only_the_edge_loads_the_mcp_sdk(capsys):
    rows = [measure(group, runs=1) for group in functions()]
    with capsys.disabled():
        print(
            "\ncold start (ms): "
            + ", ".join(f"{r['function']} {r['handler_ms']:.0f}+{r['first_call_ms']:.0f}" for r in rows)
        )
    assert {r["function"] for r in rows} >= {"mcp", "authorizer", "indexer", "heartbeat", "recall"}
    for r in rows:
        assert r["loads_mcp_sdk"] is (r["function"] == "mcp")
