"""`/v1` on the AWS handlers through their events: `POST /v1/<tool>` on the tool's function gives the
same body as the edge's invoke payload for the same data, and the edge answers `GET /v1/tools`
(MCP tools/list for the authorizer's caller) and `GET /v1/openapi.json` (the generated document)."""

from __future__ import annotations

import json

import pytest

from fleetmem.contract.status import CORRELATION_HEADER
from fleetmem.transport.openapi import openapi_document

from .conftest import call, load_event

pytestmark = pytest.mark.usefixtures("deps")


def _strip(body: dict) -> dict:
    return {k: v for k, v in body.items() if k != "correlation_id"}


def test_post_v1_recall_gives_the_same_body_as_the_invoke_payload():
    saved = call("remember", load_event("remember", "invoke"))
    assert saved["is_error"] is False
    args = {"entity": "companies/acme"}
    event = load_event("recall", "v1")
    event["body"] = json.dumps(args)
    http = call("recall", event)
    invoke = load_event("recall", "invoke")
    invoke["arguments"] = args
    payload = call("recall", invoke)
    assert http["statusCode"] == 200
    assert http["headers"][CORRELATION_HEADER] == event["requestContext"]["requestId"]
    assert _strip(json.loads(http["body"])) == _strip(payload["body"])
    assert json.loads(http["body"])["facts"]


def test_post_v1_errors_carry_the_status_of_their_code():
    event = load_event("remember", "v1")
    event["body"] = json.dumps({"fact": "x", "provenance": " "})
    out = call("remember", event)
    body = json.loads(out["body"])
    assert (out["statusCode"], body["code"]) == (400, "provenance_required")
    assert body["suggestion"] and out["headers"][CORRELATION_HEADER] == body["correlation_id"]


def test_the_edge_answers_get_v1_tools_for_the_authorizers_caller(lambda_service):
    out = call("mcp", load_event("mcp", "v1_tools"))
    assert out["statusCode"] == 200
    names = {t["name"] for t in json.loads(out["body"])["tools"]}
    assert {"recall", "remember"} <= names and "purge_fact" not in names  # read+write, not admin
    assert lambda_service.calls == []


def test_the_edge_answers_get_v1_openapi_json_with_the_generated_document(lambda_service):
    event = load_event("mcp", "v1_openapi")
    out = call("mcp", event)
    assert out["statusCode"] == 200
    base = f"https://{event['requestContext']['domainName']}/{event['requestContext']['stage']}"
    assert json.loads(out["body"]) == openapi_document("full", server_url=base)


def test_the_edge_refuses_v1_routes_without_an_authorizer_context(lambda_service):
    event = load_event("mcp", "v1_tools")
    del event["requestContext"]["authorizer"]
    out = call("mcp", event)
    assert out["statusCode"] == 401 and json.loads(out["body"])["code"] == "unauthorized"


def _strict(text: str) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_post_v1_refuses_a_number_that_overflows_json_and_answers_strict_json():
    """Regression: `1e999` parsed to infinity and came back as the non-JSON token `Infinity`."""
    event = load_event("recall", "v1")
    event["body"] = '{"query": "x", "limit": 1e999}'
    out = call("recall", event)
    body = _strict(out["body"])
    assert (out["statusCode"], body["code"]) == (400, "invalid_params")


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain", None])
def test_post_v1_needs_a_json_content_type_as_on_the_local_server(content_type):
    event = load_event("remember", "v1")
    event["body"] = json.dumps({"fact": "Form-posted fact", "provenance": "test", "session_id": "form-post"})
    headers = {k: v for k, v in event["headers"].items() if k.lower() != "content-type"}
    if content_type:
        headers["Content-Type"] = content_type
    event["headers"] = headers
    event["multiValueHeaders"] = {k: [v] for k, v in headers.items()}
    out = call("remember", event)
    body = json.loads(out["body"])
    assert (out["statusCode"], body["code"]) == (400, "invalid_params")
    assert body["message"] == "POST /v1/remember needs `Content-Type: application/json`."
    recall = load_event("recall", "v1")
    recall["body"] = json.dumps({"session_id": "form-post"})
    assert json.loads(call("recall", recall)["body"])["facts"] == []
    assert (
        call(
            "remember", {**event, "headers": {**headers, "Content-Type": "application/json"}, "multiValueHeaders": {}}
        )["statusCode"]
        == 200
    )
    assert len(json.loads(call("recall", recall)["body"])["facts"]) == 1  # the same caller's brain


@pytest.mark.parametrize("depth", [100, 1_000, 100_000])
def test_post_v1_refuses_a_body_nested_too_deep_with_the_envelope_as_on_the_local_server(depth):
    """Regression: a body nested ~1,000 levels raised RecursionError out of the body reader (the
    function failed instead of answering the envelope)."""
    event = load_event("recall", "v1")
    event["body"] = '{"query": ' + "[" * depth + "]" * depth + "}"
    out = call("recall", event)
    body = json.loads(out["body"])
    assert (out["statusCode"], body["code"]) == (400, "invalid_params")
    assert body["detail"] == {"reason": "too_deep", "max_depth": 32}
    assert out["headers"][CORRELATION_HEADER] == body["correlation_id"] == event["requestContext"]["requestId"]
