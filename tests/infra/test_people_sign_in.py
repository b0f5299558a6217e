"""The template of a stage whose deploy config names people's OAuth authorization server (`oauth`):
the authorizer learns the one issuer, its JWKS and the stage's `/mcp` URL (the audience people's
tokens must name), the protected-resource metadata names that server, the 401 challenge names the
metadata and the scopes, and the authorizer's Deny is a 403 in the envelope's shape."""

from __future__ import annotations

import json

import pytest
from tests.infra.conftest import _synth

from fleetmem.config import ENV_AUTHORIZATION_SERVER, ENV_OAUTH_ISSUER, ENV_OAUTH_JWKS_URL, ENV_OAUTH_RESOURCE

ISSUER = "https://login.example.com/"


@pytest.fixture(scope="module")
def people_synth(tmp_path_factory, _no_aws_env):
    return _synth(tmp_path_factory.mktemp("people"), {"oauth": {"issuer": ISSUER}})


def env_of(synth, handler: str) -> dict:
    (fn,) = [
        f["Properties"]
        for f in synth.resources("AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == handler
    ]
    return dict(fn["Environment"]["Variables"])


def test_the_authorizer_checks_people_tokens_for_this_stages_mcp_resource(people_synth, domain_synth):
    env = env_of(people_synth, "functions.authorizer.handler.handler")
    assert env[ENV_OAUTH_ISSUER] == ISSUER.rstrip("/")
    assert env[ENV_OAUTH_JWKS_URL] == "https://login.example.com/.well-known/jwks.json"
    resource = json.dumps(env[ENV_OAUTH_RESOURCE])
    assert "execute-api" in resource and "/mcp" in resource  # the stage's own execute-api URL + /mcp
    edge = env_of(people_synth, "functions.mcp.handler.handler")
    assert edge[ENV_AUTHORIZATION_SERVER] == ISSUER.rstrip("/")
    # a stage without `oauth` trusts no people's issuer
    machines_only = env_of(domain_synth, "functions.authorizer.handler.handler")
    assert not {ENV_OAUTH_ISSUER, ENV_OAUTH_JWKS_URL, ENV_OAUTH_RESOURCE} & set(machines_only)


def test_the_401_names_metadata_and_scopes_and_a_deny_is_403_in_the_envelope(people_synth):
    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in people_synth.resources("AWS::ApiGateway::GatewayResponse").values()
    }
    challenge = json.dumps(responses["UNAUTHORIZED"]["ResponseParameters"]["gatewayresponse.header.WWW-Authenticate"])
    assert 'error=\\"invalid_token\\"' in challenge
    assert "resource_metadata" in challenge and 'scope=\\"read write admin\\"' in challenge
    denied = responses["ACCESS_DENIED"]
    assert denied["StatusCode"] == "403"
    body = json.loads(denied["ResponseTemplates"]["application/json"].replace("$context.requestId", "x"))
    assert body["code"] == "scope_denied"
