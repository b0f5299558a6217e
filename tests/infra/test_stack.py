"""Template assertions on the synthesized CloudFormation (offline, no AWS account).

What these prove: the function list is generated from the protocol's registry, each role holds only
its own grants, the edge is the only caller of tool functions, only the indexer writes OpenSearch,
and the authorizer, usage plans, Cognito scopes, stream indexing and alarms are wired as documented.
"""

from __future__ import annotations

import json

import pytest

from fleetmem.adapters.aws.tables import TABLES
from fleetmem.lambda_routes import function_group
from fleetmem.protocol import SCOPES, VERB_NAMES

DDB_WRITES = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
READ_ONLY_VERBS = ("recall", "entity", "synthesize", "context_pack")


def _actions(stmt: dict) -> set[str]:
    a = stmt["Action"]
    return {a} if isinstance(a, str) else set(a)


def _resources(stmt: dict) -> list:
    r = stmt["Resource"]
    return r if isinstance(r, list) else [r]


def _refs(obj) -> set[str]:
    """Logical ids referenced anywhere inside a CloudFormation value."""
    out: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "Ref" and isinstance(v, str):
                out.add(v)
            elif k == "Fn::GetAtt":
                out.add(v[0])
            else:
                out |= _refs(v)
    elif isinstance(obj, list):
        for v in obj:
            out |= _refs(v)
    return out


def _role_statements(synth) -> dict[str, list[dict]]:
    by_role: dict[str, list[dict]] = {}
    for pol in synth.resources("AWS::IAM::Policy").values():
        for role in pol["Properties"].get("Roles", []):
            by_role.setdefault(role["Ref"], []).extend(pol["Properties"]["PolicyDocument"]["Statement"])
    return by_role


def _function(synth, name: str) -> tuple[str, dict]:
    for lid, fn in synth.resources("AWS::Lambda::Function").items():
        if fn["Properties"].get("FunctionName") == name:
            return lid, fn
    raise AssertionError(f"no function {name}")


def _role_of(synth, name: str) -> str:
    return _function(synth, name)[1]["Properties"]["Role"]["Fn::GetAtt"][0]


def _table_ids(synth) -> dict[str, str]:
    out = {}
    for lid, t in synth.resources("AWS::DynamoDB::GlobalTable").items():
        out[t["Properties"]["TableName"].rsplit("-", 1)[-1]] = lid
    return out


def _fn_name(synth, group: str) -> str:
    return f"{synth.config.prefix}-{group.replace('_', '-')}"


# -- functions generated from the registry --------------------------------------------------------


def test_each_of_the_seven_verbs_gets_its_own_function_generated_from_the_registry(domain_synth):
    from infra.constructs.tool_functions import registry_tools

    names = {
        f["Properties"]["FunctionName"] for f in domain_synth.resources("AWS::Lambda::Function").values()
    }
    for verb in VERB_NAMES:
        assert _fn_name(domain_synth, verb) in names
    groups = {function_group(t) for t in registry_tools()}
    assert {g for g in groups if g in VERB_NAMES} == set(VERB_NAMES)
    for g in groups:
        _, fn = _function(domain_synth, _fn_name(domain_synth, g))
        assert fn["Properties"]["Handler"] == f"functions.{g}.handler.handler"


def test_every_function_runs_python_on_arm64_with_json_logs_xray_and_powertools(domain_synth):
    for fn in domain_synth.resources("AWS::Lambda::Function").values():
        p = fn["Properties"]
        assert p["Runtime"] == f"python{domain_synth.config.python_runtime}"
        assert p["Architectures"] == ["arm64"]
        assert p["TracingConfig"] == {"Mode": "Active"}
        assert p["LoggingConfig"]["LogFormat"] == "JSON"
        env = p["Environment"]["Variables"]
        assert env["POWERTOOLS_SERVICE_NAME"] and env["POWERTOOLS_METRICS_NAMESPACE"] == "fleetmem"
        assert env["FLEETMEM_BACKEND"] == "aws"


def test_function_sizes_and_timeouts_follow_the_config(domain_synth):
    cfg = domain_synth.config
    for group in ("synthesize", "recall", "mcp", "indexer"):
        _, fn = _function(domain_synth, _fn_name(domain_synth, group))
        size = cfg.size_for(group)
        assert fn["Properties"]["MemorySize"] == size.memory_mb
        assert fn["Properties"]["Timeout"] == size.timeout_s


def test_every_function_has_its_own_role(domain_synth):
    roles = [
        f["Properties"]["Role"]["Fn::GetAtt"][0]
        for f in domain_synth.resources("AWS::Lambda::Function").values()
    ]
    assert len(roles) == len(set(roles))


# -- least privilege --------------------------------------------------------------------------------


@pytest.mark.parametrize("verb", READ_ONLY_VERBS)
def test_no_read_only_verb_role_can_write_any_table(domain_synth, verb):
    stmts = _role_statements(domain_synth)[_role_of(domain_synth, _fn_name(domain_synth, verb))]
    written = [s for s in stmts if _actions(s) & DDB_WRITES]
    assert written == []


def test_delta_writes_only_its_session_cursors(domain_synth):
    tables = _table_ids(domain_synth)
    stmts = _role_statements(domain_synth)[_role_of(domain_synth, _fn_name(domain_synth, "delta"))]
    written = set().union(*[_refs(s["Resource"]) for s in stmts if _actions(s) & DDB_WRITES])
    assert written == {tables["cursors"]}


def test_only_the_edge_can_invoke_tool_functions(domain_synth):
    tool_fn_ids = {
        lid
        for lid, f in domain_synth.resources("AWS::Lambda::Function").items()
        if f["Properties"]["Handler"].split(".")[1] not in ("mcp", "authorizer", "indexer", "heartbeat")
    }
    edge_role = _role_of(domain_synth, _fn_name(domain_synth, "mcp"))
    invokers = set()
    for role, stmts in _role_statements(domain_synth).items():
        for s in stmts:
            if _actions(s) & {"lambda:InvokeFunction", "lambda:*"} and _refs(s["Resource"]) & tool_fn_ids:
                invokers.add(role)
    assert invokers == {edge_role}
    edge_invokes = set().union(
        *[
            _refs(s["Resource"])
            for s in _role_statements(domain_synth)[edge_role]
            if "lambda:InvokeFunction" in _actions(s)
        ]
    )
    assert edge_invokes == tool_fn_ids


def test_the_edge_role_touches_no_table(domain_synth):
    edge_role = _role_of(domain_synth, _fn_name(domain_synth, "mcp"))
    assert not any(
        a.startswith("dynamodb:") for s in _role_statements(domain_synth)[edge_role] for a in _actions(s)
    )


def test_only_the_indexer_can_write_to_opensearch(domain_synth):
    """Every tool function only searches; the stream indexer alone writes the index."""
    indexer_role = _role_of(domain_synth, _fn_name(domain_synth, "indexer"))
    writers = set()
    for role, stmts in _role_statements(domain_synth).items():
        for s in stmts:
            acts = _actions(s)
            if acts & {"es:ESHttpPut", "es:ESHttpDelete", "es:ESHttpPatch", "es:*"}:
                writers.add(role)
            if "es:ESHttpPost" in acts:
                posts_only_searches = all(
                    json.dumps(r).rstrip('"]}').endswith(("_search", "_msearch")) for r in _resources(s)
                )
                if not posts_only_searches:
                    writers.add(role)
    assert writers == {indexer_role}


def test_the_opensearch_domain_policy_names_only_the_granted_roles(domain_synth):
    (domain,) = domain_synth.resources("AWS::OpenSearchService::Domain").values()
    p = domain["Properties"]
    assert p["EncryptionAtRestOptions"]["Enabled"] and p["NodeToNodeEncryptionOptions"]["Enabled"]
    assert p["DomainEndpointOptions"]["EnforceHTTPS"]
    (stmt,) = p["AccessPolicies"]["Statement"]
    principals = {x["Fn::GetAtt"][0] for x in stmt["Principal"]["AWS"]}
    searchers = {
        _role_of(domain_synth, _fn_name(domain_synth, g))
        for g in ("recall", "entity", "synthesize", "context_pack", "remember", "pages", "indexer")
    }
    assert principals == searchers


def test_serverless_flavour_grants_no_reading_verb_write_permissions(serverless_synth):
    assert serverless_synth.resources("AWS::OpenSearchService::Domain") == {}
    (coll,) = serverless_synth.resources("AWS::OpenSearchServerless::Collection").values()
    assert coll["Properties"]["Type"] == "VECTORSEARCH"
    (pol,) = serverless_synth.resources("AWS::OpenSearchServerless::AccessPolicy").values()
    indexer_role = _role_of(serverless_synth, _fn_name(serverless_synth, "indexer"))
    rules = json.dumps(pol["Properties"]["Policy"])
    assert "aoss:WriteDocument" in rules
    doc = pol["Properties"]["Policy"]
    # The policy is a Fn::Join of JSON text with role ARNs spliced in; find the writer rule's principals.
    text = "".join(p if isinstance(p, str) else "\x00" + json.dumps(p) + "\x00" for p in doc["Fn::Join"][1])
    writer_part = text[text.index("aoss:WriteDocument") :]
    assert indexer_role in writer_part
    for verb in READ_ONLY_VERBS:
        assert _role_of(serverless_synth, _fn_name(serverless_synth, verb)) not in writer_part


# -- tables -----------------------------------------------------------------------------------------


def test_tables_come_from_the_shared_spec_with_pitr_ttl_streams_and_on_demand(domain_synth):
    tables = {
        t["Properties"]["TableName"]: t["Properties"]
        for t in domain_synth.resources("AWS::DynamoDB::GlobalTable").values()
    }
    assert set(tables) == {s.physical_name(domain_synth.config.prefix) for s in TABLES}
    for spec in TABLES:
        p = tables[spec.physical_name(domain_synth.config.prefix)]
        assert p["BillingMode"] == "PAY_PER_REQUEST"
        keys = {k["AttributeName"]: k["KeyType"] for k in p["KeySchema"]}
        assert keys[spec.partition.name] == "HASH"
        assert {g["IndexName"] for g in p.get("GlobalSecondaryIndexes", [])} == {g.name for g in spec.gsis}
        if spec.ttl_attribute:
            assert p["TimeToLiveSpecification"] == {"AttributeName": spec.ttl_attribute, "Enabled": True}
        if spec.stream:
            assert p["StreamSpecification"]["StreamViewType"] == spec.stream
        replica = p["Replicas"][0]
        assert replica["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True


def test_deletion_protection_is_configurable(domain_synth, serverless_synth):
    def flags(s):
        return {
            t["Properties"]["Replicas"][0].get("DeletionProtectionEnabled", False)
            for t in s.resources("AWS::DynamoDB::GlobalTable").values()
        }

    assert flags(domain_synth) == {False}
    assert flags(serverless_synth) == {True}


# -- edge, authorizer, usage plans ------------------------------------------------------------------


def test_the_rest_api_is_regional_and_takes_usage_keys_from_the_authorizer(domain_synth):
    (api,) = domain_synth.resources("AWS::ApiGateway::RestApi").values()
    assert api["Properties"]["EndpointConfiguration"]["Types"] == ["REGIONAL"]
    assert api["Properties"]["ApiKeySourceType"] == "AUTHORIZER"
    (stage,) = domain_synth.resources("AWS::ApiGateway::Stage").values()
    assert "DestinationArn" in stage["Properties"]["AccessLogSetting"]


def test_the_request_authorizer_reads_the_authorization_header_and_caches(domain_synth):
    (auth,) = domain_synth.resources("AWS::ApiGateway::Authorizer").values()
    p = auth["Properties"]
    assert p["Type"] == "REQUEST"
    assert p["IdentitySource"] == "method.request.header.Authorization"
    assert p["AuthorizerResultTtlInSeconds"] == 300


def test_mcp_and_every_v1_route_need_the_authorizer_and_a_usage_key(domain_synth):
    from infra.constructs.tool_functions import registry_tools

    raw = domain_synth.resources("AWS::ApiGateway::Resource")

    def path(lid: str) -> str:
        parent = raw[lid]["Properties"]["ParentId"]
        head = path(parent["Ref"]) if "Ref" in parent else ""
        return f"{head}/{raw[lid]['Properties']['PathPart']}"

    routed: dict[str, set[str]] = {}
    for m in domain_synth.resources("AWS::ApiGateway::Method").values():
        p = m["Properties"]
        route = path(p["ResourceId"]["Ref"]) if "Ref" in p.get("ResourceId", {}) else "/"
        routed.setdefault(route, set()).add(p["HttpMethod"])
        if route == "/mcp" or route.startswith("/v1/"):
            assert p["AuthorizationType"] == "CUSTOM"
            assert p["ApiKeyRequired"] is True
    assert {"POST", "GET", "DELETE"} <= routed["/mcp"]
    for tool in registry_tools():
        assert routed[f"/v1/{tool}"] == {"POST"}


def test_unauthorized_answers_401_with_www_authenticate(domain_synth):
    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in domain_synth.resources("AWS::ApiGateway::GatewayResponse").values()
    }
    unauth = responses["UNAUTHORIZED"]
    assert unauth["StatusCode"] == "401"
    assert "gatewayresponse.header.WWW-Authenticate" in unauth["ResponseParameters"]
    body = unauth["ResponseTemplates"]["application/json"]
    assert json.loads(body.replace("$context.requestId", "x"))["code"] == "unauthorized"
    for rt in ("THROTTLED", "QUOTA_EXCEEDED"):
        assert responses[rt]["StatusCode"] == "429"


def test_each_tier_is_a_usage_plan_with_throttle_and_quota_and_each_client_has_a_key(domain_synth):
    cfg = domain_synth.config
    plans = {
        p["Properties"]["UsagePlanName"]: p["Properties"]
        for p in domain_synth.resources("AWS::ApiGateway::UsagePlan").values()
    }
    for tier, t in cfg.tiers.items():
        p = plans[f"{cfg.prefix}-{tier}"]
        assert p["Throttle"] == {"BurstLimit": t.burst, "RateLimit": t.rate_per_second}
        assert p["Quota"] == {"Limit": t.quota_per_day, "Period": "DAY"}
    keys = domain_synth.resources("AWS::ApiGateway::ApiKey")
    assert len(keys) == len(cfg.clients) + 1  # plus the shared default key
    assert len(domain_synth.resources("AWS::ApiGateway::UsagePlanKey")) == len(keys)
    for k in keys.values():  # key values come from Secrets Manager, never from the template
        assert "resolve:secretsmanager" in json.dumps(k["Properties"]["Value"])


# -- client auth ------------------------------------------------------------------------------------


def test_cognito_exposes_the_protocol_scopes_and_one_client_credentials_app_per_client(domain_synth):
    (rs,) = domain_synth.resources("AWS::Cognito::UserPoolResourceServer").values()
    assert {s["ScopeName"] for s in rs["Properties"]["Scopes"]} == set(SCOPES)
    clients = domain_synth.resources("AWS::Cognito::UserPoolClient")
    assert len(clients) == len(domain_synth.config.clients)
    for c in clients.values():
        p = c["Properties"]
        assert p["AllowedOAuthFlows"] == ["client_credentials"]
        assert p["GenerateSecret"] is True
    by_name = {c["Properties"]["ClientName"]: c["Properties"] for c in clients.values()}
    for cc in domain_synth.config.clients:
        scopes = by_name[f"{domain_synth.config.prefix}-{cc.client_id}"]["AllowedOAuthScopes"]
        assert len(scopes) == len(cc.scopes)


def test_the_authorizer_reads_only_the_clients_table(domain_synth):
    tables = _table_ids(domain_synth)
    stmts = _role_statements(domain_synth)[_role_of(domain_synth, _fn_name(domain_synth, "authorizer"))]
    touched = set().union(
        *[_refs(s["Resource"]) for s in stmts if any(a.startswith("dynamodb:") for a in _actions(s))]
    )
    assert touched & set(tables.values()) == {tables["clients"]}
    assert not any(_actions(s) & DDB_WRITES for s in stmts)


# -- indexer, heartbeat -----------------------------------------------------------------------------


def test_streams_feed_the_indexer_with_bisect_retries_partial_failures_and_a_dlq(domain_synth):
    mappings = domain_synth.resources("AWS::Lambda::EventSourceMapping")
    streamed = [s for s in TABLES if s.stream]
    assert len(mappings) == len(streamed)
    indexer_id, _ = _function(domain_synth, _fn_name(domain_synth, "indexer"))
    for m in mappings.values():
        p = m["Properties"]
        assert p["FunctionName"] == {"Ref": indexer_id}
        assert p["BisectBatchOnFunctionError"] is True
        assert p["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert p["MaximumRetryAttempts"] >= 1
        assert "Destination" in p["DestinationConfig"]["OnFailure"]


def test_heartbeat_schedules_come_from_config_and_carry_the_session_payload(domain_synth):
    cfg = domain_synth.config
    schedules = {
        s["Properties"]["Name"]: s["Properties"]
        for s in domain_synth.resources("AWS::Scheduler::Schedule").values()
    }
    assert len(schedules) == len(cfg.heartbeats)
    for h in cfg.heartbeats:
        p = schedules[cfg.heartbeat_schedule_name(h.name)]
        assert p["ScheduleExpression"] == h.schedule
        text = json.dumps(p["Target"]["Input"])
        for value in (h.tenant, h.client_id, h.session_id):
            assert value in text
        assert "DeadLetterConfig" in p["Target"]
    assert len(domain_synth.resources("AWS::Events::ApiDestination")) == sum(
        1 for d in cfg.destinations.values() if d.type == "https"
    )


# -- monitoring -------------------------------------------------------------------------------------


def test_alarms_cover_errors_throttles_p99_per_verb_dlqs_and_authorizer_denials(domain_synth):
    names = {a["Properties"]["AlarmName"] for a in domain_synth.resources("AWS::CloudWatch::Alarm").values()}
    prefix = domain_synth.config.prefix
    for verb in VERB_NAMES:
        for kind in ("errors", "throttles", "p99"):
            assert f"{prefix}-tool-{verb}-{kind}" in names
    assert {
        f"{prefix}-indexer-dlq",
        f"{prefix}-heartbeat-dlq",
        f"{prefix}-authorizer-denials",
        f"{prefix}-authorizer-errors",
    } <= names
    assert len(domain_synth.resources("AWS::CloudWatch::Dashboard")) == 1


# -- cdk-nag ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["domain_synth", "serverless_synth"])
def test_cdk_nag_aws_solutions_reports_no_unacknowledged_finding(flavour, request):
    synth = request.getfixturevalue(flavour)
    assert synth.violations == []


@pytest.mark.parametrize("flavour", ["domain_synth", "serverless_synth"])
def test_every_cdk_nag_acknowledgment_carries_a_reason(flavour, request):
    synth = request.getfixturevalue(flavour)
    acks = [
        (path, rule, reason)
        for path, entries in synth.metadata.items()
        for e in entries
        if e["type"] == "aws:cdk:acknowledged-rules"
        for rule, reason in e["data"].items()
    ]
    assert acks
    for _, rule, reason in acks:
        assert rule.startswith("AwsSolutions::")
        assert len(reason.split()) >= 5


def test_the_edge_can_keep_warm_sandboxes_behind_an_alias(domain_synth, serverless_synth):
    assert domain_synth.resources("AWS::Lambda::Alias") == {}
    ((alias_id, alias),) = serverless_synth.resources("AWS::Lambda::Alias").items()
    assert alias["Properties"]["ProvisionedConcurrencyConfig"] == {"ProvisionedConcurrentExecutions": 2}
    integrations = [
        json.dumps(m["Properties"].get("Integration", {}))
        for m in serverless_synth.resources("AWS::ApiGateway::Method").values()
    ]
    assert any(alias_id in i for i in integrations)
