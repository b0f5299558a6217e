"""recall's reference 0.60 reads on the CLI (the trusted-local lane, D31): `--since` ANDed with
`--session-id`, and `--budget-policy` with its packing report in JSON and in the text rendering."""

from __future__ import annotations

from typing import Any

from tests.cli.conftest import Fleetmem


def _json(fm: Fleetmem, *args: str) -> Any:
    run = fm(*args, "--json")
    assert run.code == 0, run.stderr
    return run.json()


def test_the_cli_takes_since_with_session_id_and_budget_policy(fm: Fleetmem) -> None:
    _json(fm, "remember", "The gate code changed", "--provenance", "chat", "--session-id", "s-cli")
    assert len(_json(fm, "recall", "--session-id", "s-cli")["facts"]) == 1
    assert _json(fm, "recall", "--session-id", "s-cli", "--since", "2999-01-01T00:00:00Z")["facts"] == []
    packed = _json(fm, "recall", "--session-id", "s-cli", "--budget-tokens", "1", "--budget-policy", "query_first")
    assert {k: packed["budget_packing"][k] for k in ("policy", "applied", "reason")} == {
        "policy": "facts_first",
        "applied": False,
        "reason": "no_query",
    }
    text = fm("recall", "--session-id", "s-cli", "--budget-tokens", "100", "--budget-policy", "facts_first")
    assert text.code == 0, text.stderr
    assert "packing: facts_first (applied: packed); facts kept 1/1, results kept 0/0" in text.stdout
    bad = fm("recall", "--budget-policy", "pages_first", "--json")
    assert bad.code != 0 and "budget_policy" in bad.stdout + bad.stderr
