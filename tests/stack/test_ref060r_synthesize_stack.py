"""synthesize through the deployed functions (D30): the synthesize function runs with
`FLEETMEM_LLM=bedrock` and the stack's chat model id, and the unchanged `BedrockLLM` calls the
Bedrock stand-in's Converse, which answers with the scripted model of tests/llm_standin.py (no
language model can run here; tests/stack/stack.py says so). The page goes through the pages
function, DynamoDB's stream, the indexer and the OpenSearch node, as deployed."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.llm_standin import FABRICATED

from .conftest import mint
from .stack import LOCAL_CHAT_MODEL

pytestmark = [
    pytest.mark.stack,
    pytest.mark.dynamodb_local,
    pytest.mark.live_opensearch,
    pytest.mark.xdist_group("stack"),
]


def call(stack: Any, token: str, tool: str, args: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{stack.base_url}/v1/{tool}", json=args, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )


@pytest.fixture(scope="module")
def seeded(stack: Any) -> tuple[str, str]:
    token = mint(stack, ["read", "write"])
    slug = f"companies/stack-synth-{uuid.uuid4().hex[:6]}"
    body = "Stack Synth chose Stripe over Adyen because onboarding took two days."
    put = call(stack, token, "put_page", {"slug": slug, "content": body, "title": "Stack Synth"})
    assert put.status_code == 200, put.text
    return token, slug


def test_a_fabricated_quote_is_marked_through_the_deployed_function(stack, seeded):
    token, slug = seeded
    before = stack.bedrock.converse_calls
    got = call(stack, token, "synthesize", {"question": "standin-fabricate: why did Stack Synth choose Stripe?"})
    assert got.status_code == 200, got.text + stack.function_log("synthesize")
    body = got.json()
    assert stack.bedrock.converse_calls == before + 1
    assert body["synthesis_status"] == "ok" and slug in body["sources"]
    assert all(isinstance(s, str) for s in body["sources"])
    assert body["quote_check"] == {"grounded": 1, "repaired": 0, "unverified": 1}
    assert body["unverified_quotes"] == [{"text": FABRICATED, "reason": "not_in_evidence"}]
    assert f"{FABRICATED} [unverified]" in body["answer"] and body["warnings"] == ["QUOTE_NOT_IN_EVIDENCE"]
    cost = body["cost"]
    assert cost["model"] == LOCAL_CHAT_MODEL and cost["usd_estimate"] is None  # no price known for it
    assert cost["input_tokens"] > 0 and cost["output_tokens"] > 0  # the Converse reply's usage


def test_a_reply_cut_at_max_tokens_or_a_throttled_model_falls_back_to_the_pages(stack, seeded):
    token, slug = seeded
    cut = call(stack, token, "synthesize", {"question": "standin-truncate: why did Stack Synth choose Stripe?"}).json()
    assert (cut["synthesis_status"], cut["warnings"]) == ("extractive_fallback", ["LLM_OUTPUT_TRUNCATED"])
    assert cut["cost"]["output_tokens"] is not None
    throttled = call(stack, token, "synthesize", {"question": "standin-error: why did Stack Synth choose Stripe?"})
    body = throttled.json()
    assert (body["synthesis_status"], body["warnings"]) == ("extractive_fallback", ["LLM_CALL_FAILED: rate_limited"])
    assert slug in body["sources"]
