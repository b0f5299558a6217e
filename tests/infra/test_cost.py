"""The cost table of docs/deploy.md ("What a million calls cost") is the one `infra/cost.py`
renders from the measured request counts (tests/aws/roundtrips.json) and its prices, and its write
units agree with docs/table-design.md's accounting. Re-render with `.venv/bin/python -m infra.cost`."""

from __future__ import annotations

import copy
import json
import re

from infra import cost


def test_the_deploy_guide_shows_the_table_the_cost_module_renders() -> None:
    doc = cost.DOC.read_text()
    assert cost.rendered_block(doc), "docs/deploy.md lacks the COST markers"
    assert cost.rendered_block(doc) == cost.table(), "stale cost table: run .venv/bin/python -m infra.cost"


def test_a_changed_request_count_changes_the_rendered_table() -> None:
    data = json.loads(cost.ROUNDTRIPS.read_text())
    more = copy.deepcopy(data)
    more["remember"]["operations"].append("dynamodb:Query [step 3]")
    before = {r.case: r for r in cost.costs(data)}["remember"]
    after = {r.case: r for r in cost.costs(more)}["remember"]
    assert after.read_units == before.read_units + cost.READ_UNITS["Query"]
    assert cost.table(more) != cost.table(data)


def test_every_measured_request_is_priced() -> None:
    """A verb that starts making a kind of request the module has no units for fails here, not
    silently at $0."""
    data = json.loads(cost.ROUNDTRIPS.read_text())
    for case, measured in data.items():
        for op in measured["operations"]:
            service, _, name = op.split(" [", 1)[0].partition(":")
            if service == "dynamodb" and name in cost.WRITE_OPERATIONS:
                assert (measured["tool"], name) in cost.WRITE_UNITS, (case, op)
            elif service == "dynamodb":
                assert name in cost.READ_UNITS, (case, op)
            else:
                assert service == "opensearch", (case, op)


def test_a_facts_write_units_agree_with_the_table_design() -> None:
    """docs/table-design.md states a fact's write as about N WCU (D21 accounting); the cost module's
    parts of that write come to it within 10 %."""
    design = (cost.ROOT / "docs" / "table-design.md").read_text()
    stated = re.search(r"about (\d+) WCU for an uncontended", design) or re.search(r"≈ (\d+) WCU each", design)
    assert stated, "docs/table-design.md no longer states a fact's write units"
    assert abs(cost.FACT_WRITE_UNITS - int(stated.group(1))) <= 0.1 * int(stated.group(1))
    remember = {r.case: r for r in cost.costs()}["remember"]
    assert remember.write_units >= cost.FACT_WRITE_UNITS
