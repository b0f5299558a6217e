"""The pure-Python table spec creates the tables the adapters use, on both local engines, and
importing the AWS adapters connects to nothing."""

from __future__ import annotations

import subprocess
import sys

from fleetmem.adapters.aws.tables import TABLES, create_table_request, create_tables, table_names
from tests.aws import engines


def test_every_table_is_created_with_its_keys_indexes_stream_and_ttl(ddb_endpoint):
    prefix = engines.fresh_prefix()
    client = engines.dynamodb_client(ddb_endpoint)
    created = create_tables(client, prefix)
    assert sorted(created) == sorted(table_names(prefix).values())
    assert create_tables(client, prefix) == []  # idempotent
    for spec in TABLES:
        desc = client.describe_table(TableName=spec.physical_name(prefix))["Table"]
        keys = {k["AttributeName"]: k["KeyType"] for k in desc["KeySchema"]}
        assert keys[spec.partition.name] == "HASH"
        assert {g["IndexName"] for g in desc.get("GlobalSecondaryIndexes", [])} == {g.name for g in spec.gsis}
        assert bool(desc.get("StreamSpecification", {}).get("StreamEnabled")) == bool(spec.stream)
        ttl = client.describe_time_to_live(TableName=spec.physical_name(prefix))["TimeToLiveDescription"]
        if spec.ttl_attribute:
            assert ttl["TimeToLiveStatus"] in {"ENABLED", "ENABLING"}
            assert ttl["AttributeName"] == spec.ttl_attribute
        else:
            assert ttl["TimeToLiveStatus"] == "DISABLED"


def test_every_partition_key_is_documented_as_tenant_scoped_or_credential_derived():
    # the clients table is keyed by the token hash: the credential decides the tenant
    for spec in TABLES:
        req = create_table_request(spec, "p")
        assert req["BillingMode"] == "PAY_PER_REQUEST"
        assert ("tenant" in spec.purpose) or spec.logical == "clients" or spec.partition.name == "pk"


def test_importing_the_aws_adapters_loads_no_sdk_and_connects_nowhere():
    code = (
        "import sys, socket\n"
        "def refuse(*a, **k): raise AssertionError('connected at import')\n"
        "socket.socket.connect = refuse\n"
        "import fleetmem.adapters.aws as aws, fleetmem.adapters.aws.tables\n"
        "from fleetmem.config import AwsSettings, SearchSettings, Settings\n"
        "stores = aws.open_aws(Settings(backend='aws', aws=AwsSettings(region='us-east-1'),"
        " search=SearchSettings(endpoint='https://search.example.invalid')))\n"
        "assert 'boto3' not in sys.modules and 'opensearchpy' not in sys.modules, 'SDK imported eagerly'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-400:]


def test_the_facts_indexes_project_what_their_queries_read_and_the_vector_only_where_read():
    """The three facts GSIs used to project ALL, copying each fact's ~4 KB vector into every index.
    Each now carries exactly the attributes a fact query reads; only by_entity and by_time, whose
    results feed remember's near-duplicate check, also carry the vector."""
    from datetime import UTC, datetime

    from fleetmem.adapters.aws.facts import fact_to_item
    from fleetmem.adapters.aws.tables import FACT_INDEX_ATTRS, FACTS
    from fleetmem.models import Fact

    f = Fact(
        tenant="t",
        fact_id="f_1",
        seq=1,
        text="x",
        provenance="p",
        client_id="c",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    # every attribute a fact item carries, less the vector and the key attributes (which
    # item_to_fact does not read; an index always holds its own and the table's keys)
    keys = {FACTS.partition.name} | {a.name for g in FACTS.gsis for a in (g.partition, g.sort) if a}
    # content_origin (D24) rides no index: a projection change replaces an index, and a deployed
    # table takes one index change per update
    written = set(fact_to_item(f)) - {"vector", "content_origin"} - keys
    assert set(FACT_INDEX_ATTRS) == written
    assert not any("content_origin" in g.projection for g in FACTS.gsis if isinstance(g.projection, tuple))
    # by_time also carries cs (delta turns a `since` into a change position through it) and, to stay
    # within DynamoDB's 20 projected attributes, leaves out who expired a fact and why (trace_fact
    # reads those from the base item)
    expected = {
        "by_entity": written | {"vector"},
        "by_session": written,
        "by_time": (written - {"expired_reason", "expired_by"}) | {"vector", "cs"},
        "by_change": written | {"ct"},  # D21: when the change was numbered (the settle horizon)
        "by_expiry": written,  # D19: delta's TTL retractions
    }
    req = create_table_request(FACTS, "p")
    assert {g.name for g in FACTS.gsis} == set(expected)
    for g in FACTS.gsis:
        assert isinstance(g.projection, tuple)
        assert len(g.projection) <= 20
        assert set(g.projection) == expected[g.name]
        (idx,) = [i for i in req["GlobalSecondaryIndexes"] if i["IndexName"] == g.name]
        assert idx["Projection"] == {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(g.projection)}


def test_fact_queries_return_what_their_index_projects(ddb_endpoint):
    """On both local engines: the by_session index rows really lack the vector (read straight from
    the GSI) and by_session returns the facts without it but otherwise whole; by_entity and recent
    return each fact exactly as `get` does, vector included (remember's dedup reads it)."""
    from datetime import UTC, datetime, timedelta

    from fleetmem.models import Fact

    prefix = engines.fresh_prefix()
    stores = engines.open_stores(ddb_endpoint, prefix)
    now = datetime(2026, 3, 1, tzinfo=UTC)
    made = []
    for i in range(3):
        f = Fact(
            tenant="acme",
            fact_id=f"f_{i}",
            seq=stores.facts.next_seq("acme"),
            text=f"fact {i}",
            provenance="test",
            client_id="planner",
            entity_slug="people/alice",
            session_id="s1",
            created_at=now - timedelta(minutes=i),
            vector=bytes([i + 1]) * 16 if i < 2 else None,
            vector_model="m-1" if i < 2 else None,
        )
        stores.facts.put(f)
        made.append(f)
    client = engines.dynamodb_client(ddb_endpoint)
    rows = client.query(
        TableName=f"{prefix}-facts",
        IndexName="by_session",
        KeyConditionExpression="sess = :s",
        ExpressionAttributeValues={":s": {"S": "acme#s1"}},
    )["Items"]
    assert len(rows) == 3 and not any("vector" in r for r in rows)
    whole = [stores.facts.get("acme", f.fact_id) for f in made]
    assert whole == made
    assert stores.fact_listing.by_entity("acme", "people/alice", now=now, world_only=False) == whole
    assert stores.fact_listing.recent("acme", now=now, world_only=False) == whole
    assert stores.fact_listing.by_session("acme", "s1", now=now, world_only=False) == [
        f.model_copy(update={"vector": None}) for f in whole
    ]
