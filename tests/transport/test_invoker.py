"""Invokers: in-process and per-verb Lambda give the same DispatchResult.

The Lambda service cannot run here, so `LambdaInvoker` gets a stand-in client whose `invoke` runs
the real verb-function body (`handle_invoke_payload`) over the real local stores; only the AWS
transport hop is replaced.
"""

from __future__ import annotations

import io
import json
from typing import Any

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


def test_a_function_error_becomes_the_internal_envelope_without_its_text(
    deps: Deps, remote_caller: Caller
) -> None:
    remote = LambdaInvoker(lambda tool: tool, client=FunctionClient(deps, function_error=True))
    r = remote.invoke("recall", {}, remote_caller, "c_err")
    assert r.is_error and r.body["code"] == "internal"
    assert r.body["correlation_id"] == "c_err"
    assert "SELECT" not in json.dumps(r.body)


def test_a_throttled_invoke_is_unavailable_with_a_wait_fix(deps: Deps, remote_caller: Caller) -> None:
    throttled = ClientError(
        {"Error": {"Code": "TooManyRequestsException", "Message": "Rate exceeded"}}, "Invoke"
    )
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
