"""`fleetmem tenant delete TENANT --backend aws` on a stage's stores: DynamoDB Local for the tables,
the run's OpenSearch node for the index (indexed as each write lands, write-through), moto's SQS
for the stage's queues. Two tenants are written through the CLI on the AWS backend (pages, facts in
every state, a deleted page, cursors, idempotency records, audit, tokens, search documents, a
heartbeat message each); one is deleted, and every table is then Scanned whole for any item of it,
the index counted for its documents, the queue read for its messages, and the other tenant compared
with what it held before. No API serves these stores, so the deletion runs with `--no-wait` (the
wait and the race it closes are tests/stack/test_stack_tenant_delete.py's). Nothing is mocked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleetmem.adapters.aws.dynamo import from_ddb
from fleetmem.adapters.aws.tables import TABLES, table_names
from tests.aws import engines
from tests.cli import conftest as cli_conftest
from tests.cli.conftest import Fleetmem
from tests.cli.test_pack import seed

pytestmark = [pytest.mark.slow, pytest.mark.dynamodb_local]

fm = cli_conftest.fm  # the CLI tests' runner (its environment: the hash embedder)

GONE, KEPT = "acme", "default"
#: every attribute a table or index is keyed by: where a tenant can sit in a key
KEY_ATTRS = frozenset(
    a.name for t in TABLES for a in (t.partition, t.sort, *(x for g in t.gsis for x in (g.partition, g.sort))) if a
)


@pytest.fixture
def stage(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """The environment that names a stage on DynamoDB Local and the OpenSearch node, its index
    prefix deleted at the end."""
    endpoint = engines.dynamodb_local_endpoint(request.config)
    search_url = engines.opensearch_endpoint(request.config)
    prefix = engines.fresh_prefix()
    engines.tables_for(endpoint, prefix)
    env = {
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
        "AWS_ENDPOINT_URL_SQS": engines.moto_endpoint(request.config),
        "AWS_ACCESS_KEY_ID": engines.CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": engines.CREDENTIALS["aws_secret_access_key"],
        "AWS_REGION": "us-east-1",
        "FLEETMEM_TABLE_PREFIX": prefix,
        "FLEETMEM_OPENSEARCH_ENDPOINT": search_url,
        "FLEETMEM_OPENSEARCH_SERVICE": "none",
        "FLEETMEM_OPENSEARCH_INDEX_PREFIX": prefix,
    }
    from opensearchpy import OpenSearch

    search = OpenSearch(hosts=[search_url])
    yield env, prefix, endpoint, search
    search.indices.delete(index=f"{prefix}-docs-*", ignore_unavailable=True)
    search.close()


def tenant_items(endpoint: str, prefix: str, tenant: str) -> dict[str, int]:
    """Items of `tenant` in each table, by a whole-table Scan: an item whose `tenant` is it, or any
    of whose key attributes (table or index) is it or starts with `<tenant>#`."""
    db = engines.dynamodb_client(endpoint)
    found: dict[str, int] = {}
    for logical, name in table_names(prefix).items():
        n = 0
        for page in db.get_paginator("scan").paginate(TableName=name, ConsistentRead=True):
            for item in map(from_ddb, page["Items"]):
                assert item is not None
                keys = [str(v) for k, v in item.items() if k in KEY_ATTRS]
                if item.get("tenant") == tenant or any(v == tenant or v.startswith(f"{tenant}#") for v in keys):
                    n += 1
        found[logical] = n
    return found


def docs(search: Any, prefix: str, tenant: str) -> int:
    search.indices.refresh(index=f"{prefix}-docs-*")
    return int(search.count(index=f"{prefix}-docs-*", body={"query": {"term": {"tenant": tenant}}})["count"])


def heartbeat_queue(env: dict[str, str], prefix: str) -> tuple[Any, str]:
    import boto3

    sqs = boto3.client("sqs", endpoint_url=env["AWS_ENDPOINT_URL_SQS"], **engines.CREDENTIALS)
    return sqs, sqs.create_queue(QueueName=f"{prefix}-heartbeat")["QueueUrl"]


def queued_tenants(sqs: Any, url: str) -> list[str]:
    """The tenants the queue's messages name, read without hiding them (visibility 0)."""
    seen: dict[str, str] = {}
    for _ in range(3):
        out = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        seen.update({m["MessageId"]: json.loads(m["Body"])["tenant"] for m in out.get("Messages") or []})
    return sorted(seen.values())


def write_tenant(fm: Fleetmem, tenant: str) -> None:
    """Pages, facts in every state, a deleted page, a token, a cursor and an idempotency record."""
    seed(fm, tenant)
    assert fm("token", "create", "--client", "bot", "--scopes", "read,write", "--tenant", tenant).code == 0
    assert fm("delta", "--session-id", "wake", "--tenant", tenant).code == 0
    run = fm("remember", "A keyed fact", "--provenance", "t", "--idempotency-key", "k1", "--tenant", tenant)
    assert run.code == 0, run.stderr


def recall(fm: Fleetmem, tenant: str) -> list[tuple[str, Any]]:
    run = fm("recall", "--query", "alice tea", "--include-private", "--include-expired", "--tenant", tenant, "--json")
    assert run.code == 0, run.stderr
    return sorted((f["fact_id"], f.get("status")) for f in run.json()["facts"])


def test_tenant_delete_on_aws_leaves_nothing_of_the_tenant_in_any_store_and_keeps_the_other(
    fm: Fleetmem, stage: Any, tmp_path: Path
) -> None:
    env, prefix, endpoint, search = stage
    aws = Fleetmem(
        tmp_path / "unused", {**fm.env, **env, "FLEETMEM_BACKEND": "aws", "FLEETMEM_OPENSEARCH_WRITE_THROUGH": "1"}
    )
    sqs, queue = heartbeat_queue(env, prefix)
    for tenant in (GONE, KEPT):
        write_tenant(aws, tenant)
        sqs.send_message(QueueUrl=queue, MessageBody=json.dumps({"tenant": tenant, "delta": {}}))
    before = tenant_items(endpoint, prefix, GONE)
    assert all(before.values()), before  # every table holds something of the tenant
    assert docs(search, prefix, GONE) > 0
    kept = (tenant_items(endpoint, prefix, KEPT), docs(search, prefix, KEPT), recall(aws, KEPT))
    assert kept[2], kept  # the other tenant's recall finds its facts

    dry = aws("tenant", "delete", GONE, "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    assert dry.json()["rows"] == {**before, "search": docs(search, prefix, GONE), "queues": 1}
    asked = aws("tenant", "delete", GONE)
    assert asked.code == 3 and "--backend aws --yes" in asked.stderr  # no --yes: deletes nothing
    assert tenant_items(endpoint, prefix, GONE) == before

    run = aws("tenant", "delete", GONE, "--backend", "aws", "--yes", "--no-wait", "--json")
    assert run.code == 0, run.stderr
    assert run.json()["rows"]["facts"] == before["facts"] and run.json()["left"] == 0
    assert run.json()["rows"]["queues"] == 1 and run.json()["revoked"] == 1
    assert "delete: pages" in run.stderr and "revoke: 1 API token(s) revoked" in run.stderr  # progress on stderr
    assert tenant_items(endpoint, prefix, GONE) == dict.fromkeys(before, 0)  # store by store: nothing
    assert docs(search, prefix, GONE) == 0
    assert queued_tenants(sqs, queue) == [KEPT]
    refused = aws("token", "create", "--client", "bot", "--scopes", "read", "--tenant", GONE)
    assert refused.code == 2 and "was deleted" in refused.stderr  # no new credential for it
    assert tenant_items(endpoint, prefix, GONE)["clients"] == 0
    assert (tenant_items(endpoint, prefix, KEPT), docs(search, prefix, KEPT), recall(aws, KEPT)) == kept

    again = aws("tenant", "delete", GONE, "--yes", "--json")
    assert again.code == 0 and "nothing to delete" in again.stderr
    assert set(again.json()["rows"].values()) == {0}


def test_tenant_delete_on_aws_without_a_search_endpoint_is_refused_and_deletes_nothing(
    fm: Fleetmem, stage: Any, tmp_path: Path
) -> None:
    env, prefix, endpoint, _ = stage
    aws = Fleetmem(tmp_path / "unused", {**fm.env, **env, "FLEETMEM_BACKEND": "aws"})
    assert aws("token", "create", "--client", "bot", "--scopes", "read", "--tenant", GONE).code == 0
    no_search = {k: v for k, v in env.items() if k != "FLEETMEM_OPENSEARCH_ENDPOINT"}
    run = aws("tenant", "delete", GONE, "--yes", env={**no_search, "FLEETMEM_OPENSEARCH_ENDPOINT": ""})
    assert run.code == 2 and "FLEETMEM_OPENSEARCH_ENDPOINT" in run.stderr
    assert tenant_items(endpoint, prefix, GONE)["clients"] == 1


@pytest.mark.parametrize("flavour", ["domain", "serverless"])
def test_the_index_loses_the_tenants_documents_in_every_model_index_of_the_prefix(
    request: pytest.FixtureRequest, flavour: str
) -> None:
    """Both flavours on the real node; the serverless one through tests/aws/serverless.py, which
    fails on any request a collection refuses (`_delete_by_query` among them)."""
    from fleetmem.adapters.aws.opensearch import OpenSearchIndex
    from tests.aws.serverless import serverless_index
    from tests.contract.builders import doc, unit

    url = engines.opensearch_endpoint(request.config)
    prefix = engines.fresh_prefix()

    def index(model: str) -> OpenSearchIndex:
        if flavour == "serverless":
            return serverless_index(url, model_id=model, dim=4, prefix=prefix)[0]
        return OpenSearchIndex(url, model_id=model, dim=4, prefix=prefix, service="none", refresh=True)

    old, new = index("model-a"), index("model-b")  # two embedding models: two indexes of one prefix
    try:
        for ix in (old, new):
            ix.upsert(
                [
                    doc(
                        t,
                        f"chunk:notes/{t}-{n}#0",
                        f"note {n} of {t}",
                        vector=unit(1, n, dim=4),
                        vector_model=ix.model_id,
                    )
                    for t in (GONE, KEPT)
                    for n in range(3)
                ]
            )
            ix.client.indices.refresh(index=ix.index)
        assert (new.tenant_doc_count(GONE), new.tenant_doc_count(KEPT)) == (6, 6)
        assert new.delete_tenant(GONE) == 6
        for ix in (old, new):
            ix.client.indices.refresh(index=ix.index)
        assert (new.tenant_doc_count(GONE), new.tenant_doc_count(KEPT)) == (0, 6)
        assert [new.tenant_doc_count(GONE), new.delete_tenant(GONE)] == [0, 0]  # a rerun finds nothing
    finally:
        old.client.indices.delete(index=f"{prefix}-docs-*", ignore_unavailable=True)
        for ix in (old, new):
            ix.client.close()


def test_tenant_delete_on_aws_denies_the_cognito_app_clients_mapped_to_it_in_the_clients_table(
    fm: Fleetmem, stage: Any, tmp_path: Path
) -> None:
    """A Cognito app client is mapped to its tenant in the clients table (`fleetmem stage clients
    sync`); deleting the tenant removes the mapping with its tokens and puts the app client on the
    deny-list, whatever an authorizer sandbox still holds. The other tenant's app client is kept."""
    from fleetmem.adapters.local.clock import SystemClock
    from fleetmem.tokens import cognito_client_denied, cognito_client_mapping, map_cognito_client

    env, prefix, endpoint, _ = stage
    clients = engines.open_stores(endpoint, prefix).clients
    clock = SystemClock()
    for app, tenant in (("gone0app0client", GONE), ("kept0app0client", KEPT)):
        map_cognito_client(clients, clock, app_client_id=app, tenant=tenant, client_id="planner", scopes={"read"})
    aws = Fleetmem(tmp_path / "unused", {**fm.env, **env, "FLEETMEM_BACKEND": "aws"})
    run = aws("tenant", "delete", GONE, "--backend", "aws", "--yes", "--no-wait", "--json")
    assert run.code == 0, run.stderr
    assert run.json()["cognito_denied"] == ["gone0app0client"]
    now = clock.now()
    assert cognito_client_denied(clients, "gone0app0client", now)
    assert cognito_client_mapping(clients, "gone0app0client", now) is None
    assert not cognito_client_denied(clients, "kept0app0client", now)
    assert cognito_client_mapping(clients, "kept0app0client", now) is not None
