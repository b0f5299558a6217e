"""Schemathesis against a fresh `fleetmem serve` (subprocess, 127.0.0.1, free port), from the OpenAPI
document the registry generates (`fleetmem.transport.http_api.openapi_document`), with one token
per scope tier: `read`, `write` (read+write) and `admin` (read+write+admin).

Every operation gets positive and negative generated cases (bounded: `MAX_EXAMPLES` per operation
and tier, derandomized so a failure reproduces), then a stateful run over the document's links
(remember -> forget by the returned id, put_page -> get_page by the returned slug). Checks on every
response: Schemathesis's own (no 5xx, status documented, body valid against its schema, negative
data refused, auth not ignored) and ours: every 4xx is the error envelope with a populated
suggestion and `X-Correlation-Id`, and a refused call left the store exactly as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode

from fleetmem.contract.envelope import ErrorEnvelope
from fleetmem.contract.status import CORRELATION_HEADER
from fleetmem.transport.openapi import openapi_document
from tests.conformance.test_conformance_local import Server, mint, start_server

#: Generated cases per operation, generation mode and token tier (kept small: the suite's budget).
MAX_EXAMPLES = 6
SCOPE_TIERS = {"read": "read", "write": "read,write", "admin": "read,write,admin"}

schema = schemathesis.openapi.from_dict(openapi_document("full"))
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    max_examples=MAX_EXAMPLES,
    deterministic=True,
)
schema.config.phases.update(phases=["examples", "fuzzing"])
# Not checked: a tool's own rules go beyond its schema (a blank provenance, a page without a title
# are valid JSON Schema but refused), and the tools are lenient where their schemas are strict
# (list_pages/recall clamp `limit` instead of refusing 0 or 500; an explicit null `budget_tokens`
# means "no budget"), so "schema-valid is accepted" and "schema-invalid is refused" do not hold
# by design; every answer is still checked against its documented status and schema.
# `not_a_server_error` is ours (check_answer): 503 `unavailable` with Retry-After is synthesize's
# documented answer on a server without an LLM; any other 5xx fails.
EXCLUDED = [
    schemathesis.checks.positive_data_acceptance,
    schemathesis.checks.negative_data_rejection,
    schemathesis.checks.not_a_server_error,
]

FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)

STATS: dict[str, Any] = {"cases": 0, "refused": 0, "started": None}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, str]]]:
    gen = start_server(tmp_path_factory.mktemp("openapi-fuzz"), surface="full", embedder="hash")
    server = next(gen)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETMEM_")}
    tokens = {tier: mint(env, server.data_dir, scopes, f"fuzz-{tier}") for tier, scopes in SCOPE_TIERS.items()}
    STATS["started"] = time.monotonic()
    try:
        yield server, tokens
    finally:
        if STATS["started"] is not None:
            elapsed = time.monotonic() - STATS["started"]
            print(f"\nschemathesis: {STATS['cases']} cases ({STATS['refused']} refused) in {elapsed:.1f} s")
        gen.close()


def base_of(server: Server) -> str:
    return server.url.removesuffix("/mcp")


def fingerprint(data_dir: Path) -> str:
    """What a write changes (facts, pages, links, aliases, timeline, cursors, idempotency, audit),
    read without touching the server; `last_retrieved_at` is left out (reads stamp it)."""
    queries = (
        "SELECT tenant, fact_id, text, expired_at, superseded_by FROM facts ORDER BY 1, 2",
        "SELECT tenant, slug, title, body, frontmatter, updated_at FROM pages ORDER BY 1, 2",
        "SELECT * FROM links ORDER BY 1, 2, 3",
        "SELECT * FROM aliases ORDER BY 1, 2, 3",
        "SELECT * FROM timeline ORDER BY 1, 2, 3",
        "SELECT tenant, client_id, session_id, since, slug, version FROM cursors ORDER BY 1, 2, 3",
        "SELECT tenant, client_id, verb, key, result FROM idempotency ORDER BY 1, 2, 3, 4",
        "SELECT count(*) FROM audit",
    )
    db = next(data_dir.glob("*.db"), None) or next(data_dir.rglob("*.sqlite*"))
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        digest = hashlib.sha256()
        for q in queries:
            digest.update(json.dumps(con.execute(q).fetchall(), default=repr).encode())
        return digest.hexdigest()
    finally:
        con.close()


def header(response: Any, name: str) -> str | None:
    values = response.headers.get(name.lower()) or [None]  # Schemathesis: lower-cased, lists
    return values[0]


def check_answer(response: Any, *, before: str | None, data_dir: Path) -> None:
    STATS["cases"] += 1
    if response.status_code == 503:
        assert response.json()["code"] == "unavailable" and header(response, "Retry-After"), response.text
    else:
        assert response.status_code < 500, response.text
    assert header(response, CORRELATION_HEADER), "every /v1 answer names its correlation id"
    if 400 <= response.status_code < 500:
        STATS["refused"] += 1
        envelope = ErrorEnvelope.model_validate(response.json())
        assert envelope.suggestion.strip()
        assert envelope.correlation_id == header(response, CORRELATION_HEADER)
        if before is not None:
            assert fingerprint(data_dir) == before, f"a refused call ({envelope.code}) changed the store"


@pytest.mark.parametrize("tier", list(SCOPE_TIERS))
@schema.include(path_regex=r"^/v1/(?!tools$|openapi\.json$)").parametrize()
@FUZZ
def test_every_tool_operation_answers_within_its_contract(served: Any, tier: str, case: Any) -> None:
    server, tokens = served
    writes = bool(case.operation.definition.raw.get("x-fleetmem-writes"))
    before = fingerprint(server.data_dir) if writes else None
    response = case.call_and_validate(
        base_url=base_of(server), headers={"Authorization": f"Bearer {tokens[tier]}"}, excluded_checks=EXCLUDED
    )
    check_answer(response, before=before, data_dir=server.data_dir)


@schema.include(path_regex=r"^/v1/(tools|openapi\.json)$").parametrize()
@FUZZ
def test_the_tool_list_and_the_document_answer_within_their_contract(served: Any, case: Any) -> None:
    server, tokens = served
    response = case.call_and_validate(
        base_url=base_of(server), headers={"Authorization": f"Bearer {tokens['read']}"}, excluded_checks=EXCLUDED
    )
    check_answer(response, before=None, data_dir=server.data_dir)


def test_the_served_document_is_the_generated_one(served: Any) -> None:
    server, tokens = served
    base = base_of(server)
    got = httpx.get(f"{base}/v1/openapi.json", headers={"Authorization": f"Bearer {tokens['read']}"})
    assert got.status_code == 200
    assert got.json() == openapi_document("full", server_url=base)


def test_stateful_links_remember_then_forget_and_put_page_then_get_page(served: Any) -> None:
    server, tokens = served
    base = base_of(server)
    headers = {"Authorization": f"Bearer {tokens['admin']}"}

    stateful = schemathesis.openapi.from_dict(openapi_document("full"))

    class Machine(stateful.as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": base, "headers": headers}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            case.validate_response(response, excluded_checks=EXCLUDED)
            check_answer(response, before=None, data_dir=server.data_dir)

    links = {
        (src, name)
        for src, path in (("remember", "/v1/remember"), ("put_page", "/v1/put_page"))
        for name in stateful.raw_schema["paths"][path]["post"]["responses"]["200"].get("links", {})
    }
    assert links == {("remember", "ForgetRemembered"), ("put_page", "GetPutPage")}
    Machine.run(
        settings=settings(
            max_examples=8,
            stateful_step_count=4,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
    )
