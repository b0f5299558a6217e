"""Template assertions on the signing key's rotation (offline synth, tests/infra/conftest.py): a
Secrets Manager rotation schedule from the deploy config, a rotation function that may only rotate
that one secret and that only Secrets Manager may invoke for it, and the key TTL every signer gets."""

from __future__ import annotations

import json

import pytest
from tests.infra.test_stack import (
    VARIANTS,
    _actions,
    _alias_of,
    _fn_name,
    _function,
    _refs,
    _resources,
    _role_statements,
)

from fleetmem.adapters.aws.signing_keys import ENV_KEY_ACCEPTED_S
from fleetmem.config import ENV_INVOKE_SIGNING_SECRET_ARN, ENV_SIGNING_KEY_TTL_S

ROTATION_ACTIONS = {
    "secretsmanager:DescribeSecret",
    "secretsmanager:GetSecretValue",
    "secretsmanager:PutSecretValue",
    "secretsmanager:UpdateSecretVersionStage",
}


def _signing_secret(synth) -> str:
    (lid,) = [
        lid
        for lid, sec in synth.resources("AWS::SecretsManager::Secret").items()
        if "signing" in sec["Properties"].get("Description", "")
    ]
    return lid


@pytest.mark.parametrize("flavour", VARIANTS)
def test_the_signing_secret_rotates_on_the_configured_schedule_with_its_own_function(flavour, request):
    synth = request.getfixturevalue(flavour)
    secret = _signing_secret(synth)
    (schedule,) = synth.resources("AWS::SecretsManager::RotationSchedule").values()
    props = schedule["Properties"]
    assert props["SecretId"] == {"Ref": secret}
    assert props["RotationRules"] == {"ScheduleExpression": f"rate({synth.config.signing.rotation_days} days)"}
    fn_id, fn = _function(synth, _fn_name(synth, "signing_rotation"))
    assert props["RotationLambdaARN"] == {"Ref": _alias_of(synth, fn_id)}  # its live alias
    assert fn["Properties"]["Handler"] == "functions.signing_rotation.handler.handler"
    assert fn["Properties"]["ReservedConcurrentExecutions"] == 1  # one step at a time
    assert props["RotateImmediatelyOnUpdate"] is False


@pytest.mark.parametrize("flavour", VARIANTS)
def test_the_rotation_function_may_rotate_only_the_signing_secret_and_nothing_else(flavour, request):
    synth = request.getfixturevalue(flavour)
    secret = _signing_secret(synth)
    _, fn = _function(synth, _fn_name(synth, "signing_rotation"))
    stmts = _role_statements(synth)[fn["Properties"]["Role"]["Fn::GetAtt"][0]]
    granted = set().union(*(_actions(st) for st in stmts))
    assert granted == ROTATION_ACTIONS | {
        "secretsmanager:GetRandomPassword",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
    }
    for st in stmts:
        if _actions(st) & ROTATION_ACTIONS:
            assert _actions(st) <= ROTATION_ACTIONS and _resources(st) == [{"Ref": secret}]
        if "*" in _resources(st):
            assert _actions(st) <= {
                "secretsmanager:GetRandomPassword",
                "xray:PutTraceSegments",
                "xray:PutTelemetryRecords",
            }
    assert ENV_INVOKE_SIGNING_SECRET_ARN not in fn["Properties"]["Environment"]["Variables"]


@pytest.mark.parametrize("flavour", VARIANTS)
def test_only_secrets_manager_may_invoke_the_rotation_function_for_this_secret_in_this_account(flavour, request):
    """The function's resource policy has one statement: Secrets Manager's service principal, on
    condition of this secret (SourceArn) in this stack's account (SourceAccount); and no role of the
    stack is granted lambda:InvokeFunction on it."""
    synth = request.getfixturevalue(flavour)
    secret = _signing_secret(synth)
    fn_id, _ = _function(synth, _fn_name(synth, "signing_rotation"))
    alias = _alias_of(synth, fn_id)
    invokers = [
        p["Properties"]
        for p in synth.resources("AWS::Lambda::Permission").values()
        if {fn_id, alias} & _refs(p["Properties"]["FunctionName"])
    ]
    account = synth.config.account or {"Ref": "AWS::AccountId"}
    assert invokers == [
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": {"Ref": alias},
            "Principal": "secretsmanager.amazonaws.com",
            "SourceAccount": account,
            "SourceArn": {"Ref": secret},
        }
    ]
    for role, stmts in _role_statements(synth).items():
        for st in stmts:
            if "lambda:InvokeFunction" in _actions(st):
                assert not {fn_id, alias} & _refs(_resources(st)), (role, st)


@pytest.mark.parametrize("flavour", VARIANTS)
def test_the_rotation_function_knows_the_overlap_window_of_a_replaced_key(flavour, request):
    """It refuses a rotation inside the window; the window is the deploy config's own figure."""
    synth = request.getfixturevalue(flavour)
    _, fn = _function(synth, _fn_name(synth, "signing_rotation"))
    env = fn["Properties"]["Environment"]["Variables"]
    assert env[ENV_KEY_ACCEPTED_S] == str(synth.config.signing_key_accepted_s())
    assert synth.config.signing_key_accepted_s() > synth.config.signing.key_ttl_s


@pytest.mark.parametrize("flavour", VARIANTS)
def test_every_function_holding_the_signing_key_rereads_it_on_the_configured_ttl(flavour, request):
    synth = request.getfixturevalue(flavour)
    holders = [
        fn["Properties"]["Environment"]["Variables"]
        for fn in synth.resources("AWS::Lambda::Function").values()
        if ENV_INVOKE_SIGNING_SECRET_ARN in fn["Properties"]["Environment"]["Variables"]
    ]
    assert len(holders) > 2
    assert {env[ENV_SIGNING_KEY_TTL_S] for env in holders} == {str(synth.config.signing.key_ttl_s)}


def test_a_rotation_period_shorter_than_a_replaced_key_is_presented_is_refused():
    from infra.config import EXAMPLE, DeployConfig

    raw = json.loads(EXAMPLE.read_text())
    ok = DeployConfig.model_validate(raw)
    assert ok.signing.key_ttl_s < ok.signing_key_accepted_s() < ok.signing.rotation_days * 86400
    raw["signing"] = {"rotation_days": 1, "key_ttl_s": 86400}
    with pytest.raises(ValueError, match=r"signing.rotation_days \(1\) must exceed"):
        DeployConfig.model_validate(raw)
