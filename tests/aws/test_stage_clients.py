"""`fleetmem stage clients sync`: the deploy config's clients made on a stage after its deploy.

Real components: the stage's user pool on moto's server (Cognito's admin API: app clients, the
resource server; Cognito's hosted token endpoint is not needed here) and the clients table on
DynamoDB Local. The command runs in-process through `fleetmem.cli.main`, with the environment a
stage's operator has (`--backend aws`, the table prefix, the endpoints)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import boto3
import pytest

from fleetmem.adapters.local.clock import SystemClock
from fleetmem.cli import main
from fleetmem.tokens import cognito_client_mapping, mark_tenant_deleted
from tests.aws import engines

EXAMPLE = Path(__file__).resolve().parents[2] / "infra" / "config.example.json"


@pytest.fixture
def stage(monkeypatch, tmp_path, moto_endpoint, dynamodb_local_endpoint):
    """A deployed stage's pool (moto) and clients table (DynamoDB Local), and the operator's env."""
    prefix = engines.fresh_prefix()
    stores = engines.open_stores(dynamodb_local_endpoint, prefix)
    idp = boto3.client("cognito-idp", endpoint_url=moto_endpoint, **engines.CREDENTIALS)
    pool = idp.create_user_pool(PoolName=f"{prefix}-{uuid.uuid4().hex[:6]}")["UserPool"]["Id"]
    idp.create_resource_server(
        UserPoolId=pool,
        Identifier="fleetmem",
        Name="fleetmem",
        Scopes=[{"ScopeName": s, "ScopeDescription": s} for s in ("read", "write", "admin")],
    )
    env = {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb_local_endpoint,
        "AWS_ENDPOINT_URL_COGNITO_IDENTITY_PROVIDER": moto_endpoint,
        "FLEETMEM_BACKEND": "aws",
        "FLEETMEM_TABLE_PREFIX": prefix,
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    config = json.loads(EXAMPLE.read_text())
    path = tmp_path / "fleetmem.deploy.json"
    path.write_text(json.dumps(config))
    return {"prefix": prefix, "stores": stores, "idp": idp, "pool": pool, "config": config, "path": path}


def sync(stage, capsys) -> tuple[int, dict]:
    capsys.readouterr()
    argv = ["stage", "clients", "sync", "--config", str(stage["path"]), "--user-pool-id", stage["pool"], "--json"]
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def app_clients(stage) -> dict[str, dict]:
    idp, pool = stage["idp"], stage["pool"]
    listed = idp.list_user_pool_clients(UserPoolId=pool, MaxResults=60)["UserPoolClients"]
    return {
        c["ClientName"]: idp.describe_user_pool_client(UserPoolId=pool, ClientId=c["ClientId"])["UserPoolClient"]
        for c in listed
    }


def test_sync_creates_each_configured_clients_app_client_and_maps_it_with_its_tier(stage, capsys):
    code, out = sync(stage, capsys)
    assert code == 0, out
    made = app_clients(stage)
    cfg = stage["config"]
    assert set(made) == {f"{stage['prefix']}-{c['client_id']}" for c in cfg["clients"]}
    now = SystemClock().now()
    for c in cfg["clients"]:
        app = made[f"{stage['prefix']}-{c['client_id']}"]
        # as the template made them: client credentials, a secret, the client's scopes, short tokens
        assert app["AllowedOAuthFlows"] == ["client_credentials"]
        assert app["ClientSecret"]
        assert sorted(app["AllowedOAuthScopes"]) == sorted(f"fleetmem/{s}" for s in c["scopes"])
        assert app["AccessTokenValidity"] == cfg["cognito"]["access_token_minutes"]
        assert app["TokenValidityUnits"]["AccessToken"] == "minutes"
        mapped = cognito_client_mapping(stage["stores"].clients, app["ClientId"], now)
        assert mapped is not None
        assert (mapped.tenant, mapped.client_id, mapped.tier) == (c["tenant"], c["client_id"], c["tier"])
    assert {r["app_client"] for r in out["clients"]} == {"created"}
    assert {r["mapping"] for r in out["clients"]} == {"created"}
    assert all("secret" not in json.dumps(r).lower() for r in out["clients"])  # no secret is printed


def test_a_second_sync_changes_nothing(stage, capsys):
    assert sync(stage, capsys)[0] == 0
    before = {n: a["ClientId"] for n, a in app_clients(stage).items()}
    code, out = sync(stage, capsys)
    assert code == 0
    assert {n: a["ClientId"] for n, a in app_clients(stage).items()} == before
    assert {(r["app_client"], r["mapping"]) for r in out["clients"]} == {("existing", "unchanged")}


def test_a_client_moved_to_another_tier_is_reported_not_rewritten(stage, capsys):
    """An app client keeps the identity its tokens were issued under: the report says how to
    replace it, the stored mapping stays, the command exits 1."""
    assert sync(stage, capsys)[0] == 0
    stage["config"]["clients"][1]["tier"] = "fleet"
    stage["path"].write_text(json.dumps(stage["config"]))
    code, out = sync(stage, capsys)
    assert code == 1
    moved = next(r for r in out["clients"] if r["client_id"] == stage["config"]["clients"][1]["client_id"])
    assert moved["mapping"] == "differs" and moved["mapped"]["tier"] == "standard"
    mapped = cognito_client_mapping(stage["stores"].clients, moved["app_client_id"], SystemClock().now())
    assert mapped is not None and mapped.tier == "standard"
    assert out["problems"] == 1


def test_a_client_of_a_deleted_tenant_gets_no_app_client_and_no_mapping(stage, capsys):
    mark_tenant_deleted(stage["stores"].clients, SystemClock(), "acme")
    code, out = sync(stage, capsys)
    assert code == 1
    assert {(r["app_client"], r["mapping"]) for r in out["clients"]} == {("none", "tenant_deleted")}
    assert app_clients(stage) == {}


def test_a_client_naming_a_tier_the_config_lacks_is_refused_before_anything_is_made(stage, capsys):
    stage["config"]["clients"][0]["tier"] = "gold"
    stage["path"].write_text(json.dumps(stage["config"]))
    capsys.readouterr()
    argv = ["stage", "clients", "sync", "--config", str(stage["path"]), "--user-pool-id", stage["pool"], "--json"]
    assert main(argv) == 2
    said = capsys.readouterr()
    assert "unknown tier 'gold'" in said.out + said.err
    assert app_clients(stage) == {}
