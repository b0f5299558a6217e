"""The MCP edge handler on its events/mcp files: each REST proxy event runs through the sandbox's
MCP app; every tools/call goes through the LambdaInvoker to the verb's own handler (the Lambda
service itself is replaced by an in-process stand-in that JSON round-trips the payload)."""

from __future__ import annotations

import json

import pytest

from fleetmem.protocol import VERB_NAMES
from tests.mcp.test_http_jsonrpc_edges import JSONRPC_EDGES, check_answer, headers_for

from .conftest import call, load_event

pytestmark = pytest.mark.usefixtures("deps")


def rpc(event_name: str) -> dict:
    out = call("mcp", load_event("mcp", event_name))
    assert out["statusCode"] == 200, out
    return json.loads(out["body"])


def tool_result(event_name: str) -> tuple[dict, bool]:
    result = rpc(event_name)["result"]
    return json.loads(result["content"][0]["text"]), bool(result.get("isError"))


def test_initialize_answers_the_handshake_era_without_a_session(lambda_service):
    out = call("mcp", load_event("mcp", "initialize"))
    assert out["statusCode"] == 200
    assert json.loads(out["body"])["result"]["protocolVersion"] == "2025-11-25"
    assert "mcp-session-id" not in {k.lower() for k in out["headers"]}


def test_server_discover_answers_the_stateless_era(lambda_service):
    assert "result" in rpc("discover")


def test_tools_list_shows_what_the_callers_scopes_allow_in_both_eras(lambda_service):
    for event in ("tools_list", "stateless_tools_list"):
        names = {t["name"] for t in rpc(event)["result"]["tools"]}
        assert set(VERB_NAMES) <= names
        assert "purge_fact" not in names  # the event's caller has read+write, not admin
    assert lambda_service.calls == []  # listing never invokes a verb function


@pytest.mark.parametrize("verb", VERB_NAMES)
def test_each_verb_tools_call_reaches_that_verbs_own_function(lambda_service, verb):
    body, is_error = tool_result(f"tools_call_{verb}")
    assert lambda_service.calls == [verb]
    assert body["protocol_version"] == 1
    expected_error = {"synthesize": "unavailable", "forget": "not_found"}.get(verb)
    assert is_error is (expected_error is not None)
    if expected_error:
        assert body["code"] == expected_error


def test_a_stateless_era_tools_call_works(lambda_service):
    _, is_error = tool_result("stateless_tools_call_recall")
    assert is_error is False
    assert lambda_service.calls == ["recall"]


@pytest.mark.parametrize(
    ("event", "code", "invoked"),
    [
        ("tools_call_remember_blank_provenance", "provenance_required", True),
        ("tools_call_remember_without_provenance", "invalid_params", True),
        ("tools_call_forget_numeric_id", "invalid_params", True),
        ("tools_call_unknown_tool", "unknown_tool", False),
        ("tools_call_remember_read_only_client", "scope_denied", False),
    ],
)
def test_tool_errors_are_results_with_the_envelope(lambda_service, event, code, invoked):
    body, is_error = tool_result(event)
    assert is_error is True
    assert body["code"] == code
    assert bool(lambda_service.calls) is invoked  # surface and scope are checked at the edge first


def test_get_is_405_instead_of_a_never_ending_stream(lambda_service):
    out = call("mcp", load_event("mcp", "get_stream"))
    assert out["statusCode"] == 405


def test_a_request_without_authorizer_context_is_denied_401(lambda_service):
    out = call("mcp", load_event("mcp", "no_authorizer_context"))
    assert out["statusCode"] == 401
    assert out["headers"]["www-authenticate"].startswith("Bearer")
    assert json.loads(out["body"])["code"] == "unauthorized"


def test_protected_resource_metadata_names_the_public_mcp_url(lambda_service):
    out = call("mcp", load_event("mcp", "protected_resource_metadata"))
    assert out["statusCode"] == 200
    doc = json.loads(out["body"])
    assert doc["resource"] == "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/dev/mcp"


def test_warm_invocations_reuse_the_process_but_not_the_app(lambda_service):
    """The SDK's session manager runs once per app: a second invocation must still work."""
    for _ in range(3):
        assert rpc("tools_list")["result"]["tools"]
    _, is_error = tool_result("tools_call_remember")
    assert is_error is False
    _, is_error = tool_result("tools_call_recall")
    assert is_error is False


def test_a_verb_function_failure_becomes_an_internal_envelope(lambda_service, monkeypatch):
    def broken(*, FunctionName, InvocationType, Payload):
        return {
            "StatusCode": 200,
            "FunctionError": "Unhandled",
            "Payload": __import__("io").BytesIO(b'{"errorMessage": "secret stack"}'),
        }

    monkeypatch.setattr(lambda_service, "invoke", broken)
    body, is_error = tool_result("tools_call_recall")
    assert is_error is True
    assert body["code"] == "internal"
    assert "secret" not in json.dumps(body)


def _edge_event(edge) -> dict:
    """The tools_list event carrying one hostile JSON-RPC body and its headers."""
    event = load_event("mcp", "tools_list")
    headers = {k: v for k, v in event["headers"].items() if k.lower() not in ("mcp-protocol-version", "mcp-method")}
    headers.update({k: v for k, v in headers_for(edge, "unused").items() if k != "Authorization"})
    event["headers"] = headers
    event["multiValueHeaders"] = {k: [v] for k, v in headers.items()}
    event["body"] = edge.body.decode()
    return event


@pytest.mark.parametrize("edge", JSONRPC_EDGES, ids=[e.name for e in JSONRPC_EDGES])
def test_hostile_json_rpc_answers_as_on_the_local_server(lambda_service, edge):
    out = call("mcp", _edge_event(edge))
    check_answer(edge, out["statusCode"], json.loads(out["body"]))
    assert lambda_service.calls == []  # refused at the edge: no verb function runs


def test_the_edges_token_fixes_name_the_deployed_stage_and_keep_the_callers_tenant(lambda_service):
    denied, _ = tool_result("tools_call_remember_read_only_client")
    argv = denied["fix"]["argv"]
    assert argv[:5] == ["fleetmem", "token", "create", "--backend", "aws"]
    assert argv[argv.index("--tenant") + 1] == "acme" and argv[argv.index("--client") + 1] == "auditor"
    assert argv[argv.index("--scopes") + 1] == "read,write"
    refused = json.loads(call("mcp", load_event("mcp", "no_authorizer_context"))["body"])
    assert refused["fix"]["argv"][:5] == ["fleetmem", "token", "create", "--backend", "aws"]


class _TenantEcho:
    """An invoker that answers each tools/call with the tenant and client it was handed."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def invoke(self, tool, arguments, caller, correlation_id):
        from fleetmem.contract.result import DispatchResult

        self.seen.append((caller.tenant, caller.client_id))
        return DispatchResult({"tenant": caller.tenant, "client_id": caller.client_id}, False, [], correlation_id)


def _as_tenant(event: dict, tenant: str, client_id: str, request_id: str) -> dict:
    event = json.loads(json.dumps(event))
    authorizer = event["requestContext"]["authorizer"]
    authorizer.update(tenant=tenant, client_id=client_id, principalId=f"{tenant}/{client_id}")
    event["requestContext"]["requestId"] = request_id
    return event


def test_one_warm_edge_serves_each_invocation_as_its_own_tenant(monkeypatch, aws_env):
    from fleetmem.transport.aws_lambda import edge
    from fleetmem.transport.aws_lambda import runtime as lambda_runtime

    echo = _TenantEcho()
    monkeypatch.setattr(lambda_runtime, "edge_invoker", lambda: echo)
    base = load_event("mcp", "tools_call_recall")
    answers, apps = [], []
    for tenant, client_id in [("acme", "planner"), ("globex", "scout"), ("acme", "planner")]:
        out = call("mcp", _as_tenant(base, tenant, client_id, f"req-{tenant}-{len(answers)}"))
        assert out["statusCode"] == 200, out
        answers.append(json.loads(json.loads(out["body"])["result"]["content"][0]["text"]))
        apps.append(edge._EDGE.app if edge._EDGE is not None else None)
    assert [a["tenant"] for a in answers] == ["acme", "globex", "acme"]
    assert [a["client_id"] for a in answers] == ["planner", "scout", "planner"]
    assert echo.seen == [("acme", "planner"), ("globex", "scout"), ("acme", "planner")]
    assert apps[0] is not None and apps[0] is apps[1] is apps[2]  # built once, reused warm


def test_a_warm_edge_answers_each_request_with_its_own_public_url(lambda_service):
    from fleetmem.transport.aws_lambda import edge

    event = load_event("mcp", "protected_resource_metadata")
    resources = []
    for host in ("a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com", "memory.example.com"):
        e = json.loads(json.dumps(event))
        e["requestContext"]["domainName"] = host
        out = call("mcp", e)
        assert out["statusCode"] == 200, out
        resources.append(json.loads(out["body"])["resource"])
    app = edge._EDGE.app if edge._EDGE is not None else None
    assert resources[0].startswith("https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com/")
    assert resources[1].startswith("https://memory.example.com")
    assert app is not None
