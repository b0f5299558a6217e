"""The search role mapping's handler (functions/search_rolemap), called in this process as the CDK
Provider framework calls an onEvent function: with CloudFormation's custom-resource event, expecting
`{"PhysicalResourceId", "Data"}` back, or an exception, whose message becomes the failure's reason.

OpenSearch's security plugin is not part of the test node (tests/aws/engines.py), so a small
recording HTTP server on 127.0.0.1 stands in for the domain's security API: it keeps each request's
method, path, headers and body and answers 200, or 403 as the plugin refuses a caller that is not
the master user. STS runs on moto's server; the signatures are checked against the credentials
moto issued for the assumed search-admin session.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from fleetmem.adapters.aws.search_roles import SecurityApiRefused, session_policy

from .conftest import LambdaContext, handler_module

ACCOUNT = "123456789012"
REGION = "us-east-1"
DOMAIN_ARN = f"arn:aws:es:{REGION}:{ACCOUNT}:domain/fleetmem-test"
ADMIN = f"arn:aws:iam::{ACCOUNT}:role/fleetmem-test-SearchAdminRole"
READERS = [f"arn:aws:iam::{ACCOUNT}:role/fleetmem-test-recall", f"arn:aws:iam::{ACCOUNT}:role/fleetmem-test-synthesize"]
INDEXERS = [f"arn:aws:iam::{ACCOUNT}:role/fleetmem-test-indexer"]
FORBIDDEN = {
    "status": "FORBIDDEN",
    "message": "No permission to access REST API: User does not have any role privileged for admin access",
}


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class SecurityApi:
    url: str
    requests: list[Recorded] = field(default_factory=list)
    #: path -> (status, body) answered instead of 200
    refuse: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)


@pytest.fixture
def security_api() -> Iterator[SecurityApi]:
    api = SecurityApi(url="")

    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            api.requests.append(
                Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            status, answer = api.refuse.get(self.path, (200, {"status": "OK", "message": "'x' updated."}))
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_HEAD = _record

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield api
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def sts_env(monkeypatch: pytest.MonkeyPatch, moto_url: str) -> None:
    """The function's own credentials (moto's test keys) and STS on moto's server."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL_STS": moto_url,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


def _event(api: SecurityApi, kind: str, **extra: Any) -> dict[str, Any]:
    """A CloudFormation custom-resource event as the Provider framework passes it on."""
    props = {
        "ServiceToken": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:fleetmem-test-provider",
        "Endpoint": api.url,
        "Region": REGION,
        "DomainArn": DOMAIN_ARN,
        "AdminRoleArn": ADMIN,
        "IndexPattern": "fleetmem-docs-*",
        "ReaderRoleArns": READERS,
        "IndexerRoleArns": INDEXERS,
    }
    return {
        "RequestType": kind,
        "ServiceToken": props["ServiceToken"],
        "ResponseURL": "https://cloudformation-custom-resource-response.example/response",
        "StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/fleetmem-test/1",
        "RequestId": "5b7a3b8e-0000-4000-8000-000000000001",
        "LogicalResourceId": "SearchRoleMappingResource",
        "ResourceType": "Custom::FleetmemSearchRoleMapping",
        "ResourceProperties": props,
        **extra,
    }


def _invoke(event: dict[str, Any]) -> Any:
    """The handler with the event and answer round-tripped through JSON, as Lambda carries them."""
    ctx = LambdaContext(function_name="fleetmem-test-search-rolemap")
    out = handler_module("search_rolemap").handler(json.loads(json.dumps(event)), ctx)
    return json.loads(json.dumps(out))


def _assumed_sessions() -> list[Any]:
    from moto.sts.models import sts_backends

    return list(sts_backends[ACCOUNT]["aws"].assumed_roles)


def _check_signed_by_the_admin_session(req: Recorded, url: str) -> Any:
    """The request is SigV4-signed for `es` with the credentials STS issued for the search-admin
    role (the signature recomputed from what the server received), and returns that session."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = req.headers["authorization"]
    algorithm, rest = auth.split(" ", 1)
    parts = dict(p.strip().split("=", 1) for p in rest.split(","))
    key_id, date, region, service, term = parts["Credential"].split("/")
    assert (algorithm, region, service, term) == ("AWS4-HMAC-SHA256", REGION, "es", "aws4_request")
    (session,) = [s for s in _assumed_sessions() if s.access_key_id == key_id]
    assert session.role_arn == ADMIN and key_id != "test"
    assert req.headers["x-amz-security-token"] == session.session_token
    assert req.headers["x-amz-content-sha256"] == hashlib.sha256(req.body).hexdigest()
    signed = parts["SignedHeaders"].split(";")
    assert {"host", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"} <= set(signed)
    request = AWSRequest(
        method=req.method, url=url + req.path, data=req.body, headers={h: req.headers[h] for h in signed}
    )
    request.context["timestamp"] = req.headers["x-amz-date"]
    signer = SigV4Auth(Credentials(key_id, session.secret_access_key, session.session_token), "es", REGION)
    assert date == req.headers["x-amz-date"][:8]
    assert parts["Signature"] == signer.signature(
        signer.string_to_sign(request, signer.canonical_request(request)), request
    )
    return session


EXPECTED = [
    (
        "/_plugins/_security/api/roles/fleetmem_reader",
        {
            "cluster_permissions": ["cluster_composite_ops_ro"],
            "index_permissions": [{"index_patterns": ["fleetmem-docs-*"], "allowed_actions": ["read"]}],
        },
    ),
    (
        "/_plugins/_security/api/roles/fleetmem_indexer",
        {
            "cluster_permissions": ["cluster_composite_ops"],
            "index_permissions": [
                {"index_patterns": ["fleetmem-docs-*"], "allowed_actions": ["crud", "create_index", "manage_aliases"]}
            ],
        },
    ),
    ("/_plugins/_security/api/rolesmapping/fleetmem_reader", {"backend_roles": READERS}),
    ("/_plugins/_security/api/rolesmapping/fleetmem_indexer", {"backend_roles": INDEXERS}),
]


def test_create_puts_the_two_roles_and_their_mappings_signed_as_the_search_admin(security_api, sts_env):
    out = _invoke(_event(security_api, "Create"))
    sent = [(r.method, r.path, json.loads(r.body)) for r in security_api.requests]
    assert sent == [("PUT", path, body) for path, body in EXPECTED]
    sessions = {id(_check_signed_by_the_admin_session(r, security_api.url)) for r in security_api.requests}
    assert len(sessions) == 1
    # the assumed session may do nothing but these four PUTs
    (session,) = [s for s in _assumed_sessions() if id(s) in sessions]
    assert json.loads(session.policy) == session_policy(DOMAIN_ARN)
    (statement,) = json.loads(session.policy)["Statement"]
    assert statement["Action"] == "es:ESHttpPut"
    assert sorted(statement["Resource"]) == sorted(DOMAIN_ARN + path for path, _ in EXPECTED)
    # what the Provider framework expects back: a physical id (and string attributes)
    assert out["PhysicalResourceId"] == "fleetmem-search-rolemap"
    assert set(out) == {"PhysicalResourceId", "Data"} and all(isinstance(v, str) for v in out["Data"].values())


def test_update_writes_the_same_documents_again_and_keeps_the_physical_id(security_api, sts_env):
    readers = [*READERS, f"arn:aws:iam::{ACCOUNT}:role/fleetmem-test-context-pack"]
    event = _event(security_api, "Update", PhysicalResourceId="fleetmem-search-rolemap")
    event["ResourceProperties"]["ReaderRoleArns"] = readers
    event["OldResourceProperties"] = _event(security_api, "Create")["ResourceProperties"]
    for _ in range(2):  # a retried update writes the same state again
        assert _invoke(event)["PhysicalResourceId"] == "fleetmem-search-rolemap"
    sent = [(r.method, r.path, json.loads(r.body)) for r in security_api.requests]
    expected = [
        ("PUT", p, {"backend_roles": readers} if p.endswith("rolesmapping/fleetmem_reader") else b) for p, b in EXPECTED
    ]
    assert sent == expected * 2


def test_delete_leaves_the_mappings_and_calls_nothing(security_api, sts_env):
    before = len(_assumed_sessions())
    out = _invoke(_event(security_api, "Delete", PhysicalResourceId="fleetmem-search-rolemap"))
    assert out == {"PhysicalResourceId": "fleetmem-search-rolemap"}
    assert security_api.requests == [] and len(_assumed_sessions()) == before


def test_a_refusal_fails_the_deploy_with_the_security_apis_reason(security_api, sts_env):
    refused = "/_plugins/_security/api/rolesmapping/fleetmem_reader"
    security_api.refuse[refused] = (403, FORBIDDEN)
    with pytest.raises(SecurityApiRefused) as caught:
        _invoke(_event(security_api, "Create"))
    message = str(caught.value)
    assert f"PUT {refused} (status 403)" in message and FORBIDDEN["message"] in message
    # stopped at the refusal (not retried, nothing after it), and no credential in the reason
    assert [r.path for r in security_api.requests] == [p for p, _ in EXPECTED[:3]]
    session = _check_signed_by_the_admin_session(security_api.requests[-1], security_api.url)
    assert session.secret_access_key not in message and session.session_token not in message
