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

#: Every synthesized variant (tests/infra/conftest.py): each search flavour, with and without
#: Cognito app clients, WAF and the LLM.
VARIANTS = ("domain_synth", "serverless_synth", "waf_synth", "production_synth")

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


def _own_functions(synth) -> dict[str, dict]:
    """The app's functions (FunctionFactory's): without the CDK Provider framework's Node.js relay
    of the search role mapping's custom resource (infra/constructs/search_rolemap.py)."""
    return {
        lid: fn
        for lid, fn in synth.resources("AWS::Lambda::Function").items()
        if not fn["Properties"].get("Handler", "").startswith("framework.")
    }


def _function(synth, name: str) -> tuple[str, dict]:
    for lid, fn in synth.resources("AWS::Lambda::Function").items():
        if fn["Properties"].get("FunctionName") == name:
            return lid, fn
    raise AssertionError(f"no function {name}")


def _alias_of(synth, function_id: str) -> str:
    """The logical id of the function's one alias (`live`)."""
    (lid,) = [
        lid
        for lid, a in synth.resources("AWS::Lambda::Alias").items()
        if a["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    return lid


def _function_of(synth) -> dict[str, str]:
    """alias logical id -> its function's logical id (and each function id to itself)."""
    out = {lid: lid for lid in synth.resources("AWS::Lambda::Function")}
    out |= {lid: a["Properties"]["FunctionName"]["Ref"] for lid, a in synth.resources("AWS::Lambda::Alias").items()}
    return out


def _role_of(synth, name: str) -> str:
    return _function(synth, name)[1]["Properties"]["Role"]["Fn::GetAtt"][0]


def _table_ids(synth) -> dict[str, str]:
    out = {}
    for lid, t in synth.resources("AWS::DynamoDB::GlobalTable").items():
        out[t["Properties"]["TableName"].rsplit("-", 1)[-1]] = lid
    return out


def _text(value) -> str:
    """A CloudFormation string value as text, each Ref/GetAtt rendered as <logical id>."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_text(p) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return f"<{value['Fn::GetAtt'][0]}>"
    return json.dumps(value)


def _env(synth, group: str) -> dict:
    return _function(synth, _fn_name(synth, group))[1]["Properties"]["Environment"]["Variables"]


def _usage_key_secrets(synth) -> dict[str, str]:
    """tier -> logical id of the secret the authorizer reads that tier's usage key from."""
    raw = json.loads(_text(_env(synth, "authorizer")["FLEETMEM_USAGE_KEY_SECRETS"]))
    return {cid: ref.strip("<>") for cid, ref in raw.items()}


def _fn_name(synth, group: str) -> str:
    return f"{synth.config.prefix}-{group.replace('_', '-')}"


# -- functions generated from the registry --------------------------------------------------------


def test_each_of_the_seven_verbs_gets_its_own_function_generated_from_the_registry(domain_synth):
    from infra.constructs.tool_functions import registry_tools

    names = {f["Properties"]["FunctionName"] for f in domain_synth.resources("AWS::Lambda::Function").values()}
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
    roles = [f["Properties"]["Role"]["Fn::GetAtt"][0] for f in domain_synth.resources("AWS::Lambda::Function").values()]
    assert len(roles) == len(set(roles))


# -- least privilege --------------------------------------------------------------------------------


@pytest.mark.parametrize("verb", READ_ONLY_VERBS)
def test_no_read_only_verb_role_can_write_any_table(domain_synth, verb):
    stmts = _role_statements(domain_synth)[_role_of(domain_synth, _fn_name(domain_synth, verb))]
    written = [s for s in stmts if _actions(s) & DDB_WRITES]
    assert written == []


R = {"GetItem", "BatchGetItem", "Query"}
#: Per function, per table: exactly the DynamoDB actions its code calls (adapters/aws/*.py).
#: TransactWriteItems is authorised per item as PutItem/UpdateItem/DeleteItem; nothing scans. A
#: conditional put that asks for the stored item on failure (ALL_OLD) also reads it: GetItem.
EXPECTED_DDB = {
    "recall": {"facts": R, "pages": R},
    "entity": {"facts": R, "pages": R},
    "synthesize": {"facts": R, "pages": R},
    "context_pack": {"facts": R, "pages": R},
    "remember": {
        "facts": R | {"PutItem", "UpdateItem"},
        "pages": R,
        "idempotency": {"PutItem", "UpdateItem", "DeleteItem", "GetItem"},
        "audit": {"PutItem", "GetItem"},
    },
    "forget": {
        "facts": R | {"PutItem", "UpdateItem"},
        "idempotency": {"PutItem", "UpdateItem", "DeleteItem", "GetItem"},
        "audit": {"PutItem", "GetItem"},
    },
    "delta": {"facts": R, "pages": R, "cursors": {"GetItem", "Query", "PutItem", "DeleteItem"}},
    "pages": {
        "facts": R,
        "pages": R | {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"},
        "idempotency": {"PutItem", "UpdateItem", "DeleteItem", "GetItem"},
        "audit": {"PutItem", "GetItem"},
    },
    "admin": {
        "facts": R | {"PutItem", "UpdateItem", "DeleteItem"},
        # import_pack (an admin's pack upload) writes pages
        "pages": R | {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"},
        "audit": {"Query", "PutItem", "GetItem"},
        # the account tools: create_token / revoke_token / list_tokens, and list_followers
        "clients": {"GetItem", "Query", "PutItem", "UpdateItem"},
        "cursors": {"GetItem", "Query"},
        # the write receipt tools (D22): get, list (by_owner index), cancel
        "idempotency": {"GetItem", "Query", "UpdateItem"},
    },
    "heartbeat": {"facts": R, "pages": R, "cursors": {"GetItem", "Query", "PutItem", "DeleteItem"}},
    # reads credentials; records a token's last use (an UpdateItem at most once a minute per token)
    "authorizer": {"clients": {"GetItem", "Query", "UpdateItem"}},
}


def _ddb_grants(synth, group: str) -> dict[str, set[str]]:
    """table name -> the DynamoDB actions (without the prefix) the group's role holds on it."""
    names = {lid: name for name, lid in _table_ids(synth).items()}
    out: dict[str, set[str]] = {}
    for s in _role_statements(synth)[_role_of(synth, _fn_name(synth, group))]:
        ddb = {a.split(":", 1)[1] for a in _actions(s) if a.startswith("dynamodb:")}
        if not ddb:
            continue
        refs = {names[r] for r in _refs(s["Resource"]) if r in names}
        assert refs, f"{group}: DynamoDB actions on no known table: {s}"
        for t in refs:
            out.setdefault(t, set()).update(ddb)
    return out


@pytest.mark.parametrize("group", sorted(EXPECTED_DDB))
def test_each_role_holds_exactly_the_dynamodb_actions_its_code_calls_per_table(domain_synth, group):
    assert _ddb_grants(domain_synth, group) == EXPECTED_DDB[group]


def test_the_indexer_reads_its_tables_items_and_writes_no_table(domain_synth):
    """The indexer trusts a stream record only for the keys it names and reads the item itself:
    BatchGetItem on the streamed tables (facts, pages) beside the stream reads, and no write."""
    stream_reads = {"DescribeStream", "GetRecords", "GetShardIterator", "ListStreams"}
    grants = _ddb_grants(domain_synth, "indexer")
    assert {t: acts - stream_reads for t, acts in grants.items()} == {
        "facts": {"BatchGetItem"},
        "pages": {"BatchGetItem"},
    }


@pytest.mark.parametrize("synth", VARIANTS)
def test_no_role_holds_a_dynamodb_wildcard_or_scan(synth, request):
    synth = request.getfixturevalue(synth)
    for role, stmts in _role_statements(synth).items():
        for s in stmts:
            acts = _actions(s)
            assert not {a for a in acts if a.startswith("dynamodb:") and "*" in a}, (role, s)
            assert "dynamodb:Scan" not in acts, (role, s)
            assert "dynamodb:DescribeTable" not in acts, (role, s)


def test_delta_writes_only_its_session_cursors(domain_synth):
    tables = _table_ids(domain_synth)
    stmts = _role_statements(domain_synth)[_role_of(domain_synth, _fn_name(domain_synth, "delta"))]
    written = set().union(*[_refs(s["Resource"]) for s in stmts if _actions(s) & DDB_WRITES])
    assert written == {tables["cursors"]}


def test_only_the_edge_can_invoke_tool_functions(domain_synth):
    tool_fn_ids = {
        lid
        for lid, f in domain_synth.resources("AWS::Lambda::Function").items()
        if f["Properties"]["Handler"].split(".")[1]
        not in ("mcp", "authorizer", "indexer", "heartbeat", "signing_rotation")
    }
    edge_role = _role_of(domain_synth, _fn_name(domain_synth, "mcp"))
    invokers = set()
    for role, stmts in _role_statements(domain_synth).items():
        for s in stmts:
            if (
                _actions(s) & {"lambda:InvokeFunction", "lambda:*"}
                and {_function_of(domain_synth).get(r, r) for r in _refs(s["Resource"])} & tool_fn_ids
            ):
                invokers.add(role)
    assert invokers == {edge_role}
    edge_invokes = set().union(
        *[
            _refs(s["Resource"])
            for s in _role_statements(domain_synth)[edge_role]
            if "lambda:InvokeFunction" in _actions(s)
        ]
    )
    # the edge may invoke exactly each tool function's live alias (the name it invokes), not the function
    assert edge_invokes == {_alias_of(domain_synth, f) for f in tool_fn_ids}


@pytest.mark.parametrize("flavour", VARIANTS)
def test_each_function_resource_policy_admits_only_this_apis_own_routes(flavour, request):
    """Lambda resource policies: API Gateway may invoke the edge, the authorizer and each tool
    function only from this API's own routes (no console test-invoke, no other API, no wildcard
    principal); nothing else has a resource policy (the indexer's stream and the scheduler use roles)
    but the signing-key rotation function's, for Secrets Manager (tests/infra/test_signing_rotation.py)."""
    synth = request.getfixturevalue(flavour)
    (api_id,) = synth.resources("AWS::ApiGateway::RestApi")
    functions = synth.resources("AWS::Lambda::Function")
    aliases = {lid: a["Properties"]["FunctionName"]["Ref"] for lid, a in synth.resources("AWS::Lambda::Alias").items()}
    group_of = {lid: f["Properties"]["Handler"].split(".")[1] for lid, f in functions.items()}
    routes: dict[str, set[str]] = {}
    for perm in synth.resources("AWS::Lambda::Permission").values():
        p = perm["Properties"]
        assert p["Action"] == "lambda:InvokeFunction"
        target_fn = next(iter(_refs(p["FunctionName"])), "")
        if group_of.get(aliases.get(target_fn, target_fn)) == "signing_rotation":
            continue
        assert p["Principal"] == "apigateway.amazonaws.com"
        assert api_id in _refs(p["SourceArn"])
        source = _text(p["SourceArn"])
        assert "test-invoke-stage" not in source
        (target,) = _refs(p["FunctionName"])
        routes.setdefault(group_of[aliases.get(target, target)], set()).add(source.rsplit(f"<{api_id}>/", 1)[1])
    assert "indexer" not in routes and "heartbeat" not in routes
    assert routes["authorizer"] == {"authorizers/<" + next(iter(synth.resources("AWS::ApiGateway::Authorizer"))) + ">"}
    tools_of = {}
    for tool in registry_tools_for_test():
        tools_of.setdefault(function_group(tool), set()).add(tool)
    for group, tools in tools_of.items():
        assert routes[group] == {f"<{_stage_ref(synth)}>/POST/v1/{tool}" for tool in tools}, group
    assert all("/v1/" not in r or r.endswith(("/v1/tools", "/v1/openapi.json")) for r in routes["mcp"])


def registry_tools_for_test() -> list[str]:
    from infra.constructs.tool_functions import registry_tools

    return registry_tools()


def _stage_ref(synth) -> str:
    (stage,) = synth.resources("AWS::ApiGateway::Stage")
    return stage


def test_the_edge_role_touches_no_table(domain_synth):
    edge_role = _role_of(domain_synth, _fn_name(domain_synth, "mcp"))
    assert not any(a.startswith("dynamodb:") for s in _role_statements(domain_synth)[edge_role] for a in _actions(s))


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


def test_the_opensearch_domain_policy_lets_readers_only_search_and_only_the_indexer_write(domain_synth):
    """The domain's own access policy (not just the role policies) keeps read-only verbs to
    GET/POST on _search/_msearch; PUT and any other POST belong to the indexer, DELETE to nobody
    (the indexer deletes documents through `_bulk`; tests/infra/test_search_coldstart.py)."""
    (domain,) = domain_synth.resources("AWS::OpenSearchService::Domain").values()
    p = domain["Properties"]
    assert p["EncryptionAtRestOptions"]["Enabled"] and p["NodeToNodeEncryptionOptions"]["Enabled"]
    assert p["DomainEndpointOptions"]["EnforceHTTPS"]
    indexer = _role_of(domain_synth, _fn_name(domain_synth, "indexer"))
    readers = {
        _role_of(domain_synth, _fn_name(domain_synth, g))
        for g in ("recall", "entity", "synthesize", "context_pack", "remember", "pages")
    }
    granted: set[str] = set()
    indexer_acts: set[str] = set()
    for stmt in p["AccessPolicies"]["Statement"]:
        principals = {x["Fn::GetAtt"][0] for x in stmt["Principal"]["AWS"]}
        granted |= principals
        acts = _actions(stmt)
        assert "es:ESHttp*" not in acts and "es:*" not in acts
        if principals != {indexer}:
            assert principals == readers
            assert acts <= {"es:ESHttpGet", "es:ESHttpPost"}
            for r in _resources(stmt):
                assert json.dumps(r).rstrip('"]}').endswith(("/_search", "/_msearch"))
        else:
            assert acts <= {"es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPut", "es:ESHttpPost"}
            indexer_acts |= acts
    assert indexer_acts >= {"es:ESHttpPut", "es:ESHttpPost"}
    assert granted == readers | {indexer}


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
    first = text.index('{"Rules"')
    reader_part = text[: text.index('{"Rules"', first + 1)]  # the first rule set: the readers'
    assert indexer_role not in reader_part
    assert reader_part.count('"Permission"') == 1  # the readers' rule: read permissions only
    perms = reader_part[reader_part.index('"Permission"') :]
    assert "aoss:ReadDocument" in perms and "aoss:DescribeIndex" in perms
    assert not any(w in perms for w in ("WriteDocument", "CreateIndex", "UpdateIndex", "DeleteIndex", "*"))


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
    assert p["AuthorizerResultTtlInSeconds"] == domain_synth.config.api.authorizer_cache_ttl_s == 30
    # the authorizer signs its context to last that long (plus the signature margin)
    assert _env(domain_synth, "authorizer")["FLEETMEM_AUTHORIZER_CACHE_TTL_S"] == "30"


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


def test_the_v1_tool_list_and_openapi_routes_reach_the_edge_behind_the_same_authorizer(domain_synth):
    raw = domain_synth.resources("AWS::ApiGateway::Resource")
    methods = domain_synth.resources("AWS::ApiGateway::Method")
    mcp_post = next(
        m["Properties"]
        for m in methods.values()
        if m["Properties"]["HttpMethod"] == "POST"
        and raw.get(m["Properties"]["ResourceId"].get("Ref", ""), {}).get("Properties", {}).get("PathPart") == "mcp"
    )
    v1 = next(lid for lid, r in raw.items() if r["Properties"]["PathPart"] == "v1")
    for part in ("tools", "openapi.json"):
        lid = next(
            lid
            for lid, r in raw.items()
            if r["Properties"]["PathPart"] == part and r["Properties"]["ParentId"] == {"Ref": v1}
        )
        (method,) = [m["Properties"] for m in methods.values() if m["Properties"]["ResourceId"] == {"Ref": lid}]
        assert method["HttpMethod"] == "GET"
        assert method["AuthorizationType"] == "CUSTOM"
        assert method["AuthorizerId"] == mcp_post["AuthorizerId"]
        assert method["ApiKeyRequired"] is True
        assert method["Integration"]["Uri"] == mcp_post["Integration"]["Uri"]  # the edge function


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
    # a cached answer naming a usage key the stage no longer holds (rotated away) is told why
    no_key = responses["INVALID_API_KEY"]
    assert no_key["StatusCode"] == "403"
    body = json.loads(no_key["ResponseTemplates"]["application/json"].replace("$context.requestId", "x"))
    assert body["code"] == "unauthorized" and "rotated" in body["message"]


def test_each_tier_is_a_usage_plan_with_throttle_and_quota_and_one_key(domain_synth):
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
    assert len(keys) == len(cfg.tiers)  # one per tier, whatever the number of clients
    plan_ids = {
        p["Properties"]["UsagePlanName"].rsplit("-", 1)[-1]: lid
        for lid, p in domain_synth.resources("AWS::ApiGateway::UsagePlan").items()
    }
    plan_of_key = {
        pk["Properties"]["KeyId"]["Ref"]: pk["Properties"]["UsagePlanId"]["Ref"]
        for pk in domain_synth.resources("AWS::ApiGateway::UsagePlanKey").values()
    }
    assert set(plan_of_key) == set(keys)
    for lid, k in keys.items():  # key values come from Secrets Manager, never from the template
        assert "resolve:secretsmanager" in json.dumps(k["Properties"]["Value"])
        tier = next(t for t in cfg.tiers if k["Properties"]["Name"] == f"{cfg.prefix}-tier-{t}")
        assert plan_of_key[lid] == plan_ids[tier]
    secrets = _usage_key_secrets(domain_synth)
    assert set(secrets) == set(cfg.tiers)
    assert _text(_env(domain_synth, "authorizer")["FLEETMEM_DEFAULT_TIER"]).strip('"') == cfg.default_tier


# -- client auth ------------------------------------------------------------------------------------


def test_cognito_exposes_the_protocol_scopes_and_no_app_client_is_in_the_template(domain_synth):
    """App clients are data: `fleetmem stage clients sync` creates them (tests/aws/test_stage_clients.py)."""
    (rs,) = domain_synth.resources("AWS::Cognito::UserPoolResourceServer").values()
    assert {s["ScopeName"] for s in rs["Properties"]["Scopes"]} == set(SCOPES)
    assert domain_synth.config.clients  # the example config names clients
    assert domain_synth.resources("AWS::Cognito::UserPoolClient") == {}
    env = _env(domain_synth, "authorizer")
    assert not any("COGNITO_CLIENTS" in name for name in env)


def test_the_authorizer_touches_only_the_clients_table(domain_synth):
    tables = _table_ids(domain_synth)
    stmts = _role_statements(domain_synth)[_role_of(domain_synth, _fn_name(domain_synth, "authorizer"))]
    touched = set().union(*[_refs(s["Resource"]) for s in stmts if any(a.startswith("dynamodb:") for a in _actions(s))])
    assert touched & set(tables.values()) == {tables["clients"]}
    # its one write: a token's last use (UpdateItem); never a put or delete
    assert set().union(*[_actions(s) & DDB_WRITES for s in stmts]) == {"dynamodb:UpdateItem"}


# -- indexer, heartbeat -----------------------------------------------------------------------------


def test_streams_feed_the_indexer_with_bisect_retries_partial_failures_and_a_dlq(domain_synth):
    mappings = domain_synth.resources("AWS::Lambda::EventSourceMapping")
    streamed = [s for s in TABLES if s.stream]
    assert len(mappings) == len(streamed)
    indexer_id, _ = _function(domain_synth, _fn_name(domain_synth, "indexer"))
    for m in mappings.values():
        p = m["Properties"]
        assert _refs(p["FunctionName"]) == {_alias_of(domain_synth, indexer_id)}  # the live alias
        assert p["BisectBatchOnFunctionError"] is True
        assert p["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert p["MaximumRetryAttempts"] >= 1
        assert "Destination" in p["DestinationConfig"]["OnFailure"]


def test_heartbeat_schedules_come_from_config_and_name_only_their_heartbeat(domain_synth):
    """The schedule's input names the heartbeat; tenant, client, session and destination live in
    the heartbeat function's environment, so no invoke payload can choose them."""
    cfg = domain_synth.config
    schedules = {
        s["Properties"]["Name"]: s["Properties"] for s in domain_synth.resources("AWS::Scheduler::Schedule").values()
    }
    assert len(schedules) == len(cfg.heartbeats)
    table = _text(_env(domain_synth, "heartbeat")["FLEETMEM_HEARTBEATS"])
    for h in cfg.heartbeats:
        p = schedules[cfg.heartbeat_schedule_name(h.name)]
        assert p["ScheduleExpression"] == h.schedule
        assert json.loads(p["Target"]["Input"]) == {"heartbeat": h.name}
        for value in (h.name, h.tenant, h.client_id, h.session_id):
            assert json.dumps(value) in table
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


@pytest.mark.parametrize("flavour", VARIANTS)
def test_cdk_nag_aws_solutions_reports_no_unacknowledged_finding(flavour, request):
    synth = request.getfixturevalue(flavour)
    assert synth.violations == []


@pytest.mark.parametrize("flavour", VARIANTS)
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
    assert not any(
        "ProvisionedConcurrencyConfig" in a["Properties"] for a in domain_synth.resources("AWS::Lambda::Alias").values()
    )
    warm = {
        lid: a
        for lid, a in serverless_synth.resources("AWS::Lambda::Alias").items()
        if "ProvisionedConcurrencyConfig" in a["Properties"]
    }
    ((alias_id, alias),) = warm.items()
    edge_id, _ = _function(serverless_synth, _fn_name(serverless_synth, "mcp"))
    assert alias["Properties"]["FunctionName"] == {"Ref": edge_id}
    assert alias["Properties"]["ProvisionedConcurrencyConfig"] == {"ProvisionedConcurrentExecutions": 2}
    integrations = [
        json.dumps(m["Properties"].get("Integration", {}))
        for m in serverless_synth.resources("AWS::ApiGateway::Method").values()
    ]
    assert any(alias_id in i for i in integrations)


# -- issue 9: blockers a real deploy would hit ----------------------------------------------------------


@pytest.mark.parametrize("flavour", VARIANTS)
def test_the_alarm_topic_uses_a_customer_managed_key_cloudwatch_may_use(flavour, request):
    """CloudWatch cannot publish to a topic under the AWS-managed SNS key: the topic's key must be
    ours, with a key policy that lets cloudwatch.amazonaws.com decrypt and make data keys."""
    synth = request.getfixturevalue(flavour)
    (topic,) = synth.resources("AWS::SNS::Topic").values()
    key_ref = topic["Properties"]["KmsMasterKeyId"]
    assert "alias/aws/sns" not in json.dumps(key_ref)
    key_id = key_ref["Fn::GetAtt"][0]
    key = synth.template["Resources"][key_id]
    assert key["Type"] == "AWS::KMS::Key" and key["Properties"]["EnableKeyRotation"] is True
    cw = [
        st
        for st in key["Properties"]["KeyPolicy"]["Statement"]
        if st.get("Principal", {}).get("Service") == "cloudwatch.amazonaws.com"
    ]
    assert cw and {"kms:Decrypt", "kms:GenerateDataKey*"} <= set().union(*(_actions(st) for st in cw))
    alarm_actions = {
        json.dumps(a)
        for al in synth.resources("AWS::CloudWatch::Alarm").values()
        for a in al["Properties"]["AlarmActions"]
    }
    topic_id = next(iter(synth.resources("AWS::SNS::Topic")))
    assert alarm_actions == {json.dumps({"Ref": topic_id})}


@pytest.mark.parametrize("flavour", VARIANTS)
def test_every_timeout_nests_inside_the_one_that_calls_it(flavour, request):
    """LLM deadline < synthesize function <= every verb function < the edge's invoke read timeout <
    the edge function < the API integration timeout (29 s), read back from the template."""
    from infra.config import LLM_HEADROOM_S

    from fleetmem.adapters.aws.bedrock import LLM_DEADLINE_S
    from fleetmem.config import ENV_INVOKE_READ_TIMEOUT_S as INVOKE_READ_TIMEOUT_ENV

    synth = request.getfixturevalue(flavour)
    integration_ms = {
        m["Properties"]["Integration"].get("TimeoutInMillis")
        for m in synth.resources("AWS::ApiGateway::Method").values()
        if m["Properties"].get("Integration", {}).get("Type") == "AWS_PROXY"
    }
    assert integration_ms == {29_000}  # explicit on every Lambda integration
    edge = _function(synth, _fn_name(synth, "mcp"))[1]["Properties"]
    read = int(edge["Environment"]["Variables"][INVOKE_READ_TIMEOUT_ENV])
    from infra.constructs.tool_functions import registry_tools

    verbs = {function_group(t) for t in registry_tools()}
    timeouts = {g: _function(synth, _fn_name(synth, g))[1]["Properties"]["Timeout"] for g in verbs}
    slowest = max(timeouts.values())
    assert slowest < read < edge["Timeout"] < 29
    # the edge waits for each tool as long as its own function can run (plus the margin), no longer
    from fleetmem.adapters.aws.deadlines import INVOKE_MARGIN_S
    from fleetmem.config import ENV_INVOKE_DEADLINES_S

    deadlines = json.loads(edge["Environment"]["Variables"][ENV_INVOKE_DEADLINES_S])
    assert deadlines == {t: timeouts[function_group(t)] + INVOKE_MARGIN_S for t in registry_tools()}
    assert max(deadlines.values()) <= read
    synth_timeout = _function(synth, _fn_name(synth, "synthesize"))[1]["Properties"]["Timeout"]
    assert LLM_DEADLINE_S + LLM_HEADROOM_S <= synth_timeout


def test_a_config_whose_timeouts_do_not_nest_is_refused():
    """The example config used to give synthesize 120 s behind a 29 s API: such a config now fails
    to load, naming the chain."""
    import json as _json

    from infra.config import EXAMPLE, DeployConfig
    from pydantic import ValidationError

    raw = _json.loads(EXAMPLE.read_text())
    DeployConfig.model_validate(raw)  # the example itself nests
    for group, seconds in (("synthesize", 120), ("mcp", 29), ("recall", 27)):
        bad = _json.loads(EXAMPLE.read_text())
        bad["functions"][group] = {"memory_mb": 1024, "timeout_s": seconds}
        with pytest.raises(ValidationError, match="timeouts must nest"):
            DeployConfig.model_validate(bad)
    short = _json.loads(EXAMPLE.read_text())
    short["functions"]["synthesize"] = {"memory_mb": 1024, "timeout_s": 10}
    with pytest.raises(ValidationError, match="LLM deadline"):
        DeployConfig.model_validate(short)


@pytest.mark.parametrize("flavour", ["domain_synth", "waf_synth"])
def test_the_managed_domain_waits_for_its_log_resource_policy(flavour, request):
    synth = request.getfixturevalue(flavour)
    (domain,) = synth.resources("AWS::OpenSearchService::Domain").values()
    (policy_id,) = synth.resources("AWS::Logs::ResourcePolicy")
    assert policy_id in domain.get("DependsOn", [])


def test_rotating_usage_keys_replaces_key_and_secret_together(waf_synth):
    """api.usage_key_version 3: every tier has a v3 secret and a v3 key made from that same
    secret, the authorizer reads the v3 secrets, and the v2 keys stay in the plans for answers the
    authorizer cached before the deploy. One deploy changes both sides, so they cannot diverge."""
    cfg = waf_synth.config
    keys = {k["Properties"]["Name"]: k for k in waf_synth.resources("AWS::ApiGateway::ApiKey").values()}
    assert set(keys) == {f"{cfg.prefix}-tier-{t}{v}" for t in cfg.tiers for v in ("-v2", "-v3")}
    secrets = _usage_key_secrets(waf_synth)
    assert set(secrets) == set(cfg.tiers)
    for t in cfg.tiers:
        current = keys[f"{cfg.prefix}-tier-{t}-v3"]["Properties"]["Value"]
        assert _refs(current) == {secrets[t]}  # the key API Gateway knows = the one handed out
        previous = keys[f"{cfg.prefix}-tier-{t}-v2"]["Properties"]["Value"]
        assert _refs(previous) != {secrets[t]}
    planned = {pk["Properties"]["KeyId"]["Ref"] for pk in waf_synth.resources("AWS::ApiGateway::UsagePlanKey").values()}
    assert planned == set(waf_synth.resources("AWS::ApiGateway::ApiKey"))


@pytest.mark.parametrize("flavour", VARIANTS)
def test_no_role_is_granted_the_nonexistent_bedrock_converse_action(flavour, request):
    synth = request.getfixturevalue(flavour)
    for stmts in _role_statements(synth).values():
        for st in stmts:
            assert "bedrock:Converse" not in _actions(st)
    synth_stmts = _role_statements(synth)[_role_of(synth, _fn_name(synth, "synthesize"))]
    llm_arns = [
        json.dumps(st["Resource"])
        for st in synth_stmts
        if "bedrock:InvokeModel" in _actions(st)
        and synth.config.llm.model
        and synth.config.llm.model in json.dumps(st["Resource"])
    ]
    assert bool(llm_arns) is bool(synth.config.llm.model)


# -- issue 9: security and cost -------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", VARIANTS)
def test_the_edge_the_authorizer_and_every_verb_function_can_read_the_stage_signing_secret(flavour, request):
    """The edge signs invoke payloads and the authorizer its context; the tool functions verify
    both. Nothing else reads the key (the indexer and heartbeat trust no caller-made payload) but
    the function that rotates it."""
    from infra.constructs.tool_functions import registry_tools

    from fleetmem.config import ENV_INVOKE_SIGNING_SECRET_ARN as SIGNING_SECRET_ENV

    synth = request.getfixturevalue(flavour)
    signing = [
        lid
        for lid, sec in synth.resources("AWS::SecretsManager::Secret").items()
        if "signing" in sec["Properties"].get("Description", "")
    ]
    assert len(signing) == 1
    (secret_id,) = signing
    assert "GenerateSecretString" in synth.template["Resources"][secret_id]["Properties"]
    signers = {"mcp", "authorizer"} | {function_group(t) for t in registry_tools()}
    for fn in synth.resources("AWS::Lambda::Function").values():
        group = fn["Properties"]["Handler"].split(".")[1]
        env = fn["Properties"]["Environment"]["Variables"]
        if group in signers:
            assert env[SIGNING_SECRET_ENV] == {"Ref": secret_id}
        else:
            assert SIGNING_SECRET_ENV not in env
    for group in signers:
        stmts = _role_statements(synth)[_role_of(synth, _fn_name(synth, group))]
        assert any(
            "secretsmanager:GetSecretValue" in _actions(st) and secret_id in _refs(st["Resource"]) for st in stmts
        )
    readers = {
        role
        for role, stmts in _role_statements(synth).items()
        for st in stmts
        if "secretsmanager:GetSecretValue" in _actions(st) and secret_id in _refs(st["Resource"])
    }
    rotation = _role_of(synth, _fn_name(synth, "signing_rotation"))  # tests/infra/test_signing_rotation.py
    assert readers == {_role_of(synth, _fn_name(synth, g)) for g in signers} | {rotation}


def test_public_routes_are_throttled_at_the_stage(domain_synth):
    from infra.constructs.edge import PUBLIC_PATHS

    (stage,) = domain_synth.resources("AWS::ApiGateway::Stage").values()
    settings = {(m["ResourcePath"], m["HttpMethod"]): m for m in stage["Properties"].get("MethodSettings", [])}
    api = domain_synth.config.api
    for path in PUBLIC_PATHS:
        m = settings[("/" + path.replace("/", "~1"), "GET")]  # API Gateway's encoding of the path
        assert (m["ThrottlingRateLimit"], m["ThrottlingBurstLimit"]) == (api.public_rate_per_second, api.public_burst)
        assert (m["MetricsEnabled"], m["LoggingLevel"]) == (True, "ERROR")  # the stage's own settings kept
    unauthenticated = [
        m
        for m in domain_synth.resources("AWS::ApiGateway::Method").values()
        if m["Properties"].get("AuthorizationType", "NONE") == "NONE" and m["Properties"]["HttpMethod"] != "OPTIONS"
    ]
    assert len(unauthenticated) == len(PUBLIC_PATHS)


@pytest.mark.parametrize("flavour", VARIANTS)
def test_reserved_concurrency_follows_the_config(flavour, request):
    synth = request.getfixturevalue(flavour)
    for fn in _own_functions(synth).values():
        group = fn["Properties"]["FunctionName"].removeprefix(f"{synth.config.prefix}-").replace("-", "_")
        assert fn["Properties"].get("ReservedConcurrentExecutions") == synth.config.size_for(group).reserved_concurrency
    if flavour == "domain_synth":  # the example's capacity: 50 calls at once
        reserved = {
            g: _function(synth, _fn_name(synth, g))[1]["Properties"]["ReservedConcurrentExecutions"]
            for g in ("mcp", "recall", "synthesize", "remember", "delta", "entity", "pages")
        }
        verbs = {"remember": 25, "delta": 25, "entity": 25, "pages": 25}
        assert reserved == {"mcp": 50, "recall": 20, "synthesize": 5, **verbs}


def test_edge_and_verb_concurrency_come_from_one_capacity_setting():
    """`capacity.concurrent_calls` sizes the edge; every verb reserves half of it, the verbs that
    wait on search (recall, synthesize) half between them, so a slow index leaves half the edge's
    slots to everything else. A config that lets search take more is refused."""
    import json as _json

    from infra.config import EXAMPLE, DeployConfig
    from pydantic import ValidationError

    from fleetmem.adapters.aws.deadlines import SEARCH_GROUPS

    raw = _json.loads(EXAMPLE.read_text())
    cfg = DeployConfig.model_validate({**raw, "capacity": {"concurrent_calls": 120}})
    assert cfg.size_for("mcp").reserved_concurrency == 120
    assert {g: cfg.size_for(g).reserved_concurrency for g in SEARCH_GROUPS} == {"recall": 48, "synthesize": 12}
    assert {cfg.size_for(g).reserved_concurrency for g in cfg.verb_groups() if g not in SEARCH_GROUPS} == {60}
    greedy = {**raw, "functions": {**raw["functions"], "recall": {"reserved_concurrency": 40}}}
    with pytest.raises(ValidationError, match="at most half"):
        DeployConfig.model_validate(greedy)
    alone = {**raw, "functions": {**raw["functions"], "remember": {"reserved_concurrency": 51}}}
    with pytest.raises(ValidationError, match="exceeds the edge"):
        DeployConfig.model_validate(alone)


def test_every_verb_ends_before_its_idempotency_claim_lapses():
    """A write still running when its idempotency lease (60 s) ends could run twice: a verb
    timeout at or above the lease is refused (with every other layer raised to allow it)."""
    import json as _json

    from infra.config import EXAMPLE, DeployConfig
    from pydantic import ValidationError

    raw = _json.loads(EXAMPLE.read_text())
    long = {
        **raw,
        "api": {**raw["api"], "integration_timeout_s": 120, "invoke_read_timeout_s": 90},
        "functions": {**raw["functions"], "mcp": {"timeout_s": 100}, "remember": {"timeout_s": 60}},
    }
    with pytest.raises(ValidationError, match="idempotency lease"):
        DeployConfig.model_validate(long)
    long["functions"]["remember"] = {"timeout_s": 59}
    DeployConfig.model_validate(long)


@pytest.mark.parametrize("flavour", ["serverless_synth", "waf_synth"])
def test_waf_guards_every_non_dev_stage_with_managed_rule_groups_beside_the_rate_rule(flavour, request):
    """The dev example has no WAF; a non-dev stage gets one without asking (serverless_synth's "prod"
    says nothing about WAF), with AWS's Common and KnownBadInputs groups after the per-IP rate rules.
    The groups' body rules only count: the body is the caller's own memory text."""
    from infra.constructs.edge import MANAGED_RULE_GROUPS

    synth = request.getfixturevalue(flavour)
    ((acl_id, acl),) = synth.resources("AWS::WAFv2::WebACL").items()
    assert acl["Properties"]["Scope"] == "REGIONAL"
    rules = {r["Name"]: r for r in acl["Properties"]["Rules"]}
    assert set(rules) == {
        "rate-per-ip",
        "flood-per-ip",
        "AWSManagedRulesCommonRuleSet",
        "AWSManagedRulesKnownBadInputsRuleSet",
    }
    rate = rules["rate-per-ip"]
    limit = synth.config.api.waf.rate_limit_per_5min
    stmt = rate["Statement"]["RateBasedStatement"]
    assert (stmt["AggregateKeyType"], stmt["Limit"]) == ("IP", limit)
    assert "Block" in rate["Action"] and rate["Priority"] == 0
    assert max(r["Priority"] for r in rules.values() if "RateBasedStatement" in r["Statement"]) < min(
        rules[name]["Priority"] for name in MANAGED_RULE_GROUPS
    )
    for name, body_rules in MANAGED_RULE_GROUPS.items():
        group = rules[name]
        assert group["OverrideAction"] == {"None": {}}
        stmt = group["Statement"]["ManagedRuleGroupStatement"]
        assert (stmt["VendorName"], stmt["Name"]) == ("AWS", name)
        overrides = {o["Name"]: o["ActionToUse"] for o in stmt["RuleActionOverrides"]}
        assert overrides == {r: {"Count": {}} for r in body_rules}
        assert all(r.endswith("_BODY") for r in overrides)
    (assoc,) = synth.resources("AWS::WAFv2::WebACLAssociation").values()
    (stage_id,) = synth.resources("AWS::ApiGateway::Stage")
    assert stage_id in _refs(assoc["Properties"]["ResourceArn"])  # so it is created after the stage
    assert assoc["Properties"]["WebACLArn"] == {"Fn::GetAtt": [acl_id, "Arn"]}


def test_a_dev_stage_has_no_waf_unless_asked(domain_synth, waf_synth):
    assert domain_synth.config.is_dev and domain_synth.resources("AWS::WAFv2::WebACL") == {}
    assert waf_synth.config.api.waf.enabled is True


@pytest.mark.parametrize("flavour", VARIANTS)
def test_every_route_is_throttled_at_the_stage_before_the_authorizer(flavour, request):
    synth = request.getfixturevalue(flavour)
    (stage,) = synth.resources("AWS::ApiGateway::Stage").values()
    settings = {(m["ResourcePath"], m["HttpMethod"]): m for m in stage["Properties"]["MethodSettings"]}
    every = settings[("/*", "*")]
    cfg = synth.config
    assert (every["ThrottlingRateLimit"], every["ThrottlingBurstLimit"]) == (cfg.stage_rate(), cfg.stage_burst())
    assert (every["MetricsEnabled"], every["LoggingLevel"]) == (True, "ERROR")


@pytest.mark.parametrize("flavour", VARIANTS)
def test_the_authorizer_is_sized_on_its_own_not_by_the_verbs_default(flavour, request):
    synth = request.getfixturevalue(flavour)
    _, fn = _function(synth, _fn_name(synth, "authorizer"))
    own = synth.config.size_for("authorizer").reserved_concurrency
    assert fn["Properties"]["ReservedConcurrentExecutions"] == own == 100
    default = synth.config.functions.get("default")
    if default is not None and default.reserved_concurrency is not None:
        assert own != default.reserved_concurrency


def test_throttling_answers_429_and_a_failing_authorizer_503_with_retry_after_in_the_envelope(domain_synth):
    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in domain_synth.resources("AWS::ApiGateway::GatewayResponse").values()
    }
    for rt, status, code in (
        ("AUTHORIZER_FAILURE", "503", "unavailable"),
        ("AUTHORIZER_CONFIGURATION_ERROR", "503", "unavailable"),
        ("THROTTLED", "429", "rate_limited"),
        ("QUOTA_EXCEEDED", "429", "rate_limited"),
    ):
        p = responses[rt]
        assert p["StatusCode"] == status, rt
        assert p["ResponseParameters"]["gatewayresponse.header.Retry-After"].strip("'").isdigit(), rt
        body = json.loads(p["ResponseTemplates"]["application/json"])
        assert body["code"] == code and body["retryable"] is True, rt
        assert body["fix"]["retry_after_seconds"] >= 1


@pytest.mark.parametrize("flavour", VARIANTS)
def test_the_api_execution_log_group_is_created_first_with_retention(flavour, request):
    synth = request.getfixturevalue(flavour)
    groups = {
        lid: g
        for lid, g in synth.resources("AWS::Logs::LogGroup").items()
        if "API-Gateway-Execution-Logs_" in _text(g["Properties"].get("LogGroupName", ""))
    }
    ((lid, group),) = groups.items()
    (stage,) = synth.resources("AWS::ApiGateway::Stage").values()
    assert _text(group["Properties"]["LogGroupName"]).endswith(f"/{synth.config.stage}")
    assert group["Properties"]["RetentionInDays"] == synth.config.log_retention_days
    assert lid in stage.get("DependsOn", [])


# -- cfn-lint ------------------------------------------------------------------------------------------

#: cfn-lint findings this project accepts, each with its reason. Anything else fails the test.
CFN_LINT_IGNORED = {
    "W3005": "CDK adds an explicit DependsOn from each function to its role (and its policy) so the "
    "policy exists before the function is invoked; the role's half is also implied by the GetAtt. "
    "Redundant, harmless, and generated by aws-cdk-lib, not by this code.",
}


@pytest.mark.parametrize("flavour", VARIANTS)
def test_cfn_lint_finds_no_error_and_only_explained_warnings(flavour, request):
    from cfnlint.api import ManualArgs, lint

    synth = request.getfixturevalue(flavour)
    matches = lint(synth.template_text, config=ManualArgs(regions=[synth.config.region]))
    findings = [(m.rule.id, "/".join(map(str, m.path)), m.message) for m in matches]
    assert [f for f in findings if f[0].startswith("E")] == []
    assert [f for f in findings if f[0] not in CFN_LINT_IGNORED] == []
    for rule, reason in CFN_LINT_IGNORED.items():
        assert rule.startswith("W") and len(reason.split()) >= 10


def test_heartbeats_that_would_overflow_the_functions_environment_are_refused():
    """The heartbeat table travels in the heartbeat function's environment (Lambda: 4 KB for all
    variables), so a config it would not fit fails at synth, not at deploy."""
    import json as _json

    from infra.config import EXAMPLE, HEARTBEAT_TABLE_MAX_BYTES, DeployConfig
    from pydantic import ValidationError

    raw = _json.loads(EXAMPLE.read_text())
    assert DeployConfig.model_validate(raw).heartbeat_table_bytes() <= HEARTBEAT_TABLE_MAX_BYTES
    many = [{**raw["heartbeats"][0], "name": f"hb-{i}", "session_id": f"session-{i:03d}" * 4} for i in range(40)]
    with pytest.raises(ValidationError, match="heartbeat table"):
        DeployConfig.model_validate({**raw, "heartbeats": many})


@pytest.mark.parametrize("field", ["tenant", "client_id"])
@pytest.mark.parametrize("value", ["acme#other", "Acme", "a/b", "a.b", ""])
def test_a_deploy_config_id_outside_the_id_grammar_is_refused(field, value):
    """The Cognito mapping and heartbeats come from the deploy config: its tenant and client ids
    follow the same grammar as `fleetmem token create` (fleetmem.tokens.ID_REGEX)."""
    import json as _json

    from infra.config import EXAMPLE, DeployConfig
    from pydantic import ValidationError

    raw = _json.loads(EXAMPLE.read_text())
    DeployConfig.model_validate(raw)
    for section in ("clients", "heartbeats"):
        bad = _json.loads(EXAMPLE.read_text())
        bad[section][0][field] = value
        with pytest.raises(ValidationError, match=field):
            DeployConfig.model_validate(bad)


def test_a_heartbeat_budget_that_could_exceed_the_eventbridge_event_limit_is_refused():
    """A delta delivered through EventBridge must stay under 256 KB; the budget is capped so the
    worst case (6 bytes per character once JSON-escaped, 4 characters per token) fits."""
    import json as _json

    from infra.config import EXAMPLE, HEARTBEAT_MAX_BUDGET_TOKENS, DeployConfig
    from pydantic import ValidationError

    assert HEARTBEAT_MAX_BUDGET_TOKENS * 4 * 6 <= 256 * 1024 - 64 * 1024
    raw = _json.loads(EXAMPLE.read_text())
    raw["heartbeats"][0]["budget_tokens"] = HEARTBEAT_MAX_BUDGET_TOKENS
    DeployConfig.model_validate(raw)
    raw["heartbeats"][0]["budget_tokens"] = HEARTBEAT_MAX_BUDGET_TOKENS + 1
    with pytest.raises(ValidationError, match="budget_tokens"):
        DeployConfig.model_validate(raw)


@pytest.mark.parametrize("flavour", ["domain_synth", "serverless_synth"])
def test_the_idle_cost_table_in_deploy_md_counts_what_the_example_deploys(flavour, request):
    """docs/deploy.md prices secrets and alarms by count; the counts must be the example config's."""
    import re
    from pathlib import Path

    synth = request.getfixturevalue(flavour)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    secrets = int(re.search(r"\((\d+) secrets:", doc).group(1))
    alarms = int(re.search(r"\((\d+) standard alarms", doc).group(1))
    serverless_alarms = int(re.search(r"\((\d+) on serverless", doc).group(1))
    if flavour == "domain_synth":  # the example config itself
        assert len(synth.resources("AWS::SecretsManager::Secret")) == secrets
        assert len(synth.resources("AWS::CloudWatch::Alarm")) == alarms
    else:  # same functions; no domain alarms; the same usage keys (one per tier) though it lists no clients
        # a "prod" stage, so WAF is on: its alarms are priced in the WAF row, not this column
        names = [a["Properties"]["AlarmName"] for a in synth.resources("AWS::CloudWatch::Alarm").values()]
        assert len([n for n in names if "-waf-" not in n]) == serverless_alarms
        assert not synth.config.clients
        assert len(synth.resources("AWS::SecretsManager::Secret")) == secrets
    assert len(synth.resources("AWS::KMS::Key")) == 1


def test_without_a_deploy_config_the_synth_refuses_and_names_the_file_and_variable(monkeypatch, tmp_path):
    """The example is a dev config (no deletion protection, DESTROY on tables and user pool): it is
    never used in place of a missing config, so no stage is deployed with it by accident."""
    import os
    import subprocess
    import sys

    from infra.config import EXAMPLE, ROOT, load_config

    assert not (ROOT / "fleetmem.deploy.json").exists()
    monkeypatch.delenv("FLEETMEM_DEPLOY_CONFIG", raising=False)
    with pytest.raises(FileNotFoundError, match="FLEETMEM_DEPLOY_CONFIG") as refused:
        load_config()
    assert "fleetmem.deploy.json" in str(refused.value)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_config(tmp_path / "missing.json")
    assert load_config(EXAMPLE).stage == "dev"  # named explicitly, it loads
    env = {k: v for k, v in os.environ.items() if k != "FLEETMEM_DEPLOY_CONFIG"}
    done = subprocess.run(
        [sys.executable, "-m", "infra.app"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 2
    assert "FLEETMEM_DEPLOY_CONFIG" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("flavour", ["domain_synth", "serverless_synth"])
def test_the_stack_does_not_own_the_account_wide_api_gateway_cloudwatch_role_by_default(flavour, request):
    """AWS::ApiGateway::Account is one setting per account and region: a stack that owns it
    collides with every other that does. Only `api.cloud_watch_role: true` creates it (retained)."""
    synth = request.getfixturevalue(flavour)
    assert synth.config.api.cloud_watch_role is False
    assert synth.resources("AWS::ApiGateway::Account") == {}
    assert "AmazonAPIGatewayPushToCloudWatchLogs" not in synth.template_text
    (stage,) = synth.resources("AWS::ApiGateway::Stage").values()
    assert any(m.get("LoggingLevel") == "ERROR" for m in stage["Properties"]["MethodSettings"])


def test_the_account_wide_cloudwatch_role_is_opt_in_and_retained(waf_synth):
    ((_, account),) = waf_synth.resources("AWS::ApiGateway::Account").items()
    assert account["DeletionPolicy"] == "Retain"
    assert "AmazonAPIGatewayPushToCloudWatchLogs" in waf_synth.template_text


# -- versions and aliases, index-health alarms, subscribers, search presets, canary releases --------


def _alarms_by_name(synth) -> dict[str, dict]:
    return {a["Properties"]["AlarmName"]: a["Properties"] for a in synth.resources("AWS::CloudWatch::Alarm").values()}


def _dims(props: dict) -> dict:
    return {d["Name"]: d["Value"] for d in props.get("Dimensions", [])}


def _topic(synth) -> str:
    (topic,) = synth.resources("AWS::SNS::Topic")
    return topic


@pytest.mark.parametrize("flavour", VARIANTS)
def test_every_function_is_published_as_a_version_behind_a_live_alias_carrying_the_fleetmem_version(flavour, request):
    from fleetmem import __version__

    synth = request.getfixturevalue(flavour)
    versions = synth.resources("AWS::Lambda::Version")
    for fn_id, fn in _own_functions(synth).items():
        alias = synth.template["Resources"][_alias_of(synth, fn_id)]["Properties"]
        assert alias["Name"] == "live"
        version_id = alias["FunctionVersion"]["Fn::GetAtt"][0]
        assert versions[version_id]["Properties"]["FunctionName"] == {"Ref": fn_id}
        assert alias["Description"] == f"fleetmem {__version__}"
        assert fn["Properties"]["Environment"]["Variables"]["FLEETMEM_VERSION"] == __version__


@pytest.mark.parametrize("flavour", VARIANTS)
def test_every_caller_invokes_the_live_alias_never_the_unqualified_function(flavour, request):
    """API Gateway integrations and the authorizer, every invoke permission, the stream mappings,
    the heartbeat schedules, the rotation schedule and the edge's tool table all name the alias."""
    from fleetmem.config import ENV_TOOL_FUNCTIONS

    synth = request.getfixturevalue(flavour)
    functions = set(synth.resources("AWS::Lambda::Function"))
    aliases = set(synth.resources("AWS::Lambda::Alias"))

    def targets(value) -> set[str]:
        refs = _refs(value) & (functions | aliases)
        assert refs, value
        return refs

    callers = [m["Properties"]["Integration"]["Uri"] for m in synth.resources("AWS::ApiGateway::Method").values()]
    callers += [a["Properties"]["AuthorizerUri"] for a in synth.resources("AWS::ApiGateway::Authorizer").values()]
    callers += [p["Properties"]["FunctionName"] for p in synth.resources("AWS::Lambda::Permission").values()]
    callers += [m["Properties"]["FunctionName"] for m in synth.resources("AWS::Lambda::EventSourceMapping").values()]
    callers += [s["Properties"]["Target"]["Arn"] for s in synth.resources("AWS::Scheduler::Schedule").values()]
    callers += [
        r["Properties"]["RotationLambdaARN"] for r in synth.resources("AWS::SecretsManager::RotationSchedule").values()
    ]
    assert len(callers) > 20
    for value in callers:
        assert targets(value) <= aliases, _text(value)
    # the stream mappings name the alias-qualified function (`<name>:live`)
    for m in synth.resources("AWS::Lambda::EventSourceMapping").values():
        assert _text(m["Properties"]["FunctionName"]).endswith(":live")
    table = json.loads(_text(_env(synth, "mcp")[ENV_TOOL_FUNCTIONS]))
    assert table == {t: f"{_fn_name(synth, function_group(t))}:live" for t in registry_tools_for_test()}


def test_the_indexer_alarms_on_stream_iterator_age_and_indexing_failures(domain_synth):
    alarms = _alarms_by_name(domain_synth)
    prefix, cfg = domain_synth.config.prefix, domain_synth.config
    indexer_id, _ = _function(domain_synth, _fn_name(domain_synth, "indexer"))
    age = alarms[f"{prefix}-indexer-iterator-age"]
    assert (age["Namespace"], age["MetricName"], age["Statistic"]) == ("AWS/Lambda", "IteratorAge", "Maximum")
    assert _dims(age) == {"FunctionName": {"Ref": indexer_id}}  # every version and alias of the indexer
    assert age["Threshold"] == cfg.alarms.iterator_age_s * 1000  # the metric is in milliseconds
    assert age["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    failed = alarms[f"{prefix}-indexing-failures"]
    assert (failed["Namespace"], failed["MetricName"], failed["Statistic"]) == ("fleetmem", "IndexingFailures", "Sum")
    assert (failed["Threshold"], failed["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    # the dimensions Powertools emits: service=<POWERTOOLS_SERVICE_NAME>, as for AuthorizerDenied
    denied = alarms[f"{prefix}-authorizer-denials"]
    assert _dims(failed) == {"service": "indexer"} and set(_dims(denied)) == set(_dims(failed))
    env = _env(domain_synth, "indexer")
    assert env["POWERTOOLS_SERVICE_NAME"] == "indexer" and env["POWERTOOLS_METRICS_NAMESPACE"] == failed["Namespace"]


@pytest.mark.parametrize("flavour", ["domain_synth", "production_synth"])
def test_a_managed_domain_alarms_on_cluster_status_free_storage_and_jvm_pressure(flavour, request):
    synth = request.getfixturevalue(flavour)
    alarms = _alarms_by_name(synth)
    prefix, search = synth.config.prefix, synth.config.search
    (domain_id,) = synth.resources("AWS::OpenSearchService::Domain")
    expected = {
        "search-cluster-red": ("ClusterStatus.red", "Maximum", "GreaterThanOrEqualToThreshold", 1),
        "search-cluster-yellow": ("ClusterStatus.yellow", "Maximum", "GreaterThanOrEqualToThreshold", 1),
        "search-free-storage": ("FreeStorageSpace", "Minimum", "LessThanThreshold", search.volume_gb * 1024 * 0.25),
        "search-jvm-pressure": ("JVMMemoryPressure", "Maximum", "GreaterThanThreshold", 80),
    }
    for name, (metric, stat, op, threshold) in expected.items():
        a = alarms[f"{prefix}-{name}"]
        assert (a["Namespace"], a["MetricName"], a["Statistic"]) == ("AWS/ES", metric, stat)
        assert a["ComparisonOperator"] == op
        assert a["Threshold"] == threshold
        assert _dims(a) == {"DomainName": {"Ref": domain_id}, "ClientId": {"Ref": "AWS::AccountId"}}
    jvm = alarms[f"{prefix}-search-jvm-pressure"]
    assert jvm["Period"] * jvm["EvaluationPeriods"] == 15 * 60
    assert alarms[f"{prefix}-search-cluster-red"]["EvaluationPeriods"] == 1


def test_a_serverless_collection_has_no_domain_alarms_but_keeps_the_indexer_ones(serverless_synth):
    names = set(_alarms_by_name(serverless_synth))
    prefix = serverless_synth.config.prefix
    assert not any(n.startswith(f"{prefix}-search-") for n in names)
    assert {f"{prefix}-indexer-iterator-age", f"{prefix}-indexing-failures"} <= names
    assert "AWS/ES" not in serverless_synth.template_text


@pytest.mark.parametrize("flavour", VARIANTS)
def test_every_alarm_notifies_the_alarm_topic(flavour, request):
    synth = request.getfixturevalue(flavour)
    topic = _topic(synth)
    alarms = synth.resources("AWS::CloudWatch::Alarm").values()
    assert alarms and all(a["Properties"]["AlarmActions"] == [{"Ref": topic}] for a in alarms)


def test_the_dashboard_shows_search_lag_and_indexing_failures_beside_what_was_kept(domain_synth):
    (dashboard,) = domain_synth.resources("AWS::CloudWatch::Dashboard").values()
    body = _text(dashboard["Properties"]["DashboardBody"])
    for metric in ("SearchLagSeconds", "IndexingFailures", "ReplayKept", "IteratorAge", "ClusterStatus.red"):
        assert f'\\"{metric}\\"' in body or f'"{metric}"' in body, metric
    assert "Search lag" in body and "Indexing failures" in body


def _example(**changes) -> dict:
    from infra.config import EXAMPLE

    raw = json.loads(EXAMPLE.read_text())
    raw.update(changes)
    return raw


def test_a_non_dev_stage_without_an_alarm_subscriber_is_refused_and_a_dev_stage_is_not():
    from infra.config import DeployConfig
    from pydantic import ValidationError

    assert DeployConfig.model_validate(_example()).alarms.all_subscribers() == ()  # dev: none needed
    with pytest.raises(ValidationError, match="no alarm subscriber") as refused:
        DeployConfig.model_validate(_example(stage="prod"))
    assert '"subscribers"' in str(refused.value) and "dev-*" in str(refused.value)  # how to fix it
    alarms = _example()["alarms"]
    ok = DeployConfig.model_validate(_example(stage="prod", alarms=alarms | {"email": "oncall@example.com"}))
    assert [s.type for s in ok.alarms.all_subscribers()] == ["email"]
    queue = {"type": "sqs", "endpoint": "arn:aws:sqs:eu-west-1:123456789012:pager"}
    ok = DeployConfig.model_validate(_example(stage="prod", alarms=alarms | {"subscribers": [queue]}))
    assert ok.alarms.all_subscribers()[0].endpoint == queue["endpoint"]
    with pytest.raises(ValidationError, match="not a valid https endpoint"):
        DeployConfig.model_validate(
            _example(stage="prod", alarms=alarms | {"subscribers": [{"type": "https", "endpoint": "http://x.example"}]})
        )


def test_cdk_synth_of_a_non_dev_config_without_a_subscriber_fails_with_the_reason(tmp_path):
    import os
    import subprocess
    import sys

    from infra.config import ROOT

    config = tmp_path / "prod.json"
    config.write_text(json.dumps(_example(stage="prod")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {"FLEETMEM_DEPLOY_CONFIG": str(config)}
    done = subprocess.run(
        [sys.executable, "-m", "infra.app"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 2
    assert "no alarm subscriber" in done.stderr and "Traceback" not in done.stderr


def test_subscribers_become_subscriptions_of_the_alarm_topic(production_synth, serverless_synth, domain_synth):
    for synth in (production_synth, serverless_synth):
        subs = {
            (s["Properties"]["Protocol"], s["Properties"]["Endpoint"])
            for s in synth.resources("AWS::SNS::Subscription").values()
            if s["Properties"]["TopicArn"] == {"Ref": _topic(synth)}
        }
        assert subs == {(x.type, x.endpoint) for x in synth.config.alarms.all_subscribers()}
        assert subs
    assert domain_synth.resources("AWS::SNS::Subscription") == {}


def test_non_dev_stages_protect_their_data_unless_the_config_says_otherwise(production_synth, domain_synth):
    """A config copied from the dev example for another stage keeps deletion protection and RETAIN:
    the example no longer sets them, so they follow the stage."""
    from infra.config import DeployConfig

    alarms = _example()["alarms"] | {"email": "oncall@example.com"}
    dev = DeployConfig.model_validate(_example()).tables
    assert (dev.deletion_protection, dev.retain_on_delete) == (False, False)
    prod = DeployConfig.model_validate(_example(stage="prod", alarms=alarms)).tables
    assert (prod.deletion_protection, prod.retain_on_delete) == (True, True)
    told = DeployConfig.model_validate(
        _example(stage="prod", alarms=alarms, tables={"deletion_protection": False})
    ).tables
    assert (told.deletion_protection, told.retain_on_delete) == (False, True)
    for t in production_synth.resources("AWS::DynamoDB::GlobalTable").values():
        assert t["DeletionPolicy"] == "Retain"
        assert all(r.get("DeletionProtectionEnabled") is True for r in t["Properties"]["Replicas"])
    (domain,) = production_synth.resources("AWS::OpenSearchService::Domain").values()
    assert domain["DeletionPolicy"] == "Retain"
    for t in domain_synth.resources("AWS::DynamoDB::GlobalTable").values():
        assert t["DeletionPolicy"] == "Delete"


def test_the_production_search_preset_spreads_zones_with_dedicated_masters_and_a_snapshot_repository(
    production_synth,
):
    (domain,) = production_synth.resources("AWS::OpenSearchService::Domain").values()
    p = domain["Properties"]
    cluster = p["ClusterConfig"]
    assert cluster["ZoneAwarenessEnabled"] is True
    assert cluster["ZoneAwarenessConfig"] == {"AvailabilityZoneCount": 3}
    assert (cluster["DedicatedMasterEnabled"], cluster["DedicatedMasterCount"]) == (True, 3)
    assert cluster["InstanceCount"] >= 2 and cluster["InstanceCount"] % 3 == 0
    assert p["EncryptionAtRestOptions"] == {"Enabled": True}
    assert p["NodeToNodeEncryptionOptions"] == {"Enabled": True}
    assert 0 <= p["SnapshotOptions"]["AutomatedSnapshotStartHour"] <= 23
    # the manual snapshot repository: a private bucket and the role OpenSearch assumes to use it
    ((bucket_id, bucket),) = production_synth.resources("AWS::S3::Bucket").items()
    assert bucket["DeletionPolicy"] == "Retain"
    assert bucket["Properties"]["PublicAccessBlockConfiguration"]["BlockPublicPolicy"] is True
    roles = production_synth.resources("AWS::IAM::Role")
    (role_id,) = [
        lid
        for lid, r in roles.items()
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "es.amazonaws.com"}
    ]
    stmts = _role_statements(production_synth)[role_id]
    assert set().union(*(_actions(st) for st in stmts)) == {
        "s3:ListBucket",
        "s3:GetObject",
        "s3:PutObject",
        "s3:DeleteObject",
    }
    assert all(_refs(st["Resource"]) == {bucket_id} for st in stmts)
    outputs = production_synth.template["Outputs"]
    assert _refs(outputs["SnapshotBucket"]["Value"]) == {bucket_id}
    assert _refs(outputs["SnapshotRoleArn"]["Value"]) == {role_id}


@pytest.mark.parametrize(
    ("flavour", "replicas"), [("domain_synth", "0"), ("production_synth", "1"), ("waf_synth", "1")]
)
def test_index_replicas_follow_the_data_node_count_in_every_function(flavour, replicas, request):
    synth = request.getfixturevalue(flavour)
    for fn in _own_functions(synth).values():
        assert fn["Properties"]["Environment"]["Variables"]["FLEETMEM_OPENSEARCH_REPLICAS"] == replicas


def test_a_serverless_collection_sets_no_index_replicas(serverless_synth):
    for fn in serverless_synth.resources("AWS::Lambda::Function").values():
        assert "FLEETMEM_OPENSEARCH_REPLICAS" not in fn["Properties"]["Environment"]["Variables"]


def test_explicit_search_fields_override_the_preset_and_zones_must_divide_the_nodes():
    from infra.config import SEARCH_PRESETS, SearchConfig
    from pydantic import ValidationError

    prod = SearchConfig(preset="production")
    assert {k: getattr(prod, k) for k in SEARCH_PRESETS["production"]} == SEARCH_PRESETS["production"]
    bigger = SearchConfig.model_validate(
        {"preset": "production", "instance_type": "r7g.xlarge.search", "volume_gb": 500}
    )
    assert (bigger.instance_type, bigger.volume_gb, bigger.dedicated_master) == ("r7g.xlarge.search", 500, True)
    assert [SearchConfig(instance_count=n).index_replicas for n in (1, 2, 6)] == [0, 1, 1]
    with pytest.raises(ValidationError, match=r"multiple of search\.availability_zones"):
        SearchConfig.model_validate({"preset": "production", "instance_count": 4})


def test_canary_releases_shift_each_alias_with_codedeploy_and_roll_back_on_its_error_alarm(production_synth):
    groups = production_synth.resources("AWS::CodeDeploy::DeploymentGroup")
    alarms = production_synth.resources("AWS::CloudWatch::Alarm")
    functions = production_synth.resources("AWS::Lambda::Function")
    alarmed = {
        a["Properties"]["Dimensions"][0]["Value"]["Ref"]: lid
        for lid, a in alarms.items()
        if a["Properties"].get("MetricName") == "Errors"  # metric-math alarms name no single metric
    }
    assert len(groups) == len(alarmed) >= 13
    shifted = set()
    for lid, g in groups.items():
        p = g["Properties"]
        assert p["DeploymentConfigName"] == "CodeDeployDefault.LambdaCanary10Percent10Minutes"
        assert p["AutoRollbackConfiguration"]["Enabled"] is True
        assert "DEPLOYMENT_STOP_ON_ALARM" in p["AutoRollbackConfiguration"]["Events"]
        ((alarm,),) = [[a["Name"]["Ref"] for a in p["AlarmConfiguration"]["Alarms"]]]
        fn_id = alarms[alarm]["Properties"]["Dimensions"][0]["Value"]["Ref"]
        assert fn_id in functions and alarmed[fn_id] == alarm  # that function's own error alarm
        alias = production_synth.template["Resources"][_alias_of(production_synth, fn_id)]
        assert alias["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]["DeploymentGroupName"] == {"Ref": lid}
        shifted.add(fn_id)
    assert len(shifted) == len(groups)


@pytest.mark.parametrize("flavour", ["domain_synth", "serverless_synth", "waf_synth"])
def test_without_canary_the_alias_moves_at_once_and_no_codedeploy_is_made(flavour, request):
    synth = request.getfixturevalue(flavour)
    assert synth.config.release.canary.enabled is False
    assert not [r for r in synth.template["Resources"].values() if r["Type"].startswith("AWS::CodeDeploy::")]
    assert not any("UpdatePolicy" in a for a in synth.resources("AWS::Lambda::Alias").values())


def test_the_indexer_keeps_failed_items_on_its_own_encrypted_replay_queue(domain_synth):
    """The replay queue (`<prefix>-indexer-replay`, SSE, TLS only, 14 days) is the indexer's to send
    to: its URL is in the indexer's environment, only the indexer's role may send to it, and the
    stream mapping hands over batches of the deployed size."""
    from infra.constructs.indexer import BATCH_SIZE, RETRY_ATTEMPTS

    from fleetmem.adapters.aws.replay import ENV_REPLAY_QUEUE_URL, queue_name

    queues = {
        lid: q
        for lid, q in domain_synth.resources("AWS::SQS::Queue").items()
        if q["Properties"].get("QueueName") == queue_name(domain_synth.config.prefix)
    }
    ((queue_id, queue),) = queues.items()
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 86400
    assert _env(domain_synth, "indexer")[ENV_REPLAY_QUEUE_URL] == {"Ref": queue_id}
    indexer_role = _role_of(domain_synth, _fn_name(domain_synth, "indexer"))
    senders = {
        role
        for role, stmts in _role_statements(domain_synth).items()
        for s in stmts
        if "sqs:SendMessage" in _actions(s) and queue_id in _refs(_resources(s))
    }
    assert senders == {indexer_role}
    policies = [
        p
        for p in domain_synth.resources("AWS::SQS::QueuePolicy").values()
        if {"Ref": queue_id} in p["Properties"]["Queues"]
    ]
    assert any("aws:SecureTransport" in json.dumps(p) for p in policies)
    for m in domain_synth.resources("AWS::Lambda::EventSourceMapping").values():
        assert m["Properties"]["BatchSize"] == BATCH_SIZE
        assert m["Properties"]["MaximumRetryAttempts"] == RETRY_ATTEMPTS
