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
        "from fleetmem.config import Settings\n"
        "stores = aws.open_aws(Settings(backend='aws', region='us-east-1',"
        " opensearch_endpoint='https://search.example.invalid'))\n"
        "assert 'boto3' not in sys.modules and 'opensearchpy' not in sys.modules, 'SDK imported eagerly'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-400:]
