"""Bedrock adapters, driven through botocore's Stubber.

Bedrock cannot run on this machine or in CI (no local engine exists), so the Bedrock Runtime
client is stubbed: the Stubber checks our requests against the real service model (parameter
names and types) and returns documented response shapes. Everything after the SDK call is real.
"""

from __future__ import annotations

import io
import json
import math

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from fleetmem.adapters.aws.bedrock import BedrockEmbedder, BedrockLLM, usd_estimate
from fleetmem.config import AwsSettings, BedrockSettings, Settings
from fleetmem.errors import Unavailable


@pytest.fixture
def runtime():
    client = boto3.session.Session(
        aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    ).client("bedrock-runtime")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def titan_response(vec: list[float], tokens: int = 3) -> dict:
    raw = json.dumps({"embedding": vec, "inputTextTokenCount": tokens}).encode()
    return {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}


def unit(dim: int, hot: int) -> list[float]:
    return [1.0 if i == hot else 0.0 for i in range(dim)]


def test_titan_v2_is_asked_for_the_configured_dimension_normalized(runtime):
    client, stub = runtime
    stub.add_response(
        "invoke_model",
        titan_response(unit(256, 3)),
        {
            "modelId": "amazon.titan-embed-text-v2:0",
            "contentType": "application/json",
            "accept": "application/json",
            "body": json.dumps({"inputText": "tea with Alice", "dimensions": 256, "normalize": True}),
        },
    )
    emb = BedrockEmbedder(dim=256, client=client)
    [vec] = emb.embed(["tea with Alice"])
    assert len(vec) == 256 and math.isclose(sum(x * x for x in vec), 1.0)
    assert emb.model_id == "amazon.titan-embed-text-v2:0" and emb.dim == 256


def test_one_vector_per_text_in_order(runtime):
    client, stub = runtime
    for hot in range(3):
        stub.add_response(
            "invoke_model",
            titan_response(unit(512, hot)),
            {"modelId": ANY, "contentType": ANY, "accept": ANY, "body": ANY},
        )
    # sequential stubbed responses: one worker keeps the pairing deterministic
    emb = BedrockEmbedder(dim=512, client=client, max_workers=1)
    vecs = emb.embed(["a", "b", "c"])
    assert [v.index(1.0) for v in vecs] == [0, 1, 2]


def test_an_unsupported_dimension_is_refused_at_construction():
    with pytest.raises(ValueError):
        BedrockEmbedder(dim=384, client=object())


def test_embedder_is_built_from_settings():
    settings = Settings(bedrock=BedrockSettings(embedding_dim=512), aws=AwsSettings(region="eu-west-1"))
    emb = BedrockEmbedder(settings, client=object())
    assert (emb.model_id, emb.dim) == ("amazon.titan-embed-text-v2:0", 512)


def test_embedding_throttling_is_unavailable_with_a_wait(runtime):
    client, stub = runtime
    stub.add_client_error(
        "invoke_model",
        service_error_code="ThrottlingException",
        service_message="Too many requests",
        http_status_code=429,
    )
    with pytest.raises(Unavailable) as err:
        BedrockEmbedder(client=client).embed(["x"])
    assert err.value.retry_after_seconds and err.value.reason == "throttled"


def test_a_wrong_shaped_embedding_is_unavailable(runtime):
    client, stub = runtime
    stub.add_response(
        "invoke_model",
        titan_response([0.5, 0.5]),
        {"modelId": ANY, "contentType": ANY, "accept": ANY, "body": ANY},
    )
    with pytest.raises(Unavailable):
        BedrockEmbedder(dim=256, client=client).embed(["x"])


def converse_response(text: str, tin: int, tout: int) -> dict:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": tin, "outputTokens": tout, "totalTokens": tin + tout},
        "metrics": {"latencyMs": 412},
    }


def test_converse_turns_usage_into_a_cost_estimate(runtime):
    client, stub = runtime
    stub.add_response(
        "converse",
        converse_response("Alice prefers green tea.", 1000, 200),
        {
            "modelId": "amazon.nova-lite-v1:0",
            "system": [{"text": "Answer from the sources."}],
            "messages": [{"role": "user", "content": [{"text": "What tea?"}]}],
            "inferenceConfig": {"maxTokens": 300, "temperature": 0.0},
        },
    )
    out = BedrockLLM("amazon.nova-lite-v1:0", client=client).complete(
        "Answer from the sources.", "What tea?", max_tokens=300
    )
    assert out.text == "Alice prefers green tea."
    assert (out.input_tokens, out.output_tokens) == (1000, 200)
    assert out.usd_estimate == pytest.approx(1000 / 1000 * 0.00006 + 200 / 1000 * 0.00024)


def test_an_inference_profile_is_priced_like_its_model():
    assert usd_estimate("us.amazon.nova-lite-v1:0", 1000, 0) == usd_estimate("amazon.nova-lite-v1:0", 1000, 0)


def test_an_unknown_model_has_no_price(runtime):
    client, stub = runtime
    stub.add_response(
        "converse",
        converse_response("ok", 10, 2),
        {"modelId": "vendor.unknown-model-v9", "messages": ANY, "system": ANY, "inferenceConfig": ANY},
    )
    out = BedrockLLM("vendor.unknown-model-v9", client=client).complete("s", "p")
    assert out.usd_estimate is None and out.input_tokens == 10


@pytest.mark.parametrize(
    "code,retry",
    [
        ("ThrottlingException", True),
        ("ServiceUnavailableException", True),
        ("AccessDeniedException", False),
        ("ValidationException", False),
    ],
)
def test_provider_errors_become_unavailable(runtime, code, retry):
    client, stub = runtime
    stub.add_client_error("converse", service_error_code=code, service_message="no", http_status_code=400)
    with pytest.raises(Unavailable) as err:
        BedrockLLM("amazon.nova-lite-v1:0", client=client).complete("s", "p")
    assert bool(err.value.retry_after_seconds) is retry


@pytest.fixture
def slow_bedrock(monkeypatch):
    """A local HTTP server standing in for Bedrock Runtime's Converse endpoint (Bedrock itself cannot
    run here): it answers a valid Converse response, but only after 2 s, and counts the requests."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.path)
            time.sleep(2)
            body = json.dumps(converse_response("late answer", 5, 2)).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the client gave up first

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield seen
    server.shutdown()
    server.server_close()


def test_the_llm_call_gives_up_at_its_deadline_once_without_retrying(slow_bedrock, monkeypatch):
    """The LLM client built by the wiring path (no injected client) waits at most LLM_DEADLINE_S
    for one attempt, then raises Unavailable, which synthesize turns into its extractive answer;
    a 10 s read timeout with three attempts would outlive the API's 29 s integration timeout."""
    from fleetmem.adapters.aws import bedrock

    monkeypatch.setattr(bedrock, "LLM_DEADLINE_S", 0.5)
    llm = BedrockLLM("amazon.nova-lite-v1:0", region="us-east-1")
    with pytest.raises(Unavailable) as err:
        llm.complete("s", "p")
    assert err.value.reason == "connection"
    assert len(slow_bedrock) == 1  # one attempt, no retry
    assert llm.client.meta.config.read_timeout == 0.5
