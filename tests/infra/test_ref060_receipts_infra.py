"""D22 write receipts in the synthesized template (offline): the idempotency table keeps its key
schema (a partition key `pk` alone, so a deployed table updates in place) and gains the `by_owner`
index the receipts are listed from, without projecting the stored answers; the three receipt tools
are served by the admin function, whose table map names them."""

from __future__ import annotations

import json

from tests.infra.test_stack import _env, _text

from fleetmem.adapters.aws.tables import IDEMPOTENCY
from fleetmem.config import ENV_TOOL_FUNCTIONS
from fleetmem.lambda_routes import ADMIN_GROUP, function_group
from fleetmem.protocol import RECEIPT_TOOLS


def _idempotency_table(synth) -> dict:
    name = IDEMPOTENCY.physical_name(synth.config.prefix)
    (props,) = [
        t["Properties"]
        for t in synth.resources("AWS::DynamoDB::GlobalTable").values()
        if t["Properties"]["TableName"] == name
    ]
    return props


def test_the_idempotency_table_keeps_its_key_schema_and_gains_the_by_owner_index(domain_synth):
    props = _idempotency_table(domain_synth)
    assert props["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    (gsi,) = props["GlobalSecondaryIndexes"]
    assert gsi["IndexName"] == "by_owner"
    assert gsi["KeySchema"] == [
        {"AttributeName": "owner", "KeyType": "HASH"},
        {"AttributeName": "created_at", "KeyType": "RANGE"},
    ]
    projected = set(gsi["Projection"].get("NonKeyAttributes", []))
    assert gsi["Projection"]["ProjectionType"] == "INCLUDE"
    assert {"state", "client_request_id", "outcome", "updated_at"} <= projected
    assert "result" not in projected  # a stored answer may hold fact text; the index never does


def test_the_receipt_tools_are_served_by_the_admin_function(domain_synth):
    assert {function_group(t) for t in RECEIPT_TOOLS} == {ADMIN_GROUP}
    table = json.loads(_text(_env(domain_synth, "mcp")[ENV_TOOL_FUNCTIONS]))
    assert {table[t] for t in RECEIPT_TOOLS} == {table["whoami"]}
