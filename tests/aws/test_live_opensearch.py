"""The live OpenSearch run: with OPENSEARCH_URL set, tests/contract/backends_aws.py registers the
"opensearch-live" backend and the whole SearchIndex contract suite (vector arm included) runs
against that endpoint (`OPENSEARCH_SERVICE=es|aoss` signs requests with SigV4; unset or "none"
sends them unsigned). This module reports the skip once when no endpoint is configured."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.live_opensearch


@pytest.mark.skipif(
    not os.environ.get("OPENSEARCH_URL"),
    reason="OPENSEARCH_URL is unset: the live OpenSearch SearchIndex suite did not run",
)
def test_the_live_search_backend_is_registered_when_an_endpoint_is_set():
    from tests.contract.backends import backends_for

    assert "opensearch-live" in [p.id for p in backends_for("search")]
