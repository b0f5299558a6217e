"""The suite's authorization server (oidc-provider on 127.0.0.1) behaves as a stage's must: code +
PKCE S256 only, JWT access tokens bound to the requested resource, refresh and revocation."""

from __future__ import annotations

import jwt
import pytest

from .authorization_server import PersonClient, Refused, pkce_pair

RESOURCE = "http://127.0.0.1:1/stage-a/mcp"


@pytest.fixture
def person_client(oauth_issuer):
    c = PersonClient(oauth_issuer)
    yield c
    c.close()


def claims(token: str, oauth_issuer: str) -> dict:
    keys = jwt.PyJWKClient(f"{oauth_issuer}/jwks")
    return jwt.decode(token, keys.get_signing_key_from_jwt(token).key, algorithms=["RS256"], audience=RESOURCE)


def test_code_and_pkce_give_a_jwt_whose_audience_is_the_requested_resource(person_client, oauth_issuer):
    tokens = person_client.sign_in(person="ada", resource=RESOURCE)
    c = claims(tokens.access_token, oauth_issuer)
    assert c["iss"] == oauth_issuer
    assert c["sub"] == "ada"
    assert c["aud"] == RESOURCE
    assert set(c["scope"].split()) == {"read", "write"}
    assert tokens.refresh_token


def test_pkce_plain_is_refused_at_the_authorize_step(person_client):
    verifier, _ = pkce_pair()
    with pytest.raises(Refused) as refused:
        person_client.authorize(person="ada", resource=RESOURCE, challenge=verifier, method="plain")
    assert refused.value.error == "invalid_request"


def test_a_code_without_pkce_is_refused(person_client):
    with pytest.raises(Refused) as refused:
        person_client.authorize(person="ada", resource=RESOURCE, challenge=None)
    assert refused.value.error == "invalid_request"


def test_a_wrong_verifier_is_refused_at_the_token_step(person_client):
    _, challenge = pkce_pair()
    other, _ = pkce_pair()
    code = person_client.authorize(person="ada", resource=RESOURCE, challenge=challenge)
    with pytest.raises(Refused) as refused:
        person_client.token(code, other, resource=RESOURCE)
    assert refused.value.error == "invalid_grant"


def test_a_refresh_gives_a_new_token_for_the_resource_and_a_revoked_refresh_token_is_refused(
    person_client, oauth_issuer
):
    first = person_client.sign_in(person="ada", resource=RESOURCE)
    assert first.refresh_token
    again = person_client.refresh(first.refresh_token, resource=RESOURCE)
    assert again.access_token != first.access_token
    assert claims(again.access_token, oauth_issuer)["aud"] == RESOURCE
    assert again.refresh_token
    person_client.revoke(again.refresh_token)
    with pytest.raises(Refused) as refused:
        person_client.refresh(again.refresh_token, resource=RESOURCE)
    assert refused.value.error == "invalid_grant"
