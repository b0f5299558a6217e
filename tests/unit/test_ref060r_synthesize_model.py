"""synthesize's configured model on the local backend (D30): `FLEETMEM_LLM=openai` wiring, the
OpenAI-compatible adapter's failure classes against a real HTTP server on 127.0.0.1 (the scripted
stand-in of tests/llm_standin.py, or a socket that is closed), the owner's quote-check switch, and
the Bedrock adapter's `stopReason: max_tokens`. No language model can run here: the stand-in and
botocore's Stubber answer for one."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.stub import Stubber
from tests.llm_standin import ChatStandIn

from fleetmem import wiring
from fleetmem.adapters.aws.bedrock import BedrockLLM
from fleetmem.adapters.local.chat_llm import ChatCompletionsLLM
from fleetmem.config import ENV_QUOTE_CHECK, LlmSettings, Settings
from fleetmem.errors import Unavailable


@pytest.fixture(scope="module")
def model() -> Iterator[ChatStandIn]:
    stand_in = ChatStandIn()
    yield stand_in
    stand_in.stop()


def _settings(tmp_path: Path, **chat: object) -> Settings:
    return Settings(data_dir=tmp_path, embedder="hash", llm="openai", chat=LlmSettings(**chat))  # type: ignore[arg-type]


def test_the_local_backend_answers_synthesize_through_a_configured_openai_compatible_server(tmp_path, model):
    deps = wiring.build_deps(_settings(tmp_path, base_url=model.base_url, model=model.MODEL))
    try:
        assert isinstance(deps.llm, ChatCompletionsLLM) and deps.diagnostics.llm_problem is None
        done = deps.llm.complete("sys", 'Question: hi\n<retrieved_memory>\n<fact id="1">Kai owns billing</fact>')
        assert (done.model, done.truncated) == (model.MODEL, False)
        assert (done.input_tokens, done.output_tokens) == (
            model.replies[-1].input_tokens,
            model.replies[-1].output_tokens,
        )
    finally:
        wiring.clear_cache()


def test_openai_without_a_base_url_or_model_says_what_is_missing(tmp_path):
    deps = wiring.build_deps(_settings(tmp_path, base_url="", model="m"))
    try:
        assert deps.llm is None
        assert "FLEETMEM_LLM_BASE_URL" in (deps.diagnostics.llm_problem or "")
    finally:
        wiring.clear_cache()


def test_a_cut_reply_is_truncated_and_a_failing_server_is_a_provider_error(tmp_path, model):
    llm = ChatCompletionsLLM(_settings(tmp_path, base_url=model.base_url, model=model.MODEL))
    assert llm.complete("s", "Question: standin-truncate\n").truncated is True
    with pytest.raises(Unavailable) as err:
        llm.complete("s", "Question: standin-error\n")
    assert err.value.reason == "provider_error"


def test_an_unreachable_server_is_a_network_failure(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        llm = ChatCompletionsLLM(_settings(tmp_path, base_url=f"http://127.0.0.1:{port}/v1", model="m"))
        with pytest.raises(Unavailable) as err:
            llm.complete("s", "p")
    assert err.value.reason == "network"


def test_the_quote_check_switch_reads_on_and_off_and_refuses_anything_else(monkeypatch):
    monkeypatch.setenv(ENV_QUOTE_CHECK, "off")
    assert LlmSettings.from_env().quote_check is False
    monkeypatch.delenv(ENV_QUOTE_CHECK)
    assert LlmSettings.from_env().quote_check is True
    monkeypatch.setenv(ENV_QUOTE_CHECK, "maybe")
    with pytest.raises(ValueError, match=ENV_QUOTE_CHECK):
        LlmSettings.from_env()


def test_bedrock_max_tokens_stop_reason_marks_the_completion_truncated():
    import boto3

    client = boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    llm = BedrockLLM("amazon.nova-micro-v1:0", client=client)
    with Stubber(client) as stub:
        stub.add_response(
            "converse",
            {
                "output": {"message": {"role": "assistant", "content": [{"text": '{"answer": "cut'}]}},
                "stopReason": "max_tokens",
                "usage": {"inputTokens": 40, "outputTokens": 800, "totalTokens": 840},
                "metrics": {"latencyMs": 5},
            },
        )
        done = llm.complete("s", "p")
    assert done.truncated is True and (done.input_tokens, done.output_tokens) == (40, 800)
