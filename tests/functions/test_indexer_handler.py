"""The stream indexer on its events/indexer files (real DynamoDB Local stream records, captured
from the AWS adapters) writing into the real OpenSearch node; HashEmbedder stands in for Bedrock.
The indexer indexes what its tables hold, not what a record says: each test first applies the
writes that made its records to this test's tables (moto's server), as the stores did when the
events were captured."""

from __future__ import annotations

import pytest

from fleetmem.models import SearchQuery

from .conftest import call, load_event

pytestmark = pytest.mark.usefixtures("deps")


def hits(deps, text: str, kinds=("fact",)) -> list:
    deps.search.client.indices.refresh(index=deps.search.index)
    found = deps.search.search(SearchQuery(tenant="acme", text=text, kinds=kinds, world_only=True, k=20))
    return list(found.keyword)


def stored(deps, event: dict) -> dict:
    """The event, after the writes that made its records are applied to the deps' tables."""
    from fleetmem.transport.aws_lambda.indexer import sdk_shaped_record

    db = deps.facts._db
    for record in event["Records"]:
        ddb = sdk_shaped_record(record)["dynamodb"]
        table = deps.pages.table if "sk" in ddb["Keys"] else deps.facts.table
        if record["eventName"] == "REMOVE":
            db.delete_item(TableName=table, Key=ddb["Keys"])
        elif "NewImage" in ddb:
            db.put_item(TableName=table, Item=ddb["NewImage"])
    return event


def fact_ids(event: dict) -> list[str]:
    out = []
    for r in event["Records"]:
        image = r["dynamodb"].get("NewImage") or r["dynamodb"].get("OldImage")
        out.append(image["fact_id"]["S"])
    return out


def test_inserted_facts_are_indexed_and_an_expired_one_is_removed(deps):
    event = stored(deps, load_event("indexer", "facts_insert_and_expire"))
    first, second, _ = fact_ids(event)
    out = call("indexer", event)
    assert out == {"batchItemFailures": []}
    indexed = {h.fact_id for h in hits(deps, "Acme renewal invoices EUR")}
    assert second in indexed
    assert first not in indexed  # the MODIFY record expired it (forget)


def test_a_purged_fact_leaves_the_index(deps):
    insert = stored(deps, load_event("indexer", "facts_insert_and_expire"))
    call("indexer", insert)
    purged_id = fact_ids(load_event("indexer", "facts_purge"))[0]
    assert purged_id in {h.fact_id for h in hits(deps, "invoices EUR")}
    assert call("indexer", stored(deps, load_event("indexer", "facts_purge"))) == {"batchItemFailures": []}
    assert purged_id not in {h.fact_id for h in hits(deps, "invoices EUR")}


def test_page_chunks_follow_insert_modify_and_remove(deps):
    event = load_event("indexer", "pages_insert_modify_remove")
    records = event["Records"]
    assert call("indexer", stored(deps, {"Records": records[:1]})) == {"batchItemFailures": []}
    assert any("Thursday" in h.text for h in hits(deps, "renewal call", kinds=("chunk",)))
    call("indexer", stored(deps, {"Records": records[1:2]}))
    texts = [h.text for h in hits(deps, "renewal call", kinds=("chunk",))]
    assert any("Friday" in t for t in texts) and not any("Thursday" in t for t in texts)
    call("indexer", stored(deps, {"Records": records[2:]}))
    assert hits(deps, "renewal call", kinds=("chunk",)) == []


def test_derived_page_rows_are_ignored(deps):
    assert call("indexer", load_event("indexer", "pages_derived_rows_only")) == {"batchItemFailures": []}


def test_a_poison_record_is_reported_alone_so_only_it_retries_then_reaches_the_dlq(deps):
    event = load_event("indexer", "facts_with_poison_record")
    stored(deps, {"Records": event["Records"][:1]})
    poison = event["Records"][1]["dynamodb"]["SequenceNumber"]
    out = call("indexer", event)
    assert out == {"batchItemFailures": [{"itemIdentifier": poison}]}
    good = event["Records"][0]["dynamodb"]["NewImage"]["fact_id"]["S"]
    assert good in {h.fact_id for h in hits(deps, "Acme renewal Thursday")}


def test_when_opensearch_is_down_every_record_is_reported_for_retry(deps, monkeypatch):
    """Port 9 on 127.0.0.1 (discard) refuses connections: the index is unreachable."""
    from fleetmem.adapters.aws.opensearch import OpenSearchIndex

    down = OpenSearchIndex(
        "http://127.0.0.1:9",
        model_id=deps.search.model_id,
        dim=deps.search.dim,
        prefix="down",
        service="none",
    )
    monkeypatch.setattr(deps, "search", down)
    event = stored(deps, load_event("indexer", "facts_insert_and_expire"))
    out = call("indexer", event)
    assert [f["itemIdentifier"] for f in out["batchItemFailures"]] == [
        r["dynamodb"]["SequenceNumber"] for r in event["Records"]
    ]
