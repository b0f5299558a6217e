"""Every SDK client the shipped code builds goes through ONE table (`sdk_clients.SDK_CLIENTS`), so a
new client cannot silently get botocore's defaults (legacy retries, 5 attempts, 60 s reads).

Read from the source (shared/fleetmem, functions/): the only place that turns a boto3 session into
a client is `AwsClients.client`, every purpose the code names has a row, and every row is named by
some code. Built for real (no call is made): each boto3 row's client carries that row's attempts
and timeouts, and the objects the functions build (the edge's invoker, the Bedrock adapters, the
stores) get their row's client.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fleetmem.adapters.aws import sdk_client
from fleetmem.adapters.aws.bedrock import BedrockEmbedder, BedrockLLM
from fleetmem.adapters.aws.dynamo import AwsClients
from fleetmem.adapters.aws.invoker import LambdaInvoker
from fleetmem.adapters.aws.sdk_clients import SDK_CLIENTS, new_session

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = [*sorted((ROOT / "shared" / "fleetmem").rglob("*.py")), *sorted((ROOT / "functions").rglob("*.py"))]
#: Calls whose first argument (or `purpose=`) names a row.
NAMING_CALLS = {"sdk_client", "client", "build_client", "policy"}


def _where(path: Path, node: ast.AST, scopes: dict[ast.AST, str]) -> str:
    return f"{path.relative_to(ROOT)}:{scopes.get(node, '')}"


def _scopes(tree: ast.Module) -> dict[ast.AST, str]:
    """Each node -> the dotted name of the function/class it sits in."""
    out: dict[ast.AST, str] = {}

    def walk(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = name
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = f"{name}.{child.name}" if name else child.name
            out[child] = inner
            walk(child, inner)

    walk(tree, "")
    return out


def _scan() -> tuple[set[str], set[str]]:
    """(where a boto3 session or module makes a client, every purpose string the code names)."""
    makers: set[str] = set()
    named: set[str] = set()
    for path in SHIPPED:
        tree = ast.parse(path.read_text(), str(path))
        scopes = _scopes(tree)
        # an awaited `session.client(...)` is an MCP client session (the conformance runner), not boto3
        awaited = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Await)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and id(node) not in awaited:
                func = node.func
                fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if isinstance(func, ast.Attribute) and fname in {"client", "resource"}:
                    receiver = ast.unparse(func.value)
                    if receiver == "boto3" or "session" in receiver.lower():
                        makers.add(_where(path, node, scopes))
                        continue
                if fname in NAMING_CALLS:
                    args = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "purpose")]
                    named |= {a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
            # class attributes `PURPOSE = "..."` and tables `_PURPOSES = {...: "..."}`
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and "PURPOSE" in t.id for t in node.targets
            ):
                values = node.value.values if isinstance(node.value, ast.Dict) else [node.value]
                named |= {v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)}
    return makers, named - {""}  # a base class's empty PURPOSE names nothing


def test_only_aws_clients_makes_a_boto3_client_and_every_named_purpose_has_a_row():
    makers, named = _scan()
    assert makers == {"shared/fleetmem/adapters/aws/dynamo.py:AwsClients.client"}
    # every purpose the code names has a row (else it fails at run time) ...
    assert named <= set(SDK_CLIENTS), named - set(SDK_CLIENTS)
    # ... and every row is some code's purpose (no stale row in the docs table)
    assert set(SDK_CLIENTS) <= named, set(SDK_CLIENTS) - named


def test_a_purpose_without_a_row_is_refused():
    with pytest.raises(KeyError, match="no SDK client policy for 'lambda'"):
        AwsClients(region="eu-west-1").client("lambda")


@pytest.mark.parametrize("purpose", sorted(p for p, row in SDK_CLIENTS.items() if row.service != "opensearch"))
def test_each_rows_client_has_the_rows_retries_and_timeouts(purpose):
    row = SDK_CLIENTS[purpose]
    client = AwsClients(region="eu-west-1").client(purpose)
    cfg = client.meta.config
    assert client.meta.service_model.service_name == row.service
    assert cfg.retries == {"total_max_attempts": row.attempts, "mode": row.mode}
    assert (cfg.connect_timeout, cfg.read_timeout) == (row.connect_timeout_s, row.read_timeout_s)


def test_the_objects_the_functions_build_use_their_rows():
    """What the deployed functions build: the edge's invoker (per-verb deadline, one attempt),
    the Bedrock adapters, the shared clients of the heartbeat, indexer and rotation function."""
    edge = LambdaInvoker(lambda tool: tool, region="eu-west-1", read_timeout=26, deadlines={"delta": 11})
    invoke = edge.client_for("delta").meta.config
    assert invoke.retries == {"total_max_attempts": 1, "mode": "standard"} and invoke.read_timeout == 11
    embed = BedrockEmbedder(region="eu-west-1").client.meta.config
    assert embed.retries["total_max_attempts"] == SDK_CLIENTS["embed"].attempts == 2
    llm = BedrockLLM("amazon.nova-lite-v1:0", region="eu-west-1").client.meta.config
    assert llm.retries["total_max_attempts"] == 1
    for purpose in ("signing_keys", "signing_rotation", "replay", "heartbeat_queue", "heartbeat_bus"):
        assert sdk_client(purpose, region="eu-west-1").meta.config.retries == {
            "total_max_attempts": SDK_CLIENTS[purpose].attempts,
            "mode": "standard",
        }


def test_the_opensearch_clients_take_their_rows():
    from fleetmem.adapters.aws.opensearch import build_client

    search = build_client("http://127.0.0.1:9", service="none", purpose="search").transport
    index = build_client("http://127.0.0.1:9", service="none", purpose="index").transport
    assert search.max_retries == 0 and search.retry_on_timeout is False
    assert index.max_retries == SDK_CLIENTS["index"].attempts - 1 and index.retry_on_timeout is True
    with pytest.raises(ValueError):
        build_client("http://127.0.0.1:9", service="none", purpose="stores")


def test_the_deploy_docs_table_is_this_table():
    """docs/deploy.md section 4i lists every row with its service, attempts and timeouts."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    section = text.split("### 4i. Retries and deadlines", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1:4]
    assert set(rows) == set(SDK_CLIENTS)
    for purpose, (service, attempts, timeouts) in rows.items():
        row = SDK_CLIENTS[purpose]
        connect, read = (t.strip() for t in timeouts.split("/", 1))
        assert (service, int(attempts)) == (row.service, row.attempts), purpose
        if row.service != "opensearch":
            assert float(connect) == row.connect_timeout_s, purpose
        if purpose != "verb_invoke":  # its read timeout is each verb's own deadline
            assert float(read) == row.read_timeout_s, purpose


def test_new_sessions_share_the_parsed_models_but_not_their_credentials_or_region() -> None:
    first = new_session(aws_access_key_id="AKIAFIRST", aws_secret_access_key="s1", region_name="eu-west-1")
    paths = list(first._session.get_component("data_loader").search_paths)
    second = new_session(aws_access_key_id="AKIASECOND", aws_secret_access_key="s2", region_name="us-east-2")
    loader = second._session.get_component("data_loader")
    assert loader is first._session.get_component("data_loader")
    assert loader.search_paths == paths  # boto3's data directory is not added once per session
    assert (first.get_credentials().access_key, second.get_credentials().access_key) == ("AKIAFIRST", "AKIASECOND")
    a, b = first.client("dynamodb"), second.client("dynamodb")
    assert (a.meta.region_name, b.meta.region_name) == ("eu-west-1", "us-east-2")
    assert a.meta.service_model is not None and b.meta.endpoint_url == "https://dynamodb.us-east-2.amazonaws.com"
