"""`fleetmem token --backend aws` mints and lists tokens in a deployed stage's Clients table.

The stage is a moto server on 127.0.0.1 (the same engine the AWS adapter suites use); the CLI finds
it through the standard AWS environment (AWS_ENDPOINT_URL_DYNAMODB, credentials, region) and the
table prefix, exactly as it would find a real stage.
"""

from __future__ import annotations

import pytest

from fleetmem.tokens import hash_token
from tests.aws import engines
from tests.cli.conftest import Fleetmem


@pytest.fixture
def aws_env(request: pytest.FixtureRequest) -> dict[str, str]:
    endpoint = engines.moto_endpoint(request.config)
    prefix = engines.fresh_prefix()
    engines.tables_for(endpoint, prefix)
    return {
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
        "AWS_ACCESS_KEY_ID": engines.CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": engines.CREDENTIALS["aws_secret_access_key"],
        "AWS_REGION": "us-east-1",
        "FLEETMEM_TABLE_PREFIX": prefix,
        "_PREFIX": prefix,
        "_ENDPOINT": endpoint,
    }


def test_token_create_with_backend_aws_stores_the_hash_in_the_stage(fm: Fleetmem, aws_env: dict[str, str]) -> None:
    run = fm(
        "token",
        "create",
        "--backend",
        "aws",
        "--client",
        "fleet-a",
        "--scopes",
        "read,write",
        "--tenant",
        "acme",
        "--json",
        env=aws_env,
        data_dir=False,
    )
    assert run.code == 0, run.stdout + run.stderr
    token = run.json()["token"]
    stores = engines.open_stores(aws_env["_ENDPOINT"], aws_env["_PREFIX"])
    record = stores.clients.by_hash(hash_token(token))
    assert record is not None
    assert (record.tenant, record.client_id, sorted(record.scopes)) == ("acme", "fleet-a", ["read", "write"])
    listed = fm("token", "list", "--backend", "aws", "--json", env=aws_env, data_dir=False).json()["tokens"]
    assert [t["client"] for t in listed] == ["fleet-a"]
    assert token not in str(listed)
