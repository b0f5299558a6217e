"""synthesize as the reference 0.60 answers it (docs/protocol.md D30), on both adapter sets: SQLite,
and DynamoDB Local + the OpenSearch node (tests/unit/domain/delta_backends.py).

The model is the one thing that cannot run here: `tests/llm_standin.py`'s scripted chat model
stands in for it, served over HTTP on 127.0.0.1 and reached through the real OpenAI-compatible
adapter (`ChatCompletionsLLM`), so the request, the reply's usage and `finish_reason` go over
the wire as from Ollama or vLLM. The embedder is the deterministic HashEmbedder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from tests.llm_standin import FABRICATED, ChatStandIn, near

from fleetmem.adapters.local.chat_llm import ChatCompletionsLLM
from fleetmem.adapters.local.hash_embedder import HashEmbedder
from fleetmem.config import LlmSettings, Settings
from fleetmem.errors import VerbError
from fleetmem.memory.indexing import doc_for_fact, docs_for_page, embed_docs
from fleetmem.memory.verbs import remember, synthesize
from fleetmem.models import Caller, Page
from fleetmem.ports import CallContext

CTX = CallContext("ref060r-synthesize")
BODY = "Acme chose Stripe over Adyen because onboarding took two days."
EXACT = "Acme chose Stripe over Adyen because"  # the stand-in quotes the first six words

#: The reference's response schema for synthesize (gbrain src/core/verbs.ts, RESPONSE_SCHEMAS.synthesize,
#: with SYNTHESIS_STATUS_ENUM as 0.60 has it), written out by hand, plus the quote-check fields the
#: additions file lists as schema-declared (answer_raw, quote_check, unverified_quotes).
REFERENCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["answer", "sources", "cost", "protocol_version"],
    "properties": {
        "protocol_version": {"type": "integer", "const": 1},
        "answer": {"type": "string"},
        "sources": {"type": "array", "items": {"type": "string"}},
        "gaps": {"type": "array", "items": {"type": "string"}},
        "cost": {
            "type": "object",
            "required": ["model", "input_tokens", "output_tokens", "usd_estimate"],
            "properties": {
                "model": {"type": "string"},
                "input_tokens": {"type": ["integer", "null"]},
                "output_tokens": {"type": ["integer", "null"]},
                "usd_estimate": {"type": ["number", "null"]},
            },
        },
        "synthesis_status": {
            "type": "string",
            "enum": [
                "ok",
                "empty_answer",
                "not_json",
                "output_truncated",
                "no_llm",
                "model_unusable",
                "llm_error",
                "extractive_fallback",
            ],
        },
        "pages_gathered": {"type": "integer"},
        "takes_gathered": {"type": "integer"},
        "warnings": {"type": "array", "items": {"type": "string"}},
        "answer_raw": {"type": "string"},
        "quote_check": {
            "type": "object",
            "required": ["grounded", "repaired", "unverified"],
            "properties": {k: {"type": "integer"} for k in ("grounded", "repaired", "unverified")},
        },
        "unverified_quotes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["text", "reason"],
                "properties": {"text": {"type": "string"}, "reason": {"type": "string"}},
            },
        },
    },
}
#: fleetmem's one addition beside the reference's fields (D30): the titles that `sources` used to carry
OWN_FIELDS = {"source_pages"}


@pytest.fixture(scope="module")
def model() -> Iterator[ChatStandIn]:
    stand_in = ChatStandIn()
    yield stand_in
    stand_in.stop()


@pytest.fixture
def bdeps_swap(model: ChatStandIn) -> dict[str, Any]:
    settings = Settings(llm="openai", chat=LlmSettings(base_url=model.base_url, model=ChatStandIn.MODEL))
    return {"embedder": HashEmbedder(dim=8), "llm": ChatCompletionsLLM(settings)}


def _caller(d: Any) -> Caller:
    return Caller(tenant=d.test_tenant, client_id="agent-a", scopes=frozenset({"read", "write"}), remote=True)


def seed(d: Any, slug: str = "companies/acme", title: str = "Acme", body: str = BODY) -> None:
    now = d.clock.now()
    page = Page(tenant=d.test_tenant, slug=slug, title=title, body=body, created_at=now, updated_at=now)
    d.pages.put(page)
    docs, _ = embed_docs(d, docs_for_page(page))
    d.search.upsert(docs)
    if d.backend != "sqlite":  # the stream indexer's work on AWS, visible after a refresh
        d.search.client.indices.refresh(index=d.search.index)


def note(d: Any, fact: str) -> None:
    saved = remember.run(d, _caller(d), remember.RememberParams(fact=fact, provenance="p"), CTX).body
    if d.backend != "sqlite":  # the stream indexer's work on AWS
        d.search.upsert([doc_for_fact(d.facts.get(d.test_tenant, saved["id"]))])
        d.search.client.indices.refresh(index=d.search.index)


def ask(d: Any, question: str) -> dict[str, Any]:
    return synthesize.run(d, _caller(d), synthesize.SynthesizeParams(question=question), CTX).body


def conforms(body: dict[str, Any]) -> dict[str, Any]:
    jsonschema.validate(body, REFERENCE_SCHEMA)
    assert set(body) <= set(REFERENCE_SCHEMA["properties"]) | OWN_FIELDS, set(body)
    return body


def test_a_composed_answer_is_ok_with_slug_sources_counts_and_the_models_own_usage(bdeps, model):
    seed(bdeps)
    note(bdeps, "Acme pays Stripe monthly")
    body = conforms(ask(bdeps, "Why did Acme choose Stripe over Adyen?"))
    reply = model.replies[-1]
    assert body["synthesis_status"] == "ok"
    assert body["sources"] == ["companies/acme"]
    assert body["source_pages"] == [{"slug": "companies/acme", "title": "Acme"}]
    assert (body["pages_gathered"], body["takes_gathered"], body["warnings"]) == (1, 1, [])
    assert body["cost"] == {
        "model": ChatStandIn.MODEL,
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "usd_estimate": None,
    }
    assert f'"{EXACT}"' in body["answer"] and body["answer"] == body["answer_raw"]
    assert body["quote_check"] == {"grounded": 1, "repaired": 0, "unverified": 0}
    assert body["unverified_quotes"] == []


def test_a_near_quote_is_replaced_with_the_evidences_wording(bdeps):
    seed(bdeps)
    body = conforms(ask(bdeps, "standin-near: why Stripe over Adyen?"))
    assert f'"{near(EXACT)}"' in body["answer_raw"]
    assert f'"{EXACT}"' in body["answer"] and near(EXACT) not in body["answer"]
    assert body["quote_check"] == {"grounded": 0, "repaired": 1, "unverified": 0}
    assert body["warnings"] == []


def test_a_quote_in_no_evidence_loses_its_marks_and_is_listed_as_unverified(bdeps):
    seed(bdeps)
    body = conforms(ask(bdeps, "standin-fabricate: why Stripe over Adyen?"))
    assert f'"{FABRICATED}"' in body["answer_raw"]
    assert f"{FABRICATED} [unverified]" in body["answer"] and f'"{FABRICATED}' not in body["answer"]
    assert f'"{EXACT}"' in body["answer"]
    assert body["quote_check"] == {"grounded": 1, "repaired": 0, "unverified": 1}
    assert body["unverified_quotes"] == [{"text": FABRICATED, "reason": "not_in_evidence"}]
    assert body["warnings"] == ["QUOTE_NOT_IN_EVIDENCE"]


def test_the_owner_can_turn_the_quote_check_off(bdeps):
    seed(bdeps)
    bdeps.policy = dataclasses.replace(bdeps.policy, quote_check=False)
    body = conforms(ask(bdeps, "standin-fabricate: why Stripe over Adyen?"))
    assert f'"{FABRICATED}"' in body["answer"]
    assert not {"answer_raw", "quote_check", "unverified_quotes"} & set(body)
    assert body["warnings"] == []


def test_an_answer_without_quotes_has_no_quote_fields_and_a_plain_reply_warns_not_json(bdeps):
    seed(bdeps)
    body = conforms(ask(bdeps, "standin-plain: why Stripe over Adyen?"))
    assert body["synthesis_status"] == "ok"
    assert body["answer"] == "The memory answers this without any quotation."
    assert not {"answer_raw", "quote_check", "unverified_quotes"} & set(body)
    assert body["warnings"] == ["LLM_OUTPUT_NOT_JSON"]


def test_a_truncated_reply_with_pages_is_the_extractive_fallback_with_the_tokens_spent(bdeps, model):
    seed(bdeps)
    body = conforms(ask(bdeps, "standin-truncate: why Stripe over Adyen?"))
    reply = model.replies[-1]
    assert body["synthesis_status"] == "extractive_fallback"
    assert body["warnings"] == ["LLM_OUTPUT_TRUNCATED"]
    assert BODY in body["answer"] and body["sources"] == ["companies/acme"]
    assert (body["cost"]["input_tokens"], body["cost"]["output_tokens"]) == (reply.input_tokens, reply.output_tokens)
    assert "answer_raw" not in body


def test_an_empty_answer_is_the_extractive_fallback(bdeps):
    seed(bdeps)
    body = conforms(ask(bdeps, "standin-empty: why Stripe over Adyen?"))
    assert (body["synthesis_status"], body["warnings"]) == ("extractive_fallback", ["SYNTHESIS_EMPTY_ANSWER"])


def test_a_provider_failure_with_pages_falls_back_and_names_the_failure_class(bdeps):
    seed(bdeps)
    body = conforms(ask(bdeps, "standin-error: why Stripe over Adyen?"))
    assert body["synthesis_status"] == "extractive_fallback"
    assert body["warnings"] == ["LLM_CALL_FAILED: provider_error"]
    assert body["cost"] == {
        "model": ChatStandIn.MODEL,
        "input_tokens": None,
        "output_tokens": None,
        "usd_estimate": None,
    }


def test_a_compose_failure_with_no_page_gathered_is_unavailable_naming_the_code(bdeps):
    note(bdeps, "Stripe truncate fact")
    with pytest.raises(VerbError) as err:
        ask(bdeps, "standin-truncate: Stripe truncate fact")
    assert err.value.code == "unavailable"
    assert err.value.message == "retrieved 0 pages; compose failed: LLM_OUTPUT_TRUNCATED"
    assert err.value.fix is not None and err.value.fix.mcp == {
        "tool": "recall",
        "arguments": {"query": "standin-truncate: Stripe truncate fact"},
    }


def test_nothing_gathered_makes_no_model_call_and_still_conforms(bdeps, model):
    before = len(model.calls)
    body = conforms(ask(bdeps, "What is the capital of Atlantis?"))
    assert len(model.calls) == before
    assert (body["pages_gathered"], body["takes_gathered"], body["sources"]) == (0, 0, [])
    assert body["cost"] == {"model": ChatStandIn.MODEL, "input_tokens": 0, "output_tokens": 0, "usd_estimate": 0.0}
