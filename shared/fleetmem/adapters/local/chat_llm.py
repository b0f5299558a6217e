"""The LLM port over an OpenAI-compatible chat-completions server (`FLEETMEM_LLM=openai`).

Any server that speaks `POST <base_url>/chat/completions` answers: Ollama (`http://127.0.0.1:11434/v1`),
llama.cpp's `llama-server`, vLLM, or a hosted OpenAI-compatible endpoint. Standard library HTTP only
(no client dependency): one request per completion, `temperature: 0`, `max_tokens` as asked.

- Token counts come from the reply's `usage` (`prompt_tokens`, `completion_tokens`); a server that
  reports none leaves them None. `usd_estimate` is None: the price of a self-hosted or arbitrary
  model is not known here, and a guess would not be honest.
- `finish_reason: "length"` marks the completion `truncated` (synthesize's `output_truncated`).
- Every failure is `Unavailable` with a reason synthesize reports as `LLM_CALL_FAILED: <class>`:
  `timeout`, `rate_limited` (HTTP 429, with Retry-After), `network`, `provider_error`.
- The API key (`FLEETMEM_LLM_API_KEY`, optional) goes only into the Authorization header; no
  message, log or exception carries it, nor the prompt or the reply.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from fleetmem.config import Settings
from fleetmem.errors import Unavailable
from fleetmem.models import Completion


def chat_request(model: str, system: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": prompt})
    return {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}


def _retry_after(err: urllib.error.HTTPError) -> int:
    try:
        return max(1, int(err.headers.get("Retry-After") or 5))
    except ValueError:
        return 5


class ChatCompletionsLLM:
    """LLM port over `<base_url>/chat/completions`."""

    def __init__(self, settings: Settings) -> None:
        chat = settings.chat
        if not chat.base_url or not chat.model:
            raise ValueError("FLEETMEM_LLM=openai needs FLEETMEM_LLM_BASE_URL and FLEETMEM_LLM_MODEL")
        self.url = chat.base_url.rstrip("/") + "/chat/completions"
        self.model_id = chat.model
        self._key = chat.api_key
        self._timeout = chat.timeout_s

    def complete(self, system: str, prompt: str, *, max_tokens: int = 800) -> Completion:
        body = json.dumps(chat_request(self.model_id, system, prompt, max_tokens)).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")  # noqa: S310 (configured URL)
        try:
            with urllib.request.urlopen(req, timeout=self._timeout) as resp:  # noqa: S310
                payload = json.loads(resp.read())
        except urllib.error.HTTPError as err:
            if err.code == 429:
                raise Unavailable(
                    "the chat model is rate limiting", retry_after_seconds=_retry_after(err), reason="rate_limited"
                ) from None
            raise Unavailable(f"the chat model answered HTTP {err.code}", reason="provider_error") from None
        except TimeoutError:
            raise Unavailable("the chat model did not answer in time", reason="timeout") from None
        except (urllib.error.URLError, OSError) as err:
            raise Unavailable(
                f"the chat model cannot be reached ({type(err).__name__})", retry_after_seconds=5, reason="network"
            ) from None
        except ValueError:
            raise Unavailable("the chat model's answer is not JSON", reason="provider_error") from None
        return self._completion(payload)

    def _completion(self, payload: Any) -> Completion:
        choices = payload.get("choices") if isinstance(payload, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise Unavailable("the chat model's answer has no choices", reason="provider_error")
        message = choices[0].get("message") or {}
        text = message.get("content") if isinstance(message, dict) else None
        usage = payload.get("usage") or {}
        tin, tout = usage.get("prompt_tokens"), usage.get("completion_tokens")
        return Completion(
            text=text if isinstance(text, str) else "",
            model=str(payload.get("model") or self.model_id),
            input_tokens=tin if isinstance(tin, int) else None,
            output_tokens=tout if isinstance(tout, int) else None,
            usd_estimate=None,
            truncated=choices[0].get("finish_reason") == "length",
        )


def open_chat_llm(settings: Settings) -> tuple[ChatCompletionsLLM | None, str | None]:
    """(llm | None, problem | None) for `FLEETMEM_LLM=openai` (D30), on either backend."""
    if not settings.chat.base_url or not settings.chat.model:
        return None, (
            "FLEETMEM_LLM=openai needs FLEETMEM_LLM_BASE_URL (an OpenAI-compatible chat-completions server) "
            "and FLEETMEM_LLM_MODEL, so synthesize cannot answer."
        )
    return ChatCompletionsLLM(settings), None
