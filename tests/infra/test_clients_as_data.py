"""Clients are data, not template: a stage's clients live in its clients table (API tokens, Cognito
app client mappings, each with its tier), so the number of clients in the deploy config changes
nothing the CDK app synthesizes. Offline synths (tests/infra/conftest.py)."""

from __future__ import annotations

import json

import pytest
from tests.infra.conftest import _synth

FLEET = 1000


def _clients(n: int) -> list[dict]:
    tiers = ("standard", "fleet")
    return [
        {
            "client_id": f"agent-{i:04d}",
            "tenant": f"tenant-{i % 37}",
            "scopes": ["read", "write"] if i % 3 else ["read"],
            "tier": tiers[i % 2],
        }
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def one_and_a_fleet(tmp_path_factory, _no_aws_env):
    one = _synth(tmp_path_factory.mktemp("one-client"), {"clients": _clients(1)})
    fleet = _synth(tmp_path_factory.mktemp("fleet"), {"clients": _clients(FLEET)})
    return one, fleet


def test_a_stage_with_a_thousand_clients_synthesizes_to_the_same_template_as_one_with_one(one_and_a_fleet):
    one, fleet = one_and_a_fleet
    assert len(fleet.config.clients) == FLEET and len(one.config.clients) == 1
    assert json.dumps(fleet.template, sort_keys=True) == json.dumps(one.template, sort_keys=True)
    # and what made a template grow with its clients is gone: one key per tier, no app clients
    assert len(fleet.resources("AWS::ApiGateway::ApiKey")) == len(fleet.config.tiers)
    assert fleet.resources("AWS::Cognito::UserPoolClient") == {}
    assert fleet.violations == one.violations
