"""Template assertions (offline synth, tests/infra/conftest.py) on the search role mapping: with
fine-grained access control on, the deploy itself maps the function roles to OpenSearch roles
through a custom resource (infra/constructs/search_rolemap.py); without it there is nothing to map."""

from __future__ import annotations

from tests.infra.test_search_coldstart import GROUPS, SUBNETS, vpc_synth  # noqa: F401 (fixture)
from tests.infra.test_stack import _actions, _fn_name, _function, _resources, _role_of, _role_statements

RESOURCE_TYPE = "Custom::FleetmemSearchRoleMapping"
#: What the mapping function's own role may do: its logs, its traces, and assume the admin role.
MAPPING_ACTIONS = {
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "sts:AssumeRole",
}
ENI_ACTIONS = {
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
}


def _mapping(synth) -> tuple[str, dict]:
    (item,) = synth.resources(RESOURCE_TYPE).items()
    return item


def _id_with(synth, type_: str, part: str) -> str:
    (lid,) = [lid for lid in synth.resources(type_) if part in lid]
    return lid


def test_the_mapping_exists_only_with_fine_grained_access_control(
    production_synth, domain_synth, serverless_synth, waf_synth
):
    assert production_synth.config.search.fine_grained_access_control
    assert len(production_synth.resources(RESOURCE_TYPE)) == 1
    _function(production_synth, _fn_name(production_synth, "search_rolemap"))
    for synth in (domain_synth, serverless_synth, waf_synth):
        assert not synth.config.search.fine_grained_access_control
        assert synth.resources(RESOURCE_TYPE) == {}
        names = {f["Properties"].get("FunctionName") for f in synth.resources("AWS::Lambda::Function").values()}
        assert _fn_name(synth, "search_rolemap") not in names
        assert "search-rolemap" not in synth.template_text.lower()


def test_the_production_preset_maps_the_reader_and_indexer_roles_after_the_domain(production_synth):
    synth = production_synth
    lid, res = _mapping(synth)
    props = res["Properties"]
    domain_id = _id_with(synth, "AWS::OpenSearchService::Domain", "SearchDomain")
    admin_id = _id_with(synth, "AWS::IAM::Role", "SearchAdminRole")
    admin_policy = _id_with(synth, "AWS::IAM::Policy", "SearchAdminRoleDefaultPolicy")
    # created after the domain exists and the admin role holds its security API paths
    assert {domain_id, admin_id, admin_policy} <= set(res["DependsOn"])
    assert props["DomainArn"] == {"Fn::GetAtt": [domain_id, "Arn"]}
    assert props["AdminRoleArn"] == {"Fn::GetAtt": [admin_id, "Arn"]}
    assert props["IndexPattern"] == f"{synth.config.search.index_prefix}-docs-*"
    assert props["Endpoint"] == {"Fn::Join": ["", ["https://", {"Fn::GetAtt": [domain_id, "DomainEndpoint"]}]]}
    # the same role ARNs the stack outputs: the searching verbs read, the indexer writes
    readers = [{"Fn::GetAtt": [_role_of(synth, _fn_name(synth, g)), "Arn"]} for g in ("recall", "synthesize")]
    assert all(r in props["ReaderRoleArns"] for r in readers)
    assert props["IndexerRoleArns"] == [{"Fn::GetAtt": [_role_of(synth, _fn_name(synth, "indexer")), "Arn"]}]
    outputs = synth.template["Outputs"]
    assert outputs["SearchReaderRoleArns"]["Value"] == {"Fn::Join": [",", props["ReaderRoleArns"]]}
    assert outputs["SearchIndexerRoleArns"]["Value"] == props["IndexerRoleArns"][0]  # a join of one is its item
    # CloudFormation calls the Provider framework, which invokes the mapping function's live alias
    fn_id, fn = _function(synth, _fn_name(synth, "search_rolemap"))
    assert fn["Properties"]["Handler"] == "functions.search_rolemap.handler.handler"
    framework = props["ServiceToken"]["Fn::GetAtt"][0]
    env = synth.template["Resources"][framework]["Properties"]["Environment"]["Variables"]
    (alias_id,) = [
        a for a, v in synth.resources("AWS::Lambda::Alias").items() if v["Properties"]["FunctionName"] == {"Ref": fn_id}
    ]
    assert env["USER_ON_EVENT_FUNCTION_ARN"] == {"Ref": alias_id}
    assert lid.startswith("SearchRoleMapping")


def test_the_mapping_function_may_only_assume_the_search_admin_role(production_synth):
    synth = production_synth
    role = _role_of(synth, _fn_name(synth, "search_rolemap"))
    statements = _role_statements(synth)[role]
    assert set().union(*(_actions(s) for s in statements)) == MAPPING_ACTIONS
    (assume,) = [s for s in statements if "sts:AssumeRole" in _actions(s)]
    admin_id = _id_with(synth, "AWS::IAM::Role", "SearchAdminRole")
    assert _actions(assume) == {"sts:AssumeRole"}
    assert _resources(assume) == [{"Fn::GetAtt": [admin_id, "Arn"]}]
    # it is not the master role, and no role but the admin's holds the security API
    assert role != admin_id
    for other, stmts in _role_statements(synth).items():
        for s in stmts:
            if any("_plugins/_security" in str(r) for r in _resources(s)):
                assert other == admin_id, other
    # the framework's role may reach only the mapping function's live alias (invoke it, wait for it)
    framework = _mapping(synth)[1]["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    framework_role = synth.template["Resources"][framework]["Properties"]["Role"]["Fn::GetAtt"][0]
    fn_id, _ = _function(synth, _fn_name(synth, "search_rolemap"))
    (alias_id,) = [
        a for a, v in synth.resources("AWS::Lambda::Alias").items() if v["Properties"]["FunctionName"] == {"Ref": fn_id}
    ]
    framework_statements = _role_statements(synth)[framework_role]
    assert set().union(*(_actions(s) for s in framework_statements)) == {"lambda:InvokeFunction", "lambda:GetFunction"}
    assert all(_resources(s) == [{"Ref": alias_id}] for s in framework_statements)


def test_in_a_vpc_stage_the_mapping_function_joins_the_search_subnets(vpc_synth):
    synth = vpc_synth
    _, fn = _function(synth, _fn_name(synth, "search_rolemap"))
    assert fn["Properties"]["VpcConfig"] == {"SubnetIds": SUBNETS, "SecurityGroupIds": GROUPS}
    role = _role_of(synth, _fn_name(synth, "search_rolemap"))
    assert set().union(*(_actions(s) for s in _role_statements(synth)[role])) == MAPPING_ACTIONS | ENI_ACTIONS
    # the Provider framework's relay stays outside: it only invokes the function and answers CloudFormation
    framework = _mapping(synth)[1]["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    assert "VpcConfig" not in synth.template["Resources"][framework]["Properties"]
