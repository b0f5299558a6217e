"""A served `tools/call` answer is serialised once, and its bytes are the SDK's.

The direct answer (`fast_call.FastToolCalls`) applies the protocol version's sieve to the result's
frame only and puts the text block and `structuredContent` back for the one `model_dump_json`
(`fast_call.sieved_result`). Two real apps over one SQLite store, one with the direct answer and one
where the SDK answers every request (`fast_calls=False`, the path that dumps, sieves and validates
the whole answer), each served on 127.0.0.1: real reads of a seeded memory (pages, facts with
Unicode, quotes, control characters and numbers; answers with notices in `_meta`; an error
envelope) must come back byte for byte the same from both (correlation ids and the `latency_ms`
that `entity` reports aside), and parse to
equal documents with the same key order at every level.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_types import methods as sdk_methods

from fleetmem.adapters.local import open_local
from fleetmem.adapters.local.clock import FixedClock
from fleetmem.ports import Deps
from fleetmem.tokens import create_client
from fleetmem.transport.http_local import build_local_app, serve_in_thread
from fleetmem.wiring import HashEmbedder, SortableIds
from tests.transport.test_fast_call import ACCEPT, CID, _call
from tests.transport.test_token_lookup import NOW

FACTS = [
    ("Priya Raman leads the “Atlas” migration; budget 1.5e6 €, due 2027-03-01.", "people/priya-raman"),
    ('Daniel said "ship it" \\ then left\ttabbed — 東京 office, 😀 mood.', "people/daniel"),
    ("Maya's puppy is a border collie named Kiwi; walks at 07:30 and 18:00.", "people/maya"),
    ("The Atlas migration moves 20,000 pages from the old wiki, 0.1% lost in the dry run.", "projects/atlas"),
    ("Priya and Daniel review Atlas every Tuesday\nnotes go to the shared drive.", "projects/atlas"),
]

PAGES = [
    ("people/priya-raman", "---\ntitle: Priya Raman\naliases: [Priya]\n---\nPriya leads **Atlas** (東京 ↔ Berlin).\n"),
    ("projects/atlas", "---\ntitle: Atlas\n---\nThe wiki migration. Owner: [Priya](people/priya-raman).\n"),
    ("people/daniel", '---\ntitle: Daniel\n---\nReviews Atlas; "quotes" and a \\ backslash.\n'),
]

#: (label, version header, request): reads over the seeded memory, each answered directly.
READS: list[tuple[str, str, dict[str, Any]]] = [
    ("recall by query", "2025-06-18", _call(1, "recall", {"query": "Atlas migration budget", "limit": 10})),
    ("recall by entity", "2025-11-25", _call(2, "recall", {"entity": "projects/atlas"})),
    ("get_page", "2025-06-18", _call(3, "get_page", {"slug": "people/priya-raman"})),
    ("delta", "2025-03-26", _call(4, "delta", {"since": "2020-01-01T00:00:00Z"})),
    ("list_pages", "2024-11-05", _call(5, "list_pages", {"limit": 20})),
    ("context_pack", "2025-06-18", _call(6, "context_pack", {"entities": ["projects/atlas", "people/daniel"]})),
    ("a read with a notice", "2025-06-18", _call(7, "entity", {"name": "Priya Raman", "colour": "blue"})),
    ("an error envelope", "2025-06-18", _call(8, "get_page", {"slug": "nobody/nothing"})),
]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    data_dir = tmp_path / "data"
    stores = open_local(data_dir)
    deps = Deps.over(stores, clock=FixedClock(NOW), ids=SortableIds(), embedder=HashEmbedder())
    token = create_client(stores.clients, FixedClock(NOW), tenant="t1", client_id="rw", scopes=("read", "write"))[0]
    fast = build_local_app(lambda: deps, data_dir=data_dir)
    sdk = build_local_app(lambda: deps, data_dir=data_dir, fast_calls=False)
    with serve_in_thread(fast) as fast_url, serve_in_thread(sdk) as sdk_url:
        with httpx.Client(timeout=20) as client:
            for n, (slug, content) in enumerate(PAGES):
                r = _post(
                    client, fast_url, token, "2025-06-18", _call(90 + n, "put_page", {"slug": slug, "content": content})
                )
                assert b'"isError":false' in r.content, r.content
            for n, (fact, entity) in enumerate(FACTS):
                r = _post(client, fast_url, token, "2025-06-18", _call(100 + n, "remember", _fact(fact, entity)))
                assert b'"isError":false' in r.content, r.content
        yield fast_url, sdk_url, token
    stores.close()


def _fact(fact: str, entity: str) -> dict[str, Any]:
    return {"fact": fact, "entity": entity, "provenance": "meeting notes"}


def _post(client: httpx.Client, url: str, token: str, version: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Content-Type": "application/json"}
    return client.post(
        f"{url}/mcp", content=json.dumps(body).encode(), headers={**headers, "MCP-Protocol-Version": version}
    )


#: `entity` reports how long its lookup took (`latency_ms`), which differs from call to call.
LATENCY = re.compile(rb'(latency_ms\\?":\s?)\d+')


def _masked(raw: bytes) -> bytes:
    """The answer with what differs by design between two calls (correlation ids, a reported
    latency) replaced by placeholders."""
    return LATENCY.sub(rb"\g<1>0", CID.sub(b"c_" + b"0" * 32, raw))


def _ordered(raw: bytes) -> Any:
    """The document with every object as its list of (key, value) pairs: equal only in the same order."""
    return json.loads(raw, object_pairs_hook=list)


def test_served_answers_are_the_bytes_the_sdk_path_sends(served: tuple[str, str, str]) -> None:
    fast_url, sdk_url, token = served
    with httpx.Client(timeout=20) as client:
        for label, version, body in READS:
            sdk = _post(client, sdk_url, token, version, body)
            fast = _post(client, fast_url, token, version, body)
            assert fast.status_code == sdk.status_code == 200, label
            sdk_bytes, fast_bytes = _masked(sdk.content), _masked(fast.content)
            assert fast_bytes == sdk_bytes, label
            assert json.loads(fast_bytes) == json.loads(sdk_bytes), label
            assert _ordered(fast_bytes) == _ordered(sdk_bytes), label
            result = json.loads(fast_bytes)["result"]
            if label == "an error envelope":
                assert result["isError"] is True and "structuredContent" not in result
            else:  # a real answer: the text block and structuredContent are the same document
                assert result["isError"] is False, (label, result["content"][0]["text"][:400])
                assert json.loads(result["content"][0]["text"]) == result["structuredContent"], label
    # the reads really carried what the splice must keep: notices in _meta, text beyond ASCII
    with httpx.Client(timeout=20) as client:
        answers = {label: _post(client, fast_url, token, v, b).content for label, v, b in READS}
    assert b'"fleetmem/notices"' in answers["a read with a notice"]
    everything = b"".join(answers.values())
    assert "東京".encode() in everything and "😀".encode() in everything and b"\\\\ then" in everything


def test_the_version_sieve_reads_the_frame_and_never_the_answers_body(
    served: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The body is walked by the one `model_dump_json`: the sieve (a validation and a dump of what
    it is given) sees the result with its text blanked and `structuredContent` empty."""
    fast_url, _, token = served
    seen: list[dict[str, Any]] = []
    real = sdk_methods.serialize_server_result

    def sieve(method: str, version: str, data: Any, **kw: Any) -> dict[str, Any]:
        seen.append(json.loads(json.dumps(data)))
        return real(method, version, data, **kw)

    monkeypatch.setattr(sdk_methods, "serialize_server_result", sieve)
    with httpx.Client(timeout=20) as client:
        for label, version, body in READS[:3]:
            answer = json.loads(_post(client, fast_url, token, version, body).content)["result"]
            assert answer["structuredContent"] and answer["content"][0]["text"], label
    assert len(seen) == 3
    for frame in seen:
        assert frame["structuredContent"] == {}
        assert [c["text"] for c in frame["content"]] == [""]
