"""What a million calls of each verb cost on a stage, from the code's own request counts.

The requests each verb makes are the ones `tests/aws/test_roundtrips.py` counts and writes to
`tests/aws/roundtrips.json` (every DynamoDB and OpenSearch request, every embedding call); this
module prices them with the unit prices below and renders the table of docs/deploy.md ("What a
million calls cost", between the COST markers). `tests/infra/test_cost.py` fails while the
document's table differs from the rendered one, so a change of the request counts, of the prices or
of the assumptions here shows up as a stale table. Re-render with:

    .venv/bin/python -m infra.cost

What is measured and what is assumed:

- request counts per call: measured (roundtrips.json);
- Lambda memory: the example deploy config's (`DeployConfig.size_for`);
- durations: the local stack's p50 (`DURATIONS_MS`, docs/benchmarks.md), not arm64 Lambda's;
- DynamoDB units per request: from the item sizes of docs/table-design.md (`READ_UNITS`,
  `WRITE_UNITS`; a fact's transaction and its later numbering are `FACT_WRITE_PARTS`);
- log bytes, traces sampled, tokens per embedding: stated estimates (`LOG_BYTES`, `XRAY_SAMPLED`,
  `EMBED_TOKENS`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ROUNDTRIPS = ROOT / "tests" / "aws" / "roundtrips.json"
DOC = ROOT / "docs" / "deploy.md"
BEGIN, END = "<!-- COST:BEGIN -->", "<!-- COST:END -->"

#: Where and when the unit prices below were read (on-demand, the public pricing pages).
PRICE_REGION = "us-east-1"
PRICE_DATE = "2026-12"

LAMBDA_PER_GB_S = 0.0000133334  # arm64
LAMBDA_PER_REQUEST = 0.20 / 1e6
APIGW_REST_PER_REQUEST = 3.50 / 1e6  # the first 333 million a month
DDB_PER_READ_UNIT = 0.125 / 1e6  # on-demand read request unit
DDB_PER_WRITE_UNIT = 0.625 / 1e6  # on-demand write request unit
BEDROCK_PER_TOKEN = 0.02 / 1e6  # Titan Text Embeddings V2, input tokens
XRAY_PER_TRACE = 5.00 / 1e6  # traces recorded
WAF_PER_REQUEST = 0.60 / 1e6
LOGS_PER_GB = 0.50  # CloudWatch Logs standard ingestion

#: Local stack p50 per call, `scripts/stack bench --pages 200 --iterations 40 --compare-v1`
#: (2026-12-02, docs/benchmarks.md): the edge waits for the verb, so it bills the whole call.
#: (edge ms, verb ms) by kind of call; the indexer's per stream record is an estimate (one
#: embedding call and one `_bulk`), not measured.
DURATIONS_MS: dict[str, tuple[float, float]] = {"read": (25.5, 16.5), "write": (34.6, 27.2)}
INDEXER_MS_PER_RECORD = 120.0
#: Tools that write (the rest read); a write's record reaches the indexer through the stream.
WRITES = frozenset({"remember", "forget"})

#: Read request units per request: eventually consistent, at most 4 KB read (½ unit), a
#: BatchGetItem of two such items, a Query of one 4 KB page. Strong reads would double them.
READ_UNITS: dict[str, float] = {"GetItem": 0.5, "Query": 0.5, "BatchGetItem": 1.0, "Scan": 0.5}

#: Write request units of a fact's write and of its numbering by the next reader (D21), from the
#: item sizes of docs/table-design.md ("Write units, on-demand": a fact with its 1024-dim vector is
#: ~5 KB; a transactional write costs 2 units per KB, a plain or index write 1).
FACT_WRITE_PARTS: tuple[tuple[str, float], ...] = (
    ("fact item, transactional", 10),
    ("decision record, transactional", 2),
    ("audit row, transactional", 2),
    ("by_time entry", 5),
    ("by_entity entry", 5),
    ("by_change entry", 1),
    ("numbering: fact item update, transactional", 10),
    ("numbering: by_change entry moves", 2),
    ("numbering: by_time entry (projects cs)", 5),
    ("numbering: counter, one per batch of 99", 2 / 99),
)
FACT_WRITE_UNITS = sum(units for _, units in FACT_WRITE_PARTS)
#: Write units per write request by (tool, operation): the fact transactions carry the whole
#: write above (a forget rewrites the fact and is numbered again like a new write); the numbering
#: a reader does is counted with the write that caused it, so a wake's transaction adds nothing;
#: the sequence counter and a session cursor are small items (1 unit, the cursor's index 1 more).
WRITE_UNITS: dict[tuple[str, str], float] = {
    ("remember", "TransactWriteItems"): FACT_WRITE_UNITS,
    ("forget", "TransactWriteItems"): FACT_WRITE_UNITS,
    ("remember", "UpdateItem"): 1,
    # D22: the write's receipt (about 1 KB) and its `by_owner` index entry
    ("remember", "PutItem"): 2,
    ("forget", "PutItem"): 2,
    ("delta", "TransactWriteItems"): 0,
    ("delta", "PutItem"): 2,
}
WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})

#: Input tokens of one embedding: a recall query, a remembered fact (estimates).
EMBED_TOKENS: dict[str, int] = {"recall": 20, "remember": 50}
#: Share of calls X-Ray records: the default sampling rule (the first request each second, then
#: 5 %) on a stage busy enough for the 5 % to dominate.
XRAY_SAMPLED = 0.05
#: CloudWatch Logs bytes per call (estimates from the line formats): the API's access-log line
#: (JSON, standard fields); per function invoke Lambda's platform start and report records
#: (JSON log format) and the function's own `tool call` line (Powertools JSON); per indexed record
#: the indexer's batch line. Execution logs are at ERROR level: nothing on success.
LOG_BYTES: dict[str, int] = {"access": 550, "platform": 750, "tool_call": 650, "indexer": 700}
#: The authorizer is left out: its answer is cached per credential (`api.authorizer_cache_ttl_s`).


@dataclass(frozen=True)
class CallCost:
    """One call's charges, in dollars, and what they were computed from."""

    case: str
    lambda_usd: float
    apigw_usd: float
    read_units: float
    write_units: float
    dynamodb_usd: float
    embedding_usd: float
    xray_usd: float
    waf_usd: float
    logs_usd: float
    search_requests: int

    @property
    def total_usd(self) -> float:
        return (
            self.lambda_usd
            + self.apigw_usd
            + self.dynamodb_usd
            + self.embedding_usd
            + self.xray_usd
            + self.waf_usd
            + self.logs_usd
        )


def _operations(measured: Mapping[str, Any]) -> Counter[str]:
    """'dynamodb:Query [step 1, lane 0]' -> Counter({'dynamodb:Query': n, ...})."""
    return Counter(op.split(" [", 1)[0] for op in measured["operations"])


def memory_gb() -> dict[str, float]:
    """Each function group's memory (GB) in the example deploy config."""
    from fleetmem.lambda_routes import function_group
    from fleetmem.memory.verbs import REGISTRY
    from infra.config import EXAMPLE, load_config

    cfg = load_config(default=EXAMPLE)
    groups = {"mcp", "indexer", *(function_group(t) for t in REGISTRY)}
    return {g: cfg.size_for(g).memory_mb / 1024 for g in groups}


def call_cost(case: str, measured: Mapping[str, Any], memory: Mapping[str, float]) -> CallCost:
    from fleetmem.lambda_routes import function_group

    tool = measured["tool"]
    ops = _operations(measured)
    write = tool in WRITES
    edge_ms, verb_ms = DURATIONS_MS["write" if write else "read"]
    gb_s = memory["mcp"] * edge_ms / 1000 + memory[function_group(tool)] * verb_ms / 1000
    invokes = 2
    if write:  # the stream brings the written item to the indexer (one record; batched at load)
        gb_s += memory["indexer"] * INDEXER_MS_PER_RECORD / 1000
        invokes += 1
    lambda_usd = gb_s * LAMBDA_PER_GB_S + invokes * LAMBDA_PER_REQUEST
    reads = writes = 0.0
    for name, n in ops.items():
        service, _, op = name.partition(":")
        if service != "dynamodb":
            continue
        if op in WRITE_OPERATIONS:
            writes += n * WRITE_UNITS[(tool, op)]
        else:
            reads += n * READ_UNITS[op]
    tokens = measured["embedding_calls"] * EMBED_TOKENS.get(tool, 0)
    log_bytes = LOG_BYTES["access"] + 2 * (LOG_BYTES["platform"] + LOG_BYTES["tool_call"])
    log_bytes += (LOG_BYTES["platform"] + LOG_BYTES["indexer"]) if write else 0
    return CallCost(
        case=case,
        lambda_usd=lambda_usd,
        apigw_usd=APIGW_REST_PER_REQUEST,
        read_units=reads,
        write_units=writes,
        dynamodb_usd=reads * DDB_PER_READ_UNIT + writes * DDB_PER_WRITE_UNIT,
        embedding_usd=tokens * BEDROCK_PER_TOKEN,
        xray_usd=XRAY_SAMPLED * XRAY_PER_TRACE,
        waf_usd=WAF_PER_REQUEST,
        logs_usd=log_bytes / 1e9 * LOGS_PER_GB,
        search_requests=sum(n for name, n in ops.items() if name.startswith("opensearch:")) + (1 if write else 0),
    )


def costs(data: Mapping[str, Any] | None = None) -> list[CallCost]:
    data = data if data is not None else json.loads(ROUNDTRIPS.read_text())
    memory = memory_gb()
    return [call_cost(case, m, memory) for case, m in data.items()]


#: The two mixes of calls the table ends with: (name, {case: share}).
MIXES: tuple[tuple[str, dict[str, float]], ...] = (
    ("read-heavy mix (90 % `recall (query)`, 10 % `remember`)", {"recall (query)": 0.9, "remember": 0.1}),
    ("write-heavy mix (30 % `recall (query)`, 70 % `remember`)", {"recall (query)": 0.3, "remember": 0.7}),
)


def _money(usd_per_call: float) -> str:
    return f"${usd_per_call * 1e6:,.2f}"


def table(data: Mapping[str, Any] | None = None) -> str:
    rows = costs(data)
    by_case = {r.case: r for r in rows}
    lines = [
        "| per 1M calls | Lambda | API Gateway | DynamoDB (read / write units per call) | embeddings | X-Ray "
        "| WAF | logs | **total** | search requests per call |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def line(name: str, r: Any, units: str, search: str) -> str:
        cells = (r.lambda_usd, r.apigw_usd, r.dynamodb_usd, r.embedding_usd, r.xray_usd, r.waf_usd, r.logs_usd)
        money = [_money(c) for c in cells]
        money[2] = f"{money[2]} ({units})"
        return f"| {name} | " + " | ".join(money) + f" | **{_money(r.total_usd)}** | {search} |"

    for r in rows:
        lines.append(line(r.case, r, f"{r.read_units:g} / {r.write_units:.1f}", str(r.search_requests)))
    for name, shares in MIXES:
        mixed = {
            f: sum(getattr(by_case[c], f) * s for c, s in shares.items())
            for f in ("lambda_usd", "apigw_usd", "dynamodb_usd", "embedding_usd", "xray_usd", "waf_usd", "logs_usd")
        }
        r = CallCost(case=name, read_units=0, write_units=0, search_requests=0, **mixed)
        reads = sum(by_case[c].read_units * s for c, s in shares.items())
        writes = sum(by_case[c].write_units * s for c, s in shares.items())
        search = sum(by_case[c].search_requests * s for c, s in shares.items())
        lines.append(line(f"**{name}**", r, f"{reads:g} / {writes:.1f}", f"{search:g}"))
    return "\n".join(lines)


def render(doc: str, data: Mapping[str, Any] | None = None) -> str:
    head, begin, rest = doc.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"docs/deploy.md lacks the {BEGIN} ... {END} markers")
    return f"{head}{BEGIN}\n{table(data)}\n{END}{tail}"


def rendered_block(doc: str) -> str:
    """The table between the markers as the document has it."""
    m = re.search(re.escape(BEGIN) + r"\n(.*?)\n" + re.escape(END), doc, re.S)
    return m.group(1) if m else ""


def main() -> None:
    DOC.write_text(render(DOC.read_text()))


if __name__ == "__main__":
    main()
