"""Template assertions on the limits a request meets, in the order it meets them (docs/deploy.md,
"Limits, in the order they apply"), and on the alarms that watch each limit (docs/operate.md,
"What each alarm means"). Every number is read back from the synthesized template (offline synth,
tests/infra/conftest.py); `tuned_synth` is a stage whose tiers, clients, headroom and thresholds all
differ from the example's, so no check can hold by matching a default."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.infra.conftest import _example_alarms, _synth
from tests.infra.test_stack import _env, _refs

from fleetmem.adapters.aws.auth import _JWT_SHAPE
from fleetmem.adapters.aws.tables import TABLES
from fleetmem.tokens import _TOKEN_PATTERN, mint_token

#: Stages with WAF on (every non-dev stage, and the dev stage that asks for it).
WAF_VARIANTS = ("serverless_synth", "waf_synth", "production_synth", "tuned_synth")
#: WAF's RegexString limit (CloudFormation: AWS::WAFv2::WebACL RegexMatchStatement).
WAF_REGEX_MAX = 512

TUNED_ALARMS = {
    "dynamodb_throttles_per_5min": 17,
    "api_4xx_rate": 0.35,
    "api_4xx_min_requests": 250,
    "api_429_per_5min": 33,
    "waf_blocked_per_5min": 4321,
    "bedrock_throttles_per_5min": 9,
}


OPERATOR_TEXT = "This stage serves the payments team: file facts under companies/ or people/."


@pytest.fixture(scope="session")
def tuned_synth(tmp_path_factory, _no_aws_env):
    """A stage sized unlike the example: a 200 req/s tier, three clients (which size nothing), headroom 1.5, its own
    LLM and every new alarm threshold changed."""
    return _synth(
        tmp_path_factory.mktemp("tuned"),
        {
            "stage": "perf",
            "tiers": {
                "standard": {"rate_per_second": 7, "burst": 15, "quota_per_day": 10000},
                "bulk": {"rate_per_second": 200, "burst": 500, "quota_per_day": 5000000},
            },
            "clients": [
                {"client_id": "loader", "tenant": "acme", "scopes": ["write"], "tier": "bulk"},
                {"client_id": "reader", "tenant": "acme", "scopes": ["read"], "tier": "standard"},
                {"client_id": "other", "tenant": "beta", "scopes": ["read", "write"], "tier": "standard"},
            ],
            "heartbeats": [],
            "api": {"stage_headroom": 1.5, "waf": {"rate_limit_per_5min": 300}},
            "llm": {"model": "anthropic.claude-3-haiku-20240307-v1:0", "quote_check": False},
            "memory": {"core_chars": 1500, "mcp_instructions": OPERATOR_TEXT},
            "alarms": _example_alarms() | TUNED_ALARMS | {"email": "ops@example.com"},
        },
    )


# -- template readers ----------------------------------------------------------------------------


def _waf_rules(synth) -> dict[str, dict]:
    ((_, acl),) = synth.resources("AWS::WAFv2::WebACL").items()
    return {r["Name"]: r for r in acl["Properties"]["Rules"]}


def _rate_rules(synth) -> tuple[dict, dict]:
    """(the rule for requests WITHOUT a well-formed credential, the one for requests WITH one),
    told apart by their scope-down statements, not by name."""
    unauth = flood = None
    for r in _waf_rules(synth).values():
        rate = r["Statement"].get("RateBasedStatement")
        if rate is None:
            continue
        scope = rate["ScopeDownStatement"]
        if "NotStatement" in scope:
            unauth = rate
        elif "RegexMatchStatement" in scope:
            flood = rate
    assert unauth is not None and flood is not None, "one per-IP rule each side of the credential shape"
    return unauth, flood


def _shape(rate: dict) -> str:
    scope = rate["ScopeDownStatement"]
    match = scope["NotStatement"]["Statement"] if "NotStatement" in scope else scope
    stmt = match["RegexMatchStatement"]
    assert stmt["FieldToMatch"] == {"SingleHeader": {"Name": "authorization"}}
    return stmt["RegexString"]


def _stage_throttle(synth) -> tuple[float, int]:
    (stage,) = synth.resources("AWS::ApiGateway::Stage").values()
    every = [
        m
        for m in stage["Properties"]["MethodSettings"]
        if (m["ResourcePath"], m["HttpMethod"]) == ("/*", "*") and "ThrottlingRateLimit" in m
    ]
    assert len(every) == 1
    return every[0]["ThrottlingRateLimit"], every[0]["ThrottlingBurstLimit"]


def _plans(synth) -> list[dict]:
    return [p["Properties"]["Throttle"] for p in synth.resources("AWS::ApiGateway::UsagePlan").values()]


def _alarms(synth) -> dict[str, dict]:
    prefix = synth.config.prefix + "-"
    return {
        a["Properties"]["AlarmName"].removeprefix(prefix): a["Properties"]
        for a in synth.resources("AWS::CloudWatch::Alarm").values()
    }


def _metrics(alarm: dict) -> list[dict]:
    """Every metric an alarm reads, single-metric or metric-math alike: {namespace, name, dims}."""
    if "MetricName" in alarm:
        dims = {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])}
        return [{"namespace": alarm["Namespace"], "name": alarm["MetricName"], "dims": dims}]
    out = []
    for q in alarm["Metrics"]:
        if "MetricStat" in q:
            m = q["MetricStat"]["Metric"]
            dims = {d["Name"]: d["Value"] for d in m.get("Dimensions", [])}
            out.append({"namespace": m["Namespace"], "name": m["MetricName"], "dims": dims, "id": q["Id"]})
    return out


def _expression(alarm: dict) -> str:
    (expr,) = [q["Expression"] for q in alarm["Metrics"] if "Expression" in q]
    return expr


def _notifies_the_topic(synth, alarm: dict) -> bool:
    (topic,) = synth.resources("AWS::SNS::Topic")
    return alarm["AlarmActions"] == [{"Ref": topic}]


# -- the order of limits -------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", WAF_VARIANTS)
def test_limits_widen_in_the_order_a_request_meets_them(flavour, request):
    """WAF's flood guard per source IP (well-formed credentials) >= the stage throttle over WAF's
    window >= the largest tier's usage plan, rate and burst; the per-IP limit for requests without
    a credential stays below the flood guard; the rate rules run before the managed rule groups.
    So a client meets its own plan first, and a fleet behind one NAT address is never blocked by
    WAF before the stage."""
    synth = request.getfixturevalue(flavour)
    unauth, flood = _rate_rules(synth)
    assert unauth["AggregateKeyType"] == flood["AggregateKeyType"] == "IP"
    assert _shape(unauth) == _shape(flood)  # the same shape, negated for the low limit
    window = flood["EvaluationWindowSec"]
    assert unauth["EvaluationWindowSec"] == window
    stage_rate, stage_burst = _stage_throttle(synth)
    plans = _plans(synth)
    top_rate = max(p["RateLimit"] for p in plans)
    top_burst = max(p["BurstLimit"] for p in plans)

    assert flood["Limit"] >= stage_rate * window
    assert stage_rate >= top_rate and stage_burst >= top_burst
    assert unauth["Limit"] < flood["Limit"]

    rules = _waf_rules(synth)
    rate_priorities = [r["Priority"] for r in rules.values() if "RateBasedStatement" in r["Statement"]]
    managed = [r["Priority"] for r in rules.values() if "ManagedRuleGroupStatement" in r["Statement"]]
    assert managed and max(rate_priorities) < min(managed)


@pytest.mark.parametrize("flavour", ("domain_synth", "tuned_synth"))
def test_the_stage_throttle_is_sized_from_the_tiers_plans(flavour, request):
    """Unset, the stage allows every tier's plan at its full rate together (one key per tier: a
    tier's clients share its plan), times the headroom: no tier is throttled by the stage before
    its own plan, even with all at full rate."""
    synth = request.getfixturevalue(flavour)
    cfg = synth.config
    plans = [p["Properties"]["Throttle"] for p in synth.resources("AWS::ApiGateway::UsagePlan").values()]
    assert len(plans) == len(cfg.tiers)
    together = sum(p["RateLimit"] for p in plans)
    together_burst = sum(p["BurstLimit"] for p in plans)
    stage_rate, stage_burst = _stage_throttle(synth)
    assert stage_rate >= together * cfg.api.stage_headroom > together
    assert stage_burst >= together_burst * cfg.api.stage_headroom


def _example_with(**api) -> dict:
    from infra.config import EXAMPLE

    raw = json.loads(EXAMPLE.read_text())
    raw["api"] = raw["api"] | api
    return raw


def test_a_stage_throttle_below_the_largest_tier_is_refused():
    from infra.config import DeployConfig
    from pydantic import ValidationError

    raw = _example_with()
    top = max(t["rate_per_second"] for t in raw["tiers"].values())
    top_burst = max(t["burst"] for t in raw["tiers"].values())
    with pytest.raises(ValidationError, match="largest tier"):
        DeployConfig.model_validate(_example_with(stage_rate_per_second=top - 1))
    with pytest.raises(ValidationError, match="largest tier"):
        DeployConfig.model_validate(_example_with(stage_burst=top_burst - 1))
    ok = DeployConfig.model_validate(_example_with(stage_rate_per_second=top, stage_burst=top_burst))
    assert (ok.stage_rate(), ok.stage_burst()) == (top, top_burst)


def test_a_flood_guard_below_the_stage_over_the_window_is_refused():
    from infra.config import WAF_WINDOW_S, DeployConfig
    from pydantic import ValidationError

    stage = DeployConfig.model_validate(_example_with()).stage_rate()
    floor = int(stage * WAF_WINDOW_S)
    with pytest.raises(ValidationError, match="flood_limit_per_5min"):
        DeployConfig.model_validate(_example_with(waf={"flood_limit_per_5min": floor - 1}))
    assert DeployConfig.model_validate(_example_with(waf={"flood_limit_per_5min": floor})).waf_flood_limit() == floor


# -- what WAF counts as a well-formed credential ------------------------------------------------


def _rs256_jwt() -> str:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {"iss": "https://cognito-idp.eu-west-1.amazonaws.com/pool", "token_use": "access", "client_id": "x"}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})


def test_the_waf_credential_shape_is_written_in_wafs_regex_dialect(waf_synth):
    """WAF refuses capturing groups and large repeat counts (its PCRE subset) and RegexString
    above 512 characters: the deploy, not the synth, would fail on them."""
    _, flood = _rate_rules(waf_synth)
    shape = _shape(flood)
    assert len(shape) <= WAF_REGEX_MAX
    assert re.compile(shape).groups == 0
    assert "(?P" not in shape and "(?=" not in shape and "(?!" not in shape and "(?<" not in shape
    counts = [int(n) for n in re.findall(r"\{(\d+)(?:,\d*)?\}", shape)]
    assert counts and max(counts) <= 64


def test_the_waf_credential_shape_takes_api_tokens_and_jwts_and_nothing_bare(waf_synth):
    _, flood = _rate_rules(waf_synth)
    shape = re.compile(_shape(flood))
    token, jws = mint_token(), _rs256_jwt()
    for value in (f"Bearer {token}", f"bearer {token}", f"BEARER  {token} ", f"Bearer {jws}"):
        assert shape.fullmatch(value), value
    for value in (
        "",
        token,  # no scheme
        f"Basic {token}",
        "Bearer",
        "Bearer ",
        "Bearer fm_short",
        f"Bearer {token}x",  # one character too long
        f"Bearer {token[:-1]}!",  # outside the alphabet
        "Bearer not.a.jwt-at-all!",
        "Bearer a.b.c",  # JWS parts too short
        f"Bearer {jws} extra",
    ):
        assert not shape.fullmatch(value), value


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_credential_the_authorizer_can_accept_is_well_formed_to_waf(waf_synth, data):
    """Anything the authorizer's own shape checks pass (an API token of `fleetmem.tokens`, a compact
    JWS of `fleetmem.adapters.aws.auth`) is counted by the flood guard, never by the low per-IP
    limit: a real client is never blocked as if it carried no credential."""
    _, flood = _rate_rules(waf_synth)
    shape = re.compile(_shape(flood))
    pattern = data.draw(st.sampled_from([_TOKEN_PATTERN, _JWT_SHAPE]))
    value = data.draw(st.from_regex(pattern, fullmatch=True).filter(lambda v: v.isascii()))
    scheme = data.draw(st.sampled_from(["Bearer", "bearer", "BEARER", "BeArEr"]))
    assert shape.fullmatch(f"{scheme} {value}")


# -- authorizer failures reach a 5xx alarm -------------------------------------------------------


def _access_log_filter(synth, namespace: str, name: str) -> dict:
    """The metric filter on the stage's access log group that feeds (namespace, name)."""
    (stage,) = synth.resources("AWS::ApiGateway::Stage").values()
    log_group = stage["Properties"]["AccessLogSetting"]["DestinationArn"]
    (log_id,) = _refs(log_group)
    found = [
        f["Properties"]
        for f in synth.resources("AWS::Logs::MetricFilter").values()
        if any(
            (t["MetricNamespace"], t["MetricName"]) == (namespace, name)
            for t in f["Properties"]["MetricTransformations"]
        )
    ]
    assert len(found) == 1, (namespace, name)
    assert found[0]["LogGroupName"] == {"Ref": log_id}
    fmt = json.loads(stage["Properties"]["AccessLogSetting"]["Format"])
    assert fmt["status"] == "$context.status"  # the field the filter reads is the status sent
    return found[0]


@pytest.mark.parametrize("flavour", ("domain_synth", "waf_synth"))
def test_a_failing_authorizer_answers_5xx_and_reaches_the_5xx_alarm(flavour, request):
    """The authorizer's failure responses carry a 5xx status, and the 5xx alarm counts the 5xx the
    access log recorded, not only API Gateway's 5XXError (which counts a gateway response whose
    status was changed as 4XXError)."""
    synth = request.getfixturevalue(flavour)
    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in synth.resources("AWS::ApiGateway::GatewayResponse").values()
    }
    statuses = set()
    for rt in ("AUTHORIZER_FAILURE", "AUTHORIZER_CONFIGURATION_ERROR"):
        statuses.add(responses[rt]["StatusCode"])
        assert responses[rt]["StatusCode"].startswith("5"), rt
    alarm = _alarms(synth)["api-5xx"]
    assert _notifies_the_topic(synth, alarm)
    sent = [m for m in _metrics(alarm) if m["namespace"] != "AWS/ApiGateway"]
    (m,) = sent
    pattern = _access_log_filter(synth, m["namespace"], m["name"])["FilterPattern"]
    (wanted,) = re.findall(r'\$\.status = "([^"]+)"', pattern)
    for status in statuses:  # the filter's "5*" (a trailing wildcard) takes each status sent
        assert re.fullmatch(wanted.replace("*", ".*"), status), (wanted, status)
    assert m["id"] in _expression(alarm)
    gateway = [m for m in _metrics(alarm) if m["namespace"] == "AWS/ApiGateway"]
    assert [g["name"] for g in gateway] == ["5XXError"] and gateway[0]["id"] in _expression(alarm)


# -- alarms on each limit ------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ("domain_synth", "tuned_synth"))
def test_every_table_and_every_index_has_a_throttle_alarm(flavour, request):
    synth = request.getfixturevalue(flavour)
    cfg = synth.config
    alarms = _alarms(synth)
    for spec in TABLES:
        table = spec.physical_name(cfg.prefix)
        wanted = {f"ddb-{spec.logical}-throttles": {"TableName": table}}
        for gsi in spec.gsis:
            wanted[f"ddb-{spec.logical}-{gsi.name}-throttles"] = {
                "TableName": table,
                "GlobalSecondaryIndexName": gsi.name,
            }
        for name, dims in wanted.items():
            alarm = alarms[name]
            metrics = _metrics(alarm)
            assert {(m["namespace"], m["name"]) for m in metrics} == {
                ("AWS/DynamoDB", "ReadThrottleEvents"),
                ("AWS/DynamoDB", "WriteThrottleEvents"),
            }, name
            assert all(m["dims"] == dims for m in metrics), name
            assert all(m["id"] in _expression(alarm) for m in metrics), name
            assert alarm["Threshold"] == cfg.alarms.dynamodb_throttles_per_5min
            assert _notifies_the_topic(synth, alarm)


@pytest.mark.parametrize("flavour", ("domain_synth", "tuned_synth"))
def test_the_api_4xx_share_and_its_429s_alarm(flavour, request):
    """API Gateway publishes 4XXError and Count for a REST API but no 429 metric: the 4xx share is
    metric math over the two, once enough requests came in; the 429s are counted from the access
    log."""
    synth = request.getfixturevalue(flavour)
    cfg = synth.config
    alarms = _alarms(synth)
    share = alarms["api-4xx-rate"]
    metrics = {m["name"]: m for m in _metrics(share)}
    assert set(metrics) == {"4XXError", "Count"}
    assert all(m["dims"] == {"ApiName": cfg.prefix, "Stage": cfg.stage} for m in metrics.values())
    expr = _expression(share)
    assert f">= {cfg.alarms.api_4xx_min_requests}" in expr
    assert f"{metrics['4XXError']['id']}, 0) / {metrics['Count']['id']}" in expr
    assert share["Threshold"] == cfg.alarms.api_4xx_rate
    throttled = alarms["api-429"]
    (m,) = _metrics(throttled)
    assert '$.status = "429"' in _access_log_filter(synth, m["namespace"], m["name"])["FilterPattern"]
    assert m["namespace"].endswith(f"/{cfg.stage}")  # two stages in one account never share it
    assert throttled["Threshold"] == cfg.alarms.api_429_per_5min
    assert all(_notifies_the_topic(synth, a) for a in (share, throttled))


@pytest.mark.parametrize("flavour", WAF_VARIANTS)
def test_waf_blocks_alarm_in_total_and_on_the_flood_guard(flavour, request):
    synth = request.getfixturevalue(flavour)
    ((_, acl),) = synth.resources("AWS::WAFv2::WebACL").items()
    _, flood = _rate_rules(synth)
    (flood_rule,) = [r for r in _waf_rules(synth).values() if r["Statement"].get("RateBasedStatement") == flood]
    alarms = _alarms(synth)
    for name, rule, threshold in (
        ("waf-blocked", "ALL", synth.config.alarms.waf_blocked_per_5min),
        ("waf-flood-guard", flood_rule["VisibilityConfig"]["MetricName"], 1),
    ):
        (m,) = _metrics(alarms[name])
        assert (m["namespace"], m["name"]) == ("AWS/WAFV2", "BlockedRequests")
        assert m["dims"]["WebACL"] == acl["Properties"]["Name"] and m["dims"]["Rule"] == rule
        assert alarms[name]["Threshold"] == threshold
        assert _notifies_the_topic(synth, alarms[name])


@pytest.mark.parametrize("flavour", ("domain_synth", "waf_synth", "tuned_synth"))
def test_bedrock_throttles_alarm_per_model_id_the_stage_calls(flavour, request):
    synth = request.getfixturevalue(flavour)
    cfg = synth.config
    wanted = {cfg.embedding.model} | ({cfg.llm.model} if cfg.llm.model else set())
    seen = set()
    for alarm in _alarms(synth).values():
        for m in _metrics(alarm):
            if m["namespace"] == "AWS/Bedrock":
                assert m["name"] == "InvocationThrottles"
                seen.add(m["dims"]["ModelId"])
                assert alarm["Threshold"] == cfg.alarms.bedrock_throttles_per_5min
                assert _notifies_the_topic(synth, alarm)
    assert seen == wanted


def test_the_operator_settings_reach_the_functions_that_read_them(tuned_synth, domain_synth):
    """`llm.quote_check`, `memory.core_chars` and `memory.mcp_instructions` become the environment
    `fleetmem serve` reads them from, on the one function that uses each; unset, the defaults."""
    assert _env(tuned_synth, "synthesize")["FLEETMEM_QUOTE_CHECK"] == "0"
    assert _env(tuned_synth, "context_pack")["FLEETMEM_CORE_CHARS"] == "1500"
    assert _env(tuned_synth, "mcp")["FLEETMEM_MCP_INSTRUCTIONS"] == OPERATOR_TEXT
    for group in ("recall", "entity", "mcp"):
        assert not {"FLEETMEM_QUOTE_CHECK", "FLEETMEM_CORE_CHARS"} & set(_env(tuned_synth, group))
    assert _env(domain_synth, "context_pack")["FLEETMEM_CORE_CHARS"] == "4000"
    assert "FLEETMEM_MCP_INSTRUCTIONS" not in _env(domain_synth, "mcp")
    assert _env(domain_synth, "synthesize")["FLEETMEM_QUOTE_CHECK"] == "1"


def test_instructions_longer_than_the_server_keeps_are_refused_at_synth():
    from infra.config_sections import MemoryConfig
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="2000"):
        MemoryConfig(mcp_instructions="x" * 2001)
