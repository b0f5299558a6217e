"""Bedrock models behind the Embedder and LLM ports.

- `BedrockEmbedder`: Amazon Titan Text Embeddings V2 (`InvokeModel`, one text per request, as the
  model accepts), dimension 256/512/1024, `normalize: true` so vectors are unit length.
- `BedrockLLM`: the Converse API; token usage becomes the synthesize `cost` block through a small
  price table (USD per 1,000 tokens, on-demand list prices; an unknown model gets `usd_estimate`
  None rather than a guess); `stopReason: max_tokens` marks the completion `truncated`.

Bedrock cannot run on a developer machine or in CI: the tests drive these classes through
botocore's Stubber with the documented request and response shapes. Provider errors become
`Unavailable` (throttling with `retry_after_seconds`) through the one ClientError translator.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fleetmem.adapters.aws.dynamo import AwsClients, translate_client_error
from fleetmem.adapters.aws.sdk_clients import LLM_DEADLINE_S  # the deploy checks synthesize outlasts it
from fleetmem.config import Settings
from fleetmem.errors import Unavailable
from fleetmem.models import Completion

TITAN_V2 = "amazon.titan-embed-text-v2:0"
TITAN_V2_DIMENSIONS = (256, 512, 1024)
#: Titan V2 accepts up to 8,192 tokens (about 50,000 characters); longer text is cut, not refused
TITAN_MAX_CHARS = 50_000

#: (input, output) USD per 1,000 tokens, on-demand, us-east-1. Cross-region inference profile ids
#: ("us.", "eu.", "apac.", "global.") are priced like the base model.
PRICES_PER_1K: dict[str, tuple[float, float]] = {
    "anthropic.claude-3-haiku-20240307-v1:0": (0.00025, 0.00125),
    "anthropic.claude-3-5-haiku-20241022-v1:0": (0.0008, 0.004),
    "anthropic.claude-3-5-sonnet-20240620-v1:0": (0.003, 0.015),
    "anthropic.claude-3-5-sonnet-20241022-v2:0": (0.003, 0.015),
    "anthropic.claude-3-7-sonnet-20250219-v1:0": (0.003, 0.015),
    "amazon.nova-micro-v1:0": (0.000035, 0.00014),
    "amazon.nova-lite-v1:0": (0.00006, 0.00024),
    "amazon.nova-pro-v1:0": (0.0008, 0.0032),
}
_PROFILE_PREFIXES = ("us.", "eu.", "apac.", "global.", "us-gov.")


def base_model_id(model_id: str) -> str:
    for p in _PROFILE_PREFIXES:
        if model_id.startswith(p):
            return model_id[len(p) :]
    return model_id


def usd_estimate(model_id: str, input_tokens: int | None, output_tokens: int | None) -> float | None:
    price = PRICES_PER_1K.get(base_model_id(model_id))
    if price is None or input_tokens is None or output_tokens is None:
        return None
    return round(input_tokens / 1000 * price[0] + output_tokens / 1000 * price[1], 6)


def titan_request(text: str, dim: int) -> dict[str, Any]:
    return {"inputText": text[:TITAN_MAX_CHARS], "dimensions": dim, "normalize": True}


def converse_request(model_id: str, system: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    req: dict[str, Any] = {
        "modelId": model_id,
        "messages": [{"role": "user", "content": [{"text": prompt}]}],
        "inferenceConfig": {"maxTokens": max_tokens, "temperature": 0.0},
    }
    if system:
        req["system"] = [{"text": system}]
    return req


def _runtime(clients: AwsClients | None, client: Any, region: str) -> tuple[AwsClients | None, Any]:
    if client is not None:
        return None, client
    return clients or AwsClients(region=region), None


class _BedrockRuntime:
    """A Bedrock Runtime client: the one given, or built on first use from the adapter's clients
    for `PURPOSE` (its retries and timeouts: `sdk_clients.SDK_CLIENTS`)."""

    PURPOSE = ""
    _clients: AwsClients | None
    _client: Any

    def _read_timeout(self) -> float | None:
        return None

    @property
    def client(self) -> Any:
        if self._client is None:
            assert self._clients is not None
            self._client = self._clients.client(self.PURPOSE, read_timeout=self._read_timeout())
        return self._client


class BedrockEmbedder(_BedrockRuntime):
    """Embedder port over Titan Text Embeddings V2."""

    PURPOSE = "embed"

    def __init__(
        self,
        model_id: str | Settings = TITAN_V2,
        dim: int = 1024,
        *,
        region: str = "",
        client: Any = None,
        clients: AwsClients | None = None,
        max_workers: int = 4,
    ) -> None:
        if isinstance(model_id, Settings):  # built straight from configuration by the wiring
            settings = model_id
            model_id, dim = settings.bedrock.embedding_model, settings.bedrock.embedding_dim
            region = region or settings.aws.region
        if dim not in TITAN_V2_DIMENSIONS:
            raise ValueError(f"Titan V2 dimension must be one of {TITAN_V2_DIMENSIONS}")
        self.model_id = model_id
        self.dim = dim
        # Bounded (adapters/aws/sdk_clients.py, "embed"): a slow model costs a call seconds, not the
        # function's whole timeout; a query embedding that fails makes the search keyword-only.
        self._clients, self._client = _runtime(clients, client, region)
        self._workers = max_workers

    def _one(self, text: str) -> list[float]:
        try:
            out = self.client.invoke_model(
                modelId=self.model_id,
                contentType="application/json",
                accept="application/json",
                body=json.dumps(titan_request(text, self.dim)),
            )
            payload = json.loads(out["body"].read())
        except Exception as exc:
            raise translate_client_error(exc, service="bedrock") from None
        vec = payload.get("embedding")
        if not isinstance(vec, list) or len(vec) != self.dim:
            raise Unavailable("bedrock returned an embedding of the wrong shape", reason="bad_response")
        return [float(x) for x in vec]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        items = [t if t.strip() else " " for t in texts]
        if len(items) <= 1:
            return [self._one(t) for t in items]
        with ThreadPoolExecutor(max_workers=min(self._workers, len(items))) as pool:
            return list(pool.map(self._one, items))


class BedrockLLM(_BedrockRuntime):
    """LLM port over the Bedrock Converse API."""

    PURPOSE = "llm"

    def __init__(
        self,
        model_id: str | Settings,
        *,
        region: str = "",
        client: Any = None,
        clients: AwsClients | None = None,
    ) -> None:
        if isinstance(model_id, Settings):  # built straight from configuration by the wiring
            region = region or model_id.aws.region
            model_id = model_id.bedrock.llm_model
        if not model_id:
            raise ValueError("a Bedrock model id is required (FLEETMEM_BEDROCK_LLM_MODEL)")
        self.model_id = model_id
        # Bounded: one attempt that gives up after LLM_DEADLINE_S, so synthesize can still answer
        # (extractively) before the function, the edge and the API time out.
        self._clients, self._client = _runtime(clients, client, region)

    def _read_timeout(self) -> float | None:
        return LLM_DEADLINE_S

    def complete(self, system: str, prompt: str, *, max_tokens: int = 800) -> Completion:
        try:
            out = self.client.converse(**converse_request(self.model_id, system, prompt, max_tokens))
        except Exception as exc:
            raise translate_client_error(exc, service="bedrock") from None
        blocks = out.get("output", {}).get("message", {}).get("content", []) or []
        text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict))
        usage = out.get("usage") or {}
        tin = usage.get("inputTokens")
        tout = usage.get("outputTokens")
        return Completion(
            text=text,
            model=self.model_id,
            input_tokens=tin,
            output_tokens=tout,
            usd_estimate=usd_estimate(self.model_id, tin, tout),
            truncated=out.get("stopReason") == "max_tokens",
        )
