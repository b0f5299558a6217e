"""Each tool function's handler on its events/ files: the edge's invoke payload and direct
`POST /v1/<tool>` events, over AWS adapters on moto (DynamoDB) and the real OpenSearch node, with the
HashEmbedder standing in for Bedrock."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from fleetmem.lambda_routes import groups
from fleetmem.memory.verbs import REGISTRY
from fleetmem.protocol import VERB_NAMES
from fleetmem.tokens import hash_token

from .conftest import ROOT, call, load_event

pytestmark = pytest.mark.usefixtures("deps")


def body_of(response: dict) -> dict:
    return json.loads(response["body"])


def remember(**overrides) -> str:
    event = load_event("remember", "invoke")
    event["arguments"] = {**event["arguments"], **overrides}
    out = call("remember", event)
    assert out["is_error"] is False
    return out["body"]["id"]


def put_acme_page() -> None:
    out = call("pages", load_event("pages", "invoke_put_page"))
    assert out["is_error"] is False


def test_there_is_one_handler_and_an_events_folder_per_function_the_registry_implies():
    for group in groups(REGISTRY):
        assert (ROOT / "functions" / group / "handler.py").is_file()
        assert any((ROOT / "events" / group).glob("*.json"))
    assert set(VERB_NAMES) <= set(groups(REGISTRY))


def test_remember_from_the_edge_payload_stores_the_fact_and_reports_pending_search():
    out = call("remember", load_event("remember", "invoke"))
    assert out["is_error"] is False
    assert out["body"]["status"] == "inserted"
    assert out["body"]["search_state"] == "pending"  # the stream indexer feeds OpenSearch later
    assert out["correlation_id"] == "3f2b9c1e-8d4a-4f6b-9e2d-1a7c5b8e0f42"


def test_remember_with_blank_provenance_is_an_envelope_not_an_exception():
    out = call("remember", load_event("remember", "invoke_blank_provenance"))
    assert out["is_error"] is True
    assert out["body"]["code"] == "provenance_required"


def test_remember_without_provenance_is_invalid_params():
    out = call("remember", load_event("remember", "invoke_without_provenance"))
    assert out["body"]["code"] == "invalid_params"


def test_remember_with_an_unknown_parameter_is_refused():
    out = call("remember", load_event("remember", "invoke_unknown_param"))
    assert out["body"]["code"] == "invalid_params"


def test_a_payload_for_another_tool_is_unknown_tool_on_this_function():
    out = call("recall", load_event("recall", "invoke_routed_to_wrong_function"))
    assert out["is_error"] is True
    assert out["body"]["code"] == "unknown_tool"


def test_recall_by_entity_reads_the_fact_store_at_once():
    fact_id = remember()
    event = load_event("recall", "invoke")
    event["arguments"] = {"entity": "companies/acme"}
    out = call("recall", event)
    assert out["is_error"] is False
    assert fact_id in json.dumps(out["body"])


def test_entity_returns_the_card_of_a_stored_page():
    put_acme_page()
    out = call("entity", load_event("entity", "invoke"))
    assert out["is_error"] is False
    assert out["body"]["found"] is True
    assert out["body"]["card"]["entity"]["slug"] == "companies/acme"


def test_synthesize_without_an_llm_is_unavailable_never_a_fake_answer():
    out = call("synthesize", load_event("synthesize", "invoke"))
    assert out["is_error"] is True
    assert out["body"]["code"] == "unavailable"


def test_forget_of_an_unknown_id_is_not_found():
    out = call("forget", load_event("forget", "invoke"))
    assert out["body"]["code"] == "not_found"


def test_forget_of_a_numeric_id_is_invalid_params():
    out = call("forget", load_event("forget", "invoke_numeric_id"))
    assert out["body"]["code"] == "invalid_params"


def test_forget_expires_a_remembered_fact():
    fact_id = remember()
    event = load_event("forget", "invoke")
    event["arguments"]["id"] = fact_id
    out = call("forget", event)
    assert out["is_error"] is False
    assert out["body"]["expired"] is True


def test_context_pack_packs_the_named_entities():
    put_acme_page()
    out = call("context_pack", load_event("context_pack", "invoke"))
    assert out["is_error"] is False
    assert "companies/acme" in json.dumps(out["body"])


def test_delta_first_wake_of_a_session_is_empty_and_later_wakes_see_new_pages(clock):
    first = call("delta", load_event("delta", "invoke"))
    assert first["is_error"] is False
    assert first["body"]["pages"] == []
    clock.advance(minutes=1)
    put_acme_page()
    clock.advance(minutes=1)
    second = call("delta", load_event("delta", "invoke"))
    assert [p["slug"] for p in second["body"]["pages"]] == ["companies/acme"]


def test_delta_without_since_or_session_is_invalid_params():
    out = call("delta", load_event("delta", "invoke_without_since_or_session"))
    assert out["body"]["code"] == "invalid_params"


def test_page_tools_share_one_function_put_get_list_delete():
    put_acme_page()
    got = call("pages", load_event("pages", "invoke_get_page"))
    assert got["body"]["slug"] == "companies/acme"
    listed = call("pages", load_event("pages", "invoke_list_pages"))
    assert "companies/acme" in json.dumps(listed["body"])
    deleted = call("pages", load_event("pages", "invoke_delete_page"))
    assert deleted["is_error"] is False
    again = call("pages", load_event("pages", "invoke_get_page"))
    assert again["body"]["code"] == "not_found"


def test_admin_tools_need_the_admin_scope():
    out = call("admin", load_event("admin", "invoke_trace_fact_without_admin_scope"))
    assert out["body"]["code"] == "scope_denied"


def test_purge_removes_the_fact_and_its_index_entry(deps):
    from fleetmem.memory.indexing import doc_for_fact

    fact_id = remember()
    fact = deps.facts.get("acme", fact_id)
    deps.search.upsert([doc_for_fact(fact)])  # as the stream indexer would have
    event = load_event("admin", "invoke_purge_fact")
    event["arguments"]["id"] = fact_id
    out = call("admin", event)
    assert out["body"]["purged"] is True
    assert deps.facts.get("acme", fact_id) is None
    trace = load_event("admin", "invoke_trace_fact")
    trace["arguments"]["id"] = fact_id
    assert call("admin", trace)["body"]["code"] == "not_found"


def test_the_admin_function_serves_list_facts_and_memory_stats_to_a_read_token():
    fact_id = remember()
    listed = call("admin", load_event("admin", "invoke_list_facts"))
    assert listed["is_error"] is False
    assert fact_id in [f["fact_id"] for f in listed["body"]["facts"]]
    stats = call("admin", load_event("admin", "invoke_memory_stats"))
    assert stats["is_error"] is False and stats["body"]["facts"]["active"] >= 1


def test_the_admin_function_serves_the_account_tools(deps):
    made = call("admin", load_event("admin", "invoke_create_token"))
    assert made["is_error"] is False, made["body"]
    token_id = made["body"]["token_id"]
    assert deps.clients.by_hash(hash_token(made["body"]["token"])).tenant == "acme"

    def admin(tool: str, **arguments) -> dict:
        event = load_event("admin", "invoke_create_token")
        event["tool"], event["arguments"] = tool, arguments
        out = call("admin", event)
        assert out["is_error"] is False, out["body"]
        return out["body"]

    assert admin("whoami")["tenant"] == "acme"
    assert token_id in {t["token_id"] for t in admin("list_tokens")["tokens"]}
    assert admin("list_followers")["followers"] == []
    assert admin("revoke_token", token_id=token_id)["revoked"] is True


# -- POST /v1/<tool> ----------------------------------------------------------------------------


@pytest.mark.parametrize("verb", VERB_NAMES)
def test_every_verb_answers_its_v1_event_with_json_carrying_the_protocol_version(verb):
    out = call(verb, load_event(verb, "v1"))
    assert out["statusCode"] in {200, 400, 404, 503}
    assert out["headers"]["Content-Type"] == "application/json"
    assert body_of(out)["protocol_version"] == 1


def test_v1_remember_returns_the_verb_json_with_200():
    out = call("remember", load_event("remember", "v1"))
    assert out["statusCode"] == 200
    assert body_of(out)["status"] == "inserted"


def test_v1_errors_map_to_http_statuses_with_the_envelope():
    assert call("forget", load_event("forget", "v1"))["statusCode"] == 404
    bad = call("remember", load_event("remember", "v1_malformed_json"))
    assert bad["statusCode"] == 400
    assert body_of(bad)["code"] == "invalid_params"
    assert call("synthesize", load_event("synthesize", "v1_base64"))["statusCode"] == 503


def test_v1_without_authorizer_context_is_401():
    event = load_event("recall", "v1")
    del event["requestContext"]["authorizer"]
    out = call("recall", event)
    assert out["statusCode"] == 401
    assert body_of(out)["code"] == "unauthorized"


def test_v1_takes_the_tenant_from_the_authorizer_never_from_the_body():
    remember()
    event = load_event("recall", "v1")
    event["body"] = json.dumps({"entity": "companies/acme", "tenant": "acme"})
    event["requestContext"]["authorizer"] = {
        **event["requestContext"]["authorizer"],
        "tenant": "other",
        "principalId": "other/planner",
    }
    out = call("recall", event)
    assert out["statusCode"] == 200
    assert body_of(out).get("facts") == []


def test_v1_get_page_on_the_pages_function():
    put_acme_page()
    out = call("pages", load_event("pages", "v1_get_page"))
    assert out["statusCode"] == 200
    assert body_of(out)["slug"] == "companies/acme"


def test_events_folders_hold_only_valid_json():
    for path in Path(ROOT / "events").rglob("*.json"):
        json.loads(path.read_text())


def test_synthesize_answers_through_bedrock_converse(deps, monkeypatch):
    """Bedrock cannot run here: the bedrock-runtime client is a botocore Stubber with the documented
    Converse response shape; everything else (DynamoDB, OpenSearch) is real."""
    import boto3
    from botocore.stub import ANY, Stubber

    from fleetmem.adapters.aws.bedrock import BedrockLLM
    from fleetmem.memory.indexing import docs_for_page

    put_acme_page()
    deps.search.upsert(docs_for_page(deps.pages.get("acme", "companies/acme")))  # as the indexer would
    deps.search.client.indices.refresh(index=deps.search.index)  # searchable now, not at the next interval
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    stub = Stubber(client)
    stub.add_response(
        "converse",
        {
            "output": {"message": {"role": "assistant", "content": [{"text": "The renewal call is on Thursday."}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 812, "outputTokens": 41, "totalTokens": 853},
            "metrics": {"latencyMs": 900},
        },
        {
            "modelId": "anthropic.claude-3-5-haiku-20241022-v1:0",
            "messages": ANY,
            "system": ANY,
            "inferenceConfig": ANY,
        },
    )
    stub.activate()
    monkeypatch.setattr(deps, "llm", BedrockLLM("anthropic.claude-3-5-haiku-20241022-v1:0", client=client))
    # no per-call deadline: on a loaded machine the gather alone can pass it, and the verb then
    # answers from the pages without calling the model (the fallback has its own tests)
    monkeypatch.setattr(deps, "policy", replace(deps.policy, deadline_ms=0))
    out = call("synthesize", load_event("synthesize", "invoke"))
    assert out["is_error"] is False
    assert "Thursday" in out["body"]["answer"]
    assert out["body"]["cost"]["input_tokens"] == 812
    stub.assert_no_pending_responses()
