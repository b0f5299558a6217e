"""The REQUEST authorizer on its events/authorizer files.

API tokens are looked up by SHA-256 in the clients table (moto's DynamoDB), and so are Cognito app
clients' mappings; one usage key per tier comes from Secrets Manager (moto). Cognito cannot run
here: its JWKS document is served from 127.0.0.1 by a test HTTP server, and access tokens are
signed with a test RSA key in Cognito's claim layout."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from fleetmem.models import ClientRecord
from fleetmem.tokens import hash_token, token_id_for
from fleetmem.transport.aws_lambda.authorizer import Unauthorized

from .conftest import call, load_event

pytestmark = pytest.mark.usefixtures("deps")

APP_CLIENT = "4m2k8q1r7t6v5w3x9y0z"


def bearer(event: dict) -> str:
    return event["headers"]["Authorization"].split(" ", 1)[1]


def seed(deps, token: str, client_id: str, scopes: set[str], *, revoked: bool = False, tier: str | None = None) -> None:
    h = hash_token(token)
    now = deps.clock.now()
    deps.clients.create(
        ClientRecord(
            token_hash=h,
            token_id=token_id_for(h),
            tenant="acme",
            client_id=client_id,
            scopes=frozenset(scopes),
            created_at=now - timedelta(days=1),
            tier=tier,
        )
    )
    if revoked:
        deps.clients.revoke(token_id_for(h), at=now - timedelta(minutes=1))


@pytest.fixture
def usage_keys(monkeypatch, aws_env) -> dict[str, str]:
    """One usage-plan key per tier (the example config's tiers), `standard` the default tier."""
    sm = boto3.client("secretsmanager")
    values = {
        "fleet": "fleetusagekey0123456789abcdefghijklmnop",
        "standard": "standardusagekey0123456789abcdefghijklm",
    }
    arns = {}
    for tier, value in values.items():
        arns[tier] = sm.create_secret(Name=f"usage-{tier}-{time.monotonic_ns()}", SecretString=value)["ARN"]
    monkeypatch.setenv("FLEETMEM_USAGE_KEY_SECRETS", json.dumps(arns))
    monkeypatch.setenv("FLEETMEM_DEFAULT_TIER", "standard")
    return values


class _Jwks(BaseHTTPRequestHandler):
    document = b"{}"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.document)

    def log_message(self, *args) -> None:
        return None


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def jwks_issuer(signing_key) -> Iterator[str]:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signing_key.public_key()))
    handler = type(
        "Jwks",
        (_Jwks,),
        {"document": json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()},
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/us-east-1_TestPool"
    server.shutdown()
    server.server_close()


@pytest.fixture
def cognito_pool(monkeypatch, aws_env, jwks_issuer):
    """The stage's pool, no app client mapped yet."""
    monkeypatch.setenv("FLEETMEM_COGNITO_ISSUER", jwks_issuer)
    monkeypatch.setenv("FLEETMEM_COGNITO_RESOURCE_SERVER", "fleetmem")
    return jwks_issuer


@pytest.fixture
def cognito(cognito_pool, deps):
    """The pool with APP_CLIENT mapped in the clients table to acme/planner in tier fleet."""
    from fleetmem.tokens import map_cognito_client

    map_cognito_client(
        deps.clients,
        deps.clock,
        app_client_id=APP_CLIENT,
        tenant="acme",
        client_id="planner",
        scopes={"read", "write"},
        tier="fleet",
    )
    return cognito_pool


def access_token(key, issuer: str, **overrides) -> str:
    now = int(time.time())
    claims = {
        "sub": APP_CLIENT,
        "token_use": "access",
        "scope": "fleetmem/read fleetmem/write",
        "auth_time": now,
        "iss": issuer,
        "exp": now + 3600,
        "iat": now,
        "version": 2,
        "jti": "0f1e2d3c",
        "client_id": APP_CLIENT,
        **overrides,
    }
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": overrides.pop("kid", "k1")})


def claims(out: dict) -> dict:
    """The authorizer context's claims, once its proof verified with the stage key (as every
    function behind API Gateway checks it)."""
    from fleetmem.transport.aws_lambda.authorizer import vouched_event

    event = {"requestContext": {"authorizer": {**out["context"], "principalId": out["principalId"]}}}
    return dict(vouched_event(event)["requestContext"].get("authorizer") or {})


def with_token(event_name: str, token: str) -> dict:
    event = load_event("authorizer", event_name)
    event["headers"]["Authorization"] = f"Bearer {token}"
    return event


def test_a_valid_api_token_is_allowed_with_tenant_scopes_and_its_tiers_usage_key(deps, usage_keys):
    event = load_event("authorizer", "api_token_valid")
    seed(deps, bearer(event), "planner", {"read", "write"}, tier="fleet")
    out = call("authorizer", event)
    assert out["principalId"] == "acme/planner"
    assert claims(out) == {"tenant": "acme", "client_id": "planner", "scopes": "read write"}
    assert out["usageIdentifierKey"] == usage_keys["fleet"]
    (stmt,) = out["policyDocument"]["Statement"]
    assert stmt["Effect"] == "Allow"


def test_the_allow_policy_covers_every_route_because_results_are_cached(deps, usage_keys):
    event = load_event("authorizer", "v1_route")
    seed(deps, bearer(event), "planner", {"read"})
    (stmt,) = call("authorizer", event)["policyDocument"]["Statement"]
    resources = stmt["Resource"] if isinstance(stmt["Resource"], list) else [stmt["Resource"]]
    assert resources == ["arn:aws:execute-api:eu-west-1:123456789012:a1b2c3d4e5/dev/*/*"]


def test_a_token_naming_no_tier_gets_the_default_tiers_usage_key(deps, usage_keys):
    event = load_event("authorizer", "api_token_valid")
    seed(deps, bearer(event), "adhoc-bot", {"read"})
    assert call("authorizer", event)["usageIdentifierKey"] == usage_keys["standard"]


def test_a_token_naming_a_tier_the_stage_has_no_plan_for_gets_the_default_tiers_key(deps, usage_keys):
    event = load_event("authorizer", "api_token_valid")
    seed(deps, bearer(event), "adhoc-bot", {"read"}, tier="gold")
    assert call("authorizer", event)["usageIdentifierKey"] == usage_keys["standard"]


def test_a_client_minted_at_run_time_with_a_tier_gets_that_tiers_key_on_its_first_request(deps, usage_keys, capsys):
    """`fleetmem token create --backend aws --tier fleet` for a client no deploy config names: the
    tier is written with the token into the clients table (moto's DynamoDB), and the authorizer's
    first answer for it carries the fleet tier's usage key, so API Gateway lets it in."""
    from fleetmem.cli import main

    capsys.readouterr()
    argv = ["token", "create", "--backend", "aws", "--client", "bot-0417", "--tenant", "acme"]
    assert main([*argv, "--scopes", "read,write", "--tier", "fleet", "--json"]) == 0
    minted = json.loads(capsys.readouterr().out)
    assert minted["tier"] == "fleet"
    out = call("authorizer", with_token("api_token_valid", minted["token"]))
    assert claims(out) == {"tenant": "acme", "client_id": "bot-0417", "scopes": "read write"}
    assert out["usageIdentifierKey"] == usage_keys["fleet"]
    # a tier outside the id grammar is refused before anything is written
    assert main([*argv, "--scopes", "read", "--tier", "Fleet!", "--json"]) == 2


@pytest.mark.parametrize("event_name", ["api_token_unknown", "missing_bearer_scheme"])
def test_unknown_tokens_and_other_schemes_are_401(event_name, usage_keys):
    with pytest.raises(Unauthorized):
        call("authorizer", load_event("authorizer", event_name))


def test_a_revoked_token_is_401(deps, usage_keys):
    event = load_event("authorizer", "api_token_revoked")
    seed(deps, bearer(event), "auditor", {"read"}, revoked=True)
    with pytest.raises(Unauthorized):
        call("authorizer", event)


def test_a_denial_is_counted_for_the_authorizer_alarm(usage_keys, capsys):
    with pytest.raises(Unauthorized):
        call("authorizer", load_event("authorizer", "api_token_unknown"))
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert any(m.get("AuthorizerDenied") == [1.0] or m.get("AuthorizerDenied") == 1.0 for m in emf)


def test_a_cognito_access_token_is_allowed_with_its_resource_server_scopes(cognito, signing_key, usage_keys):
    out = call("authorizer", with_token("cognito_access_token", access_token(signing_key, cognito)))
    assert claims(out) == {"tenant": "acme", "client_id": "planner", "scopes": "read write"}
    assert out["usageIdentifierKey"] == usage_keys["fleet"]


def test_a_cognito_app_client_mapped_at_run_time_works_on_the_next_request(cognito_pool, signing_key, usage_keys, deps):
    """An app client's mapping is data in the clients table: refused while unmapped (and that
    refusal is not kept), allowed with its tier's key on the request after it is mapped."""
    from fleetmem.tokens import map_cognito_client

    token = access_token(signing_key, cognito_pool)
    with pytest.raises(Unauthorized):
        call("authorizer", with_token("cognito_access_token", token))
    map_cognito_client(
        deps.clients, deps.clock, app_client_id=APP_CLIENT, tenant="acme", client_id="bot-7", scopes={"read"}
    )
    out = call("authorizer", with_token("cognito_access_token", token))
    assert claims(out)["client_id"] == "bot-7"
    assert out["usageIdentifierKey"] == usage_keys["standard"]


def test_a_revoked_cognito_mapping_is_refused_once_the_revocation_bound_has_passed(
    cognito, signing_key, usage_keys, deps, monkeypatch
):
    """The authorizer keeps a mapping it read for at most the authorizer cache TTL (30 s here, as
    deployed): a revoked one (`fleetmem token revoke app_<id>`, a tenant's deletion) is refused
    after it, however warm the sandbox. The sandbox's clock is moved past the bound, no sleep."""
    import fleetmem.adapters.aws.auth as auth_module
    from fleetmem.tokens import COGNITO_MAP_ID_PREFIX

    token = access_token(signing_key, cognito)
    assert claims(call("authorizer", with_token("cognito_access_token", token)))["client_id"] == "planner"
    assert deps.clients.revoke(COGNITO_MAP_ID_PREFIX + APP_CLIENT, at=deps.clock.now())
    real = time.monotonic
    monkeypatch.setattr(auth_module.time, "monotonic", lambda: real() + 31)
    with pytest.raises(Unauthorized):
        call("authorizer", with_token("cognito_access_token", token))


@pytest.mark.parametrize(
    "change",
    [
        {"exp": int(time.time()) - 60},  # expired
        {"iss": "https://cognito-idp.us-east-1.amazonaws.com/other"},  # another pool
        {"token_use": "id"},  # an ID token, not an access token
        {"client_id": "not-a-configured-client"},  # an app client of no configured fleetmem client
        {"scope": "otherapi/read"},  # no scope of this API
    ],
)
def test_cognito_tokens_failing_any_check_are_401(cognito, signing_key, usage_keys, change):
    token = access_token(signing_key, cognito, **change)
    with pytest.raises(Unauthorized):
        call("authorizer", with_token("cognito_access_token", token))


def test_a_jwt_signed_by_another_key_is_401(cognito, usage_keys):
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(Unauthorized):
        call("authorizer", with_token("cognito_access_token", access_token(other, cognito)))


def test_the_sample_cognito_event_itself_is_rejected_its_signature_is_fake(cognito, usage_keys):
    with pytest.raises(Unauthorized):
        call("authorizer", load_event("authorizer", "cognito_access_token"))


def test_a_cognito_app_client_on_the_deny_list_is_401(cognito, signing_key, usage_keys, deps):
    """Cognito cannot revoke client-credentials tokens; the deny-list in the clients table can."""
    from fleetmem.tokens import deny_cognito_client

    token = access_token(signing_key, cognito)
    assert call("authorizer", with_token("cognito_access_token", token))["context"]["client_id"] == "planner"
    deny_cognito_client(deps.clients, deps.clock, app_client_id=APP_CLIENT)
    with pytest.raises(Unauthorized):
        call("authorizer", with_token("cognito_access_token", token))


def test_the_cli_puts_a_cognito_app_client_on_the_deny_list(deps):
    """`fleetmem token deny-cognito` writes through the wiring's client store (here the AWS
    stores on moto, as `--backend aws` would)."""
    from fleetmem.cli import main
    from fleetmem.tokens import cognito_client_denied

    assert not cognito_client_denied(deps.clients, "cli-app-client", deps.clock.now())
    assert main(["token", "deny-cognito", "cli-app-client", "--json"]) == 0
    assert cognito_client_denied(deps.clients, "cli-app-client", deps.clock.now())
    assert not cognito_client_denied(deps.clients, "another-app-client", deps.clock.now())


def test_a_cognito_mapping_whose_tenant_breaks_the_id_grammar_is_401(cognito_pool, signing_key, usage_keys, deps):
    """`map_cognito_client` refuses such a mapping; one written into the table by hand still never
    reaches the stores."""
    from fleetmem.tokens import COGNITO_MAP_ID_PREFIX, cognito_map_hash

    deps.clients.create(
        ClientRecord(
            token_hash=cognito_map_hash(APP_CLIENT),
            token_id=COGNITO_MAP_ID_PREFIX + APP_CLIENT,
            tenant="acme#other",
            client_id="planner",
            scopes=frozenset({"read"}),
            created_at=deps.clock.now(),
        )
    )
    with pytest.raises(Unauthorized):
        call("authorizer", with_token("cognito_access_token", access_token(signing_key, cognito_pool)))


MALFORMED = [
    "fm_" + "!" * 43,  # right prefix and length, wrong alphabet
    "fm_" + "a" * 42,  # one short
    "fm_" + "a" * 44,  # one long
    "fm_",
    "x" * 5000,
    "a.b.c",  # JWT-shaped, far too short to be one
    "eyJhbGciOiJSUzI1NiJ9.e30.#not-base64url#" + "a" * 20,
]


@pytest.mark.parametrize("token", MALFORMED)
def test_a_malformed_token_is_refused_before_any_store_read(cognito, deps, usage_keys, token):
    """Counted on the real DynamoDB client of the clients store (moto's server answers it): a token
    of the wrong prefix, length or alphabet costs no read, so a flood of made-up tokens does not
    reach the table."""
    calls: list[str] = []
    deps.clients._db.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    with pytest.raises(Unauthorized):
        call("authorizer", with_token("api_token_unknown", token))
    assert calls == []
    # the counter sees the read a well-formed unknown token costs
    with pytest.raises(Unauthorized):
        call("authorizer", load_event("authorizer", "api_token_unknown"))
    assert calls == ["GetItem"]


def test_a_warm_sandbox_reads_a_cognito_mapping_once_per_bound_and_an_api_tokens_tier_with_its_token(
    cognito, signing_key, usage_keys, deps
):
    """Counted on the clients store's real DynamoDB client (moto's server): an API token's tier is
    on its own item (one GetItem, as before tiers); a Cognito token costs the mapping read and the
    deny-list read, then only the deny-list read while the mapping is kept (the revocation bound)."""
    calls: list[str] = []
    deps.clients._db.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    event = load_event("authorizer", "api_token_valid")
    seed(deps, bearer(event), "planner", {"read"}, tier="fleet")
    calls.clear()
    assert call("authorizer", event)["usageIdentifierKey"] == usage_keys["fleet"]
    assert calls == ["GetItem", "UpdateItem"]  # its first use this minute is recorded (last_used_at)
    calls.clear()
    assert call("authorizer", event)["usageIdentifierKey"] == usage_keys["fleet"]
    assert calls == ["GetItem"]  # within the minute: the read alone
    token = access_token(signing_key, cognito)
    calls.clear()
    call("authorizer", with_token("cognito_access_token", token))
    assert calls == ["GetItem", "GetItem"]  # mapping, deny-list
    calls.clear()
    assert call("authorizer", with_token("cognito_access_token", token))["usageIdentifierKey"] == usage_keys["fleet"]
    assert calls == ["GetItem"]  # deny-list only
