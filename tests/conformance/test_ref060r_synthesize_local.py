"""The `reference 0.60 reads: synthesize` conformance section (and the core synthesize case) against a
real `fleetmem serve` with a configured model: `FLEETMEM_LLM=openai` pointed at the scripted chat
model of tests/llm_standin.py on 127.0.0.1, which stands in for a language model (none can run
here). The keyless run of the same cases is the full-surface run in test_conformance_local.py.
Also /v1/synthesize and the CLI's `synthesize` on the same configuration."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fleetmem.conformance import run as run_conformance
from tests.cli.conftest import fleetmem_command
from tests.conformance.test_conformance_local import Server, failures, start_server
from tests.llm_standin import FABRICATED, ChatStandIn

SECTION = "reference 0.60 reads: synthesize"


@pytest.fixture(scope="module")
def model() -> Iterator[ChatStandIn]:
    stand_in = ChatStandIn()
    yield stand_in
    stand_in.stop()


def model_env(model: ChatStandIn) -> dict[str, str]:
    return {"FLEETMEM_LLM": "openai", "FLEETMEM_LLM_BASE_URL": model.base_url, "FLEETMEM_LLM_MODEL": model.MODEL}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model: ChatStandIn) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("conformance-synth")
    yield from start_server(tmp, surface="full", embedder="hash", extra_env=model_env(model))


def test_the_synthesize_cases_pass_against_a_configured_model_in_both_eras(server: Server, model: ChatStandIn) -> None:
    before = list(model.calls)
    report = run_conformance(
        server.url,
        server.token,
        json=True,
        read_token=server.read_token,
        surface="full",
        sections=(SECTION,),
        log=lambda _line: None,
    )
    assert report["failed"] == 0, failures(report)
    assert report["skipped"] == 0
    assert {c["era"] for c in report["cases"]} == {"legacy", "auto"}
    assert report["passed"] == 2 * 3
    # the cases were answered by the model, not passed through `unavailable`
    asked = model.calls[len(before) :]
    assert sum("standin-fabricate" in q for q in asked) == 2
    assert sum("standin-truncate" in q for q in asked) == 2


def test_the_core_synthesize_case_passes_with_a_model_answering(server: Server, model: ChatStandIn) -> None:
    before = len(model.calls)
    report = run_conformance(
        server.url, server.token, json=True, surface="full", sections=("core",), eras=("auto",), log=lambda _l: None
    )
    case = next(c for c in report["cases"] if c["id"] == "synthesize.answers_or_is_cleanly_unavailable")
    assert case["status"] == "passed", case["detail"]
    assert len(model.calls) > before


def test_v1_synthesize_answers_with_slug_sources_and_the_quote_check(server: Server) -> None:
    base = server.url.removesuffix("/mcp")
    headers = {"Authorization": f"Bearer {server.token}"}
    with httpx.Client(timeout=60) as http:
        put = http.post(
            f"{base}/v1/put_page",
            json={"slug": "companies/v1-acme", "content": "V1 Acme picked Stripe over Adyen for onboarding speed."},
            headers=headers,
        )
        assert put.status_code == 200, put.text
        got = http.post(
            f"{base}/v1/synthesize", json={"question": "standin-fabricate: V1 Acme Stripe"}, headers=headers
        )
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["synthesis_status"] == "ok" and all(isinstance(s, str) for s in body["sources"])
    assert "companies/v1-acme" in body["sources"]
    assert body["unverified_quotes"] == [{"text": FABRICATED, "reason": "not_in_evidence"}]
    assert "QUOTE_NOT_IN_EVIDENCE" in body["warnings"]


def test_the_cli_prints_slug_sources_and_the_status(tmp_path: Path, model: ChatStandIn) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETMEM_")}
    env.update(model_env(model), FLEETMEM_EMBEDDER="hash", FLEETMEM_DATA_DIR=str(tmp_path / "data"))
    page = tmp_path / "acme.md"
    page.write_text("CLI Acme picked Stripe over Adyen for onboarding speed.\n")
    run = [*fleetmem_command()]
    subprocess.run([*run, "put-page", "companies/cli-acme", "--file", str(page)], env=env, check=True, timeout=120)
    out = subprocess.run(
        [*run, "synthesize", "Why did CLI Acme pick Stripe?", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert body["sources"] == ["companies/cli-acme"] and body["synthesis_status"] == "ok"
    assert body["source_pages"] == [{"slug": "companies/cli-acme", "title": body["source_pages"][0]["title"]}]
