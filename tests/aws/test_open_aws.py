"""`open_aws(settings)`: the AWS stores are chosen by configuration alone (no connection made)."""

from __future__ import annotations

import pytest

from fleetmem.adapters.aws import open_aws
from fleetmem.adapters.aws.opensearch import OpenSearchIndex
from fleetmem.config import AwsSettings, BedrockSettings, SearchSettings, Settings
from fleetmem.errors import Unavailable
from fleetmem.models import SearchQuery

PORTS = ("facts", "pages", "cursors", "clients", "idempotency", "audit", "search")


def test_every_port_is_present_and_tables_follow_the_prefix():
    stores = open_aws(Settings(backend="aws", aws=AwsSettings(region="eu-west-1", table_prefix="acme")))
    assert all(getattr(stores, p) is not None for p in PORTS)
    assert stores.facts.table == "acme-facts" and stores.cursors.table == "acme-cursors"


def test_without_an_opensearch_endpoint_search_is_unavailable_and_says_which_setting():
    stores = open_aws(Settings(backend="aws", aws=AwsSettings(region="eu-west-1")))
    with pytest.raises(Unavailable) as err:
        stores.search.search(SearchQuery(tenant="t1", text="tea"))
    assert err.value.reason == "not_configured"
    assert stores.search.write_through is False


def test_the_search_index_is_keyed_by_the_configured_embedding_model():
    settings = Settings(
        backend="aws",
        aws=AwsSettings(region="eu-west-1"),
        search=SearchSettings(endpoint="https://search.example.invalid", service="aoss"),
        bedrock=BedrockSettings(embedding_dim=512),
    )
    search = open_aws(settings).search
    assert isinstance(search, OpenSearchIndex)
    assert search.index == "fleetmem-docs-amazon-titan-embed-text-v2-0-512-v2"
    assert (search.service, search.dim, search.write_through) == ("aoss", 512, False)
    assert search.flavour == "serverless"  # aoss: the collection generates `_id`s


def test_write_through_is_opt_in_for_runs_without_a_stream_indexer():
    settings = Settings(
        backend="aws",
        search=SearchSettings(endpoint="http://127.0.0.1:9", service="none", write_through=True),
    )
    assert open_aws(settings).search.write_through is True
    assert open_aws(settings).search.flavour == "domain"
