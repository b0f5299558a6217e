"""Invokers: in-process and per-verb Lambda give the same DispatchResult.

The Lambda service cannot run here, so `LambdaInvoker` gets a stand-in client whose `invoke` runs
the real verb-function body (`handle_invoke_payload`) over the real local stores; only the AWS
transport hop is replaced.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from fleetmem.adapters.aws.invoker import LambdaInvoker
from fleetmem.models import Caller
from fleetmem.ports import Deps
from fleetmem.transport.invoker import InProcessInvoker, handle_invoke_payload

REMEMBER = {"fact": "Alice prefers tea", "provenance": "chat", "entity": "Alice"}


class FunctionClient:
    """Stands in for boto3's Lambda client: JSON in, the verb function's JSON out."""

    def __init__(self, deps: Deps, *, function_error: bool = False, raises: Exception | None = None) -> None:
        self.deps = deps
        self.function_error = function_error
        self.raises = raises
        self.calls: list[dict[str, Any]] = []

    def invoke(self, *, FunctionName: str, InvocationType: str, Payload: bytes) -> dict[str, Any]:
        self.calls.append(
            {"FunctionName": FunctionName, "InvocationType": InvocationType, "Payload": json.loads(Payload)}
        )
        if self.raises is not None:
            raise self.raises
        if self.function_error:
            body = {"errorMessage": "boom: SELECT secret", "errorType": "RuntimeError", "stackTrace": ["x"]}
            return {
                "StatusCode": 200,
                "FunctionError": "Unhandled",
                "Payload": io.BytesIO(json.dumps(body).encode()),
            }
        out = handle_invoke_payload(json.loads(Payload), self.deps)
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(out).encode())}


def test_the_lambda_invoker_answers_like_the_in_process_one(deps: Deps, remote_caller: Caller) -> None:
    client = FunctionClient(deps)
    remote = LambdaInvoker(lambda tool: f"fleetmem-test-{tool}", client=client)
    local = InProcessInvoker(lambda: deps)
    first = remote.invoke("remember", REMEMBER, remote_caller, "c_1")
    assert not first.is_error and first.body["status"] == "inserted"
    recalled_remote = remote.invoke("recall", {"entity": "Alice", "limt": 1}, remote_caller, "c_2")
    recalled_local = local.invoke("recall", {"entity": "Alice", "limt": 1}, remote_caller, "c_3")
    assert recalled_remote.body == recalled_local.body
    assert recalled_remote.notices == recalled_local.notices
    assert recalled_remote.correlation_id == "c_2"
    sent = client.calls[0]
    assert sent["FunctionName"] == "fleetmem-test-remember"
    assert sent["InvocationType"] == "RequestResponse"
    assert sent["Payload"]["caller"] == {
        "tenant": "t1",
        "client_id": "agent-a",
        "scopes": ["read", "write"],
        "remote": True,
    }
    assert sent["Payload"]["correlation_id"] == "c_1"


def test_a_function_error_becomes_the_internal_envelope_without_its_text(deps: Deps, remote_caller: Caller) -> None:
    remote = LambdaInvoker(lambda tool: tool, client=FunctionClient(deps, function_error=True))
    r = remote.invoke("recall", {}, remote_caller, "c_err")
    assert r.is_error and r.body["code"] == "internal"
    assert r.body["correlation_id"] == "c_err"
    assert "SELECT" not in json.dumps(r.body)


def test_a_throttled_invoke_is_unavailable_with_a_wait_fix(deps: Deps, remote_caller: Caller) -> None:
    throttled = ClientError({"Error": {"Code": "TooManyRequestsException", "Message": "Rate exceeded"}}, "Invoke")
    remote = LambdaInvoker(lambda tool: tool, client=FunctionClient(deps, raises=throttled))
    r = remote.invoke("recall", {"query": "x"}, remote_caller, "c_t")
    assert r.body["code"] == "unavailable"
    assert r.body["fix"]["next"] == "wait"
    assert r.body["fix"]["mcp"] == {"tool": "recall", "arguments": {"query": "x"}}


def test_a_verb_function_always_treats_its_caller_as_remote(deps: Deps, local_caller: Caller) -> None:
    saved = InProcessInvoker(lambda: deps, transport="cli").invoke(
        "remember",
        {**REMEMBER, "fact": "Alice's door code is 4711", "visibility": "private"},
        local_caller,
        "c_w",
    )
    assert not saved.is_error
    payload = {
        "tool": "recall",
        "arguments": {"entity": "Alice", "include_private": True},
        "caller": {"tenant": "t1", "client_id": "local", "scopes": ["read"], "remote": False},
        "surface": "verbs",
        "correlation_id": "c_r",
    }
    out = handle_invoke_payload(payload, deps)
    assert out["is_error"] is False
    assert out["correlation_id"] == "c_r"
    assert "4711" not in json.dumps(out["body"])


def test_the_edge_waits_for_each_verb_only_as_long_as_that_verb_can_take() -> None:
    """Each tool's Lambda client reads with that tool's deadline (capped by the ceiling), so a slow
    verb holds an edge slot no longer than its own function can run. Real boto3 clients, no call."""
    remote = LambdaInvoker(
        lambda tool: tool, region="us-east-1", read_timeout=26, deadlines={"delta": 11, "recall": 16, "odd": 99}
    )
    assert [remote.deadline_for(t) for t in ("delta", "recall", "odd", "remember")] == [11, 16, 26, 26]
    assert remote.client_for("delta").meta.config.read_timeout == 11
    assert remote.client_for("recall").meta.config.read_timeout == 16
    assert remote.client_for("remember").meta.config.read_timeout == 26


class InvokeEndpoint:
    """The Lambda Invoke API's error answers on 127.0.0.1 for a real boto3 client (the service
    cannot run here): every request is counted; `throttle` answers the service's 429
    TooManyRequestsException, otherwise the answer is held until the endpoint closes (a verb
    slower than the edge's deadline)."""

    def __init__(self, *, throttle: bool) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests = 0
        self.released = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                endpoint.requests += 1
                if throttle:
                    raw = json.dumps({"Type": "User", "message": "Rate Exceeded."}).encode()
                    self.send_response(429)
                    self.send_header("x-amzn-ErrorType", "TooManyRequestsException")
                else:
                    endpoint.released.wait(timeout=60)
                    raw = b"{}"
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                try:
                    self.wfile.write(raw)
                except OSError:
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def invoke_endpoint(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[InvokeEndpoint]:
    import fleetmem.adapters.aws as aws

    endpoint = InvokeEndpoint(throttle=request.param == "throttle")
    monkeypatch.setattr(aws, "_shared_clients", {})  # clients built for this endpoint only
    monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", endpoint.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield endpoint
    endpoint.close()


@pytest.mark.parametrize("invoke_endpoint", ["throttle"], indirect=True)
def test_a_throttled_invoke_is_sent_once_and_answers_unavailable_at_once(invoke_endpoint, remote_caller) -> None:
    """The edge's own Lambda client (built as deployed, no injection) makes one attempt: botocore's
    default would retry the 429 three times with backoff before the edge could answer."""
    remote = LambdaInvoker(lambda tool: f"fleetmem-test-{tool}", region="us-east-1", deadlines={"remember": 16})
    r = remote.invoke("remember", REMEMBER, remote_caller, "c_th")
    assert invoke_endpoint.requests == 1
    assert r.body["code"] == "unavailable" and r.body["detail"]["reason"] == "throttled"
    assert r.body["fix"]["next"] == "wait" and r.body["fix"]["retry_after_seconds"] >= 1


@pytest.mark.parametrize("invoke_endpoint", ["slow"], indirect=True)
def test_an_invoke_past_the_verbs_deadline_is_sent_once_and_answers_unavailable(invoke_endpoint, remote_caller) -> None:
    """A verb that does not answer within its deadline (1 s here) is not invoked again (a retried
    remember could run twice) and the caller gets `unavailable` with a wait fix, not `internal`."""
    remote = LambdaInvoker(lambda tool: f"fleetmem-test-{tool}", region="us-east-1", deadlines={"remember": 1})
    r = remote.invoke("remember", REMEMBER, remote_caller, "c_slow")
    assert invoke_endpoint.requests == 1
    assert r.body["code"] == "unavailable" and r.body["detail"]["reason"] == "timeout"
    assert r.body["fix"]["next"] == "wait" and r.body["fix"]["retry_after_seconds"] >= 1
    assert r.body["fix"]["mcp"] == {"tool": "remember", "arguments": REMEMBER}
