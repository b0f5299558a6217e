"""A scripted chat model for synthesize's tests: it stands in for a language model, which cannot run
on this machine (no model weights, no network). It answers as a model would from the prompt the verb
sends, so what the verb does with a model's reply is tested end to end.

`scripted_reply(system, prompt)` reads the question and the retrieved memory out of the prompt and
answers by the word the question carries:
- (none): a JSON answer quoting six words of the first piece of evidence exactly;
- `standin-near`: the same quote with one letter changed (a near quote);
- `standin-fabricate`: one exact quote and one quote that is in no evidence;
- `standin-plain`: a plain-text answer (not the asked-for JSON) with no quote;
- `standin-empty`: a JSON answer whose `answer` is empty;
- `standin-truncate`: a reply cut short at max_tokens;
- `standin-error`: the provider fails (the server answers an error status).
Token counts are the reply's own usage: a quarter of the characters in and out.

`ChatStandIn` serves it as an OpenAI-compatible `POST /v1/chat/completions` on 127.0.0.1 (a free
port); the stack's Bedrock stand-in serves it behind Bedrock's Converse shape.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FABRICATED = "the board voted to move every office to the moon"
_QUESTION = re.compile(r"^Question: (.*)$", re.M)
_EVIDENCE = re.compile(r"<page [^>]*>\n(.*?)\n</page>|<fact [^>]*>(.*?)</fact>", re.S)


class ProviderError(Exception):
    """The scripted provider failure (`standin-error`)."""


@dataclass
class Reply:
    text: str
    truncated: bool
    input_tokens: int
    output_tokens: int


def exact_quote(prompt: str) -> str:
    """Six words of the first piece of evidence in the prompt, as the stand-in quotes them."""
    m = _EVIDENCE.search(prompt)
    text = (m.group(1) or m.group(2)) if m else ""
    return " ".join(text.replace('"', "").split()[:6])


def near(quote: str) -> str:
    """`quote` with one letter of its longest word changed."""
    words = quote.split(" ")
    i = max(range(len(words)), key=lambda k: len(words[k]))
    w = words[i]
    words[i] = w[:-1] + ("x" if w[-1] != "x" else "y")
    return " ".join(words)


def scripted_reply(system: str, prompt: str) -> Reply:
    m = _QUESTION.search(prompt)
    question = m.group(1) if m else ""
    quote = exact_quote(prompt)
    slug = re.search(r'<page slug="([^"]+)"', prompt)
    cite = f" [{slug.group(1)}]" if slug else ""
    truncated = False
    if "standin-error" in question:
        raise ProviderError("scripted provider failure")
    if "standin-truncate" in question:
        text, truncated = '{"answer": "The memory says that the', True
    elif "standin-plain" in question:
        text = "The memory answers this without any quotation."
    elif "standin-empty" in question:
        text = json.dumps({"answer": "", "gaps": []})
    elif "standin-fabricate" in question:
        text = json.dumps({"answer": f'It says "{quote}"{cite} and "{FABRICATED}".', "gaps": []})
    elif "standin-near" in question:
        text = json.dumps({"answer": f'It says "{near(quote)}"{cite}.', "gaps": []})
    else:
        text = json.dumps({"answer": f'It says "{quote}"{cite}.', "gaps": ["what happened next"]})
    return Reply(text, truncated, (len(system) + len(prompt)) // 4, len(text) // 4)


class ChatStandIn:
    """An OpenAI-compatible chat-completions server on 127.0.0.1 answering `scripted_reply`.
    `calls` lists the questions it was asked, `replies` what it answered (with the usage it
    reported); `base_url` is what FLEETMEM_LLM_BASE_URL takes."""

    MODEL = "standin-chat"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.replies: list[Reply] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": {"message": "not found"}})
                    return
                messages = body.get("messages") or []
                system = next((m["content"] for m in messages if m.get("role") == "system"), "")
                prompt = next((m["content"] for m in messages if m.get("role") == "user"), "")
                stand_in.calls.append(_QUESTION.search(prompt).group(1) if _QUESTION.search(prompt) else "")
                try:
                    reply = scripted_reply(system, prompt)
                except ProviderError:
                    self._send(500, {"error": {"message": "scripted provider failure"}})
                    return
                stand_in.replies.append(reply)
                self._send(200, openai_answer(body.get("model") or stand_in.MODEL, reply))

            def _send(self, status: int, doc: dict[str, Any]) -> None:
                raw = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def openai_answer(model: str, reply: Reply) -> dict[str, Any]:
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text},
                "finish_reason": "length" if reply.truncated else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def converse_answer(reply: Reply) -> dict[str, Any]:
    """The reply in Bedrock Converse's response shape."""
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": reply.text}]}},
        "stopReason": "max_tokens" if reply.truncated else "end_turn",
        "usage": {
            "inputTokens": reply.input_tokens,
            "outputTokens": reply.output_tokens,
            "totalTokens": reply.input_tokens + reply.output_tokens,
        },
        "metrics": {"latencyMs": 1},
    }
