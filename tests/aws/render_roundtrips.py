"""Render tests/aws/roundtrips.json (written by tests/aws/test_roundtrips.py) as the round-trip
table of docs/table-design.md, between the ROUNDTRIPS markers.

    .venv/bin/pytest tests/aws/test_roundtrips.py && .venv/bin/python tests/aws/render_roundtrips.py
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "roundtrips.json"
DOC = ROOT / "docs" / "table-design.md"
BEGIN, END = "<!-- ROUNDTRIPS:BEGIN -->", "<!-- ROUNDTRIPS:END -->"


def table(data: dict) -> str:
    lines = [
        "| verb (case) | sequential round trips | budget | API calls | embedding calls | calls by step and lane |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for case, m in data.items():
        trips = " **over**" if m["sequential_round_trips"] > m["budget"] else ""
        embeds = " **over**" if m["embedding_calls"] > m["embedding_budget"] else ""
        ops = ", ".join(m["operations"]) or "none"
        lines.append(
            f"| {case} | {m['sequential_round_trips']}{trips} | ≤ {m['budget']} | {m['api_calls']} | "
            f"{m['embedding_calls']}{embeds} (≤ {m['embedding_budget']}) | {ops} |"
        )
    return "\n".join(lines)


def main() -> None:
    data = json.loads(DATA.read_text())
    doc = DOC.read_text()
    head, _, rest = doc.partition(BEGIN)
    _, _, tail = rest.partition(END)
    DOC.write_text(f"{head}{BEGIN}\n{table(data)}\n{END}{tail}")


if __name__ == "__main__":
    main()
