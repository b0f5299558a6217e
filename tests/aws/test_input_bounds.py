"""Bounded work on huge inputs, through the one `dispatch` on SQLite and on the AWS adapter set
(moto server and DynamoDB Local for the tables, the real OpenSearch node for the index), with the
real MiniLM model (the `deps` fixture of test_fact_integrity; nothing is mocked):

- recall refuses a query longer than RECALL_QUERY_MAX characters before any work (invalid_params
  saying what, why and what to do instead) and answers one of exactly that length;
- put_page refuses content over PAGE_CONTENT_MAX_BYTES before it is parsed, and stores nothing.
"""

from __future__ import annotations

import pytest

from fleetmem.memory.verbs import put_page
from fleetmem.protocol import PAGE_CONTENT_MAX_BYTES, RECALL_QUERY_MAX
from fleetmem.transport.dispatch import dispatch
from tests.aws.test_fact_integrity import CALLER, call, deps, minilm  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow


def test_recall_refuses_a_query_over_the_cap_before_any_work(deps, monkeypatch):
    def no_embedding(*_a, **_k):
        raise AssertionError("an over-long query was embedded")

    monkeypatch.setattr(deps.embedder, "embed", no_embedding)
    result = dispatch("recall", {"query": "q" * (RECALL_QUERY_MAX + 1)}, CALLER, deps)
    assert result.is_error
    body = result.body
    assert body["code"] == "invalid_params" and body["class"] == "caller"
    assert body["detail"] == {"field": "query", "reason": "too_long", "limits": {"query": RECALL_QUERY_MAX}}
    assert f"{RECALL_QUERY_MAX + 1:,}" in body["message"]
    assert "Problem:" in body["suggestion"] and "Fix:" in body["suggestion"]
    assert "q" * 100 not in str(body)  # the refusal does not echo the query back
    monkeypatch.undo()
    ok = call(deps, "recall", query="ledger " * (RECALL_QUERY_MAX // 7) + "x" * (RECALL_QUERY_MAX % 7))
    assert "facts" in ok


def test_put_page_refuses_content_over_the_cap_before_parsing_it(deps, monkeypatch):
    def no_parse(*_a, **_k):
        raise AssertionError("over-large content was parsed")

    monkeypatch.setattr(put_page, "parse_page_content", no_parse)
    content = "---\ntitle: Huge\n---\n" + "w" * (PAGE_CONTENT_MAX_BYTES + 1)
    result = dispatch("put_page", {"slug": "notes/huge", "content": content}, CALLER, deps)
    assert result.is_error and result.body["code"] == "invalid_params"
    assert result.body["detail"]["max_content_bytes"] == PAGE_CONTENT_MAX_BYTES
    assert result.body["detail"]["content_bytes"] == len(content.encode("utf-8"))
    assert "split it into several pages" in result.body["suggestion"]
    monkeypatch.undo()
    assert deps.pages.get(CALLER.tenant, "notes/huge") is None
