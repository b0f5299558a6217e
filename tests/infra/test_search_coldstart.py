"""Template assertions (offline synth, tests/infra/conftest.py) on how the search domain is reached
and how the functions start: every role scoped to its index paths (nothing at the domain's root),
the production search preset (Multi-AZ with Standby, fine-grained access control with an IAM
master role, audit logs, optional VPC placement), and SnapStart per function group."""

from __future__ import annotations

import json

import pytest
from tests.infra.conftest import _example_alarms, _synth
from tests.infra.test_stack import VARIANTS, _actions, _fn_name, _function, _resources, _role_of, _role_statements

from fleetmem.adapters.aws.opensearch_bodies import alias_name, index_name

#: OpenSearch APIs at the domain's root that would reach every index (or the whole cluster).
ROOT_APIS = {"_msearch", "_search", "_bulk", "_all", "_mget", "_delete_by_query", "_reindex", "_update_by_query", "*"}
SUBNETS = ["subnet-0aaa11112222333a1", "subnet-0bbb11112222333b2", "subnet-0ccc11112222333c3"]
GROUPS = ["sg-0123456789abcdef0"]


@pytest.fixture(scope="session")
def vpc_synth(tmp_path_factory, _no_aws_env):
    """A production stage as docs/deploy.md 4f suggests: production search preset in a VPC and
    the production cold-start preset."""
    return _synth(
        tmp_path_factory.mktemp("vpc"),
        {
            "stage": "prod",
            "search": {
                "flavour": "domain",
                "preset": "production",
                "vpc": {"subnet_ids": SUBNETS, "security_group_ids": GROUPS},
            },
            "cold_start": {"preset": "production"},
            "tables": {},
            "alarms": _example_alarms() | {"subscribers": [{"type": "email", "endpoint": "oncall@example.com"}]},
        },
    )


ALL = (*VARIANTS, "vpc_synth")
DOMAINS = ("domain_synth", "waf_synth", "production_synth", "vpc_synth")


def _text(value) -> str:
    """A CloudFormation string value flattened; `<domain>` where the domain's ARN or name is."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_text(p) for p in parts)
    if isinstance(value, dict) and "Fn::GetAtt" in value and value["Fn::GetAtt"][1] == "Arn":
        return "<domain>" if "Domain" in value["Fn::GetAtt"][0] else "<arn>"
    return "<token>"


def _path(resource, domain_name: str) -> str | None:
    """The HTTP path an `es:` resource covers ("" for the domain itself), None for other ARNs."""
    text = _text(resource)
    for head in ("<domain>", f":domain/{domain_name}"):
        if head in text:
            return text.split(head, 1)[1]
    return None


def _es_grants(synth) -> list[tuple[str, set[str], str]]:
    """(who, actions, path) of every `es:` grant: role policies and the domain's access policy."""
    (domain,) = synth.resources("AWS::OpenSearchService::Domain").values()
    name = domain["Properties"]["DomainName"]
    out = []
    for role, stmts in _role_statements(synth).items():
        for s in stmts:
            acts = {a for a in _actions(s) if a.startswith("es:")}
            if acts:
                out += [(role, acts, _path(r, name)) for r in _resources(s)]
    for s in domain["Properties"]["AccessPolicies"]["Statement"]:
        for principal in s["Principal"]["AWS"]:
            out += [(principal["Fn::GetAtt"][0], _actions(s), _path(r, name)) for r in _resources(s)]
    return out


@pytest.mark.parametrize("flavour", DOMAINS)
def test_no_role_is_granted_the_domain_itself_or_a_path_at_its_root(flavour, request):
    synth = request.getfixturevalue(flavour)
    grants = _es_grants(synth)
    assert grants
    for who, acts, path in grants:
        assert path, f"{who} holds {acts} on the whole domain"
        first = path.lstrip("/").split("/", 1)[0]
        assert first not in ROOT_APIS and not first.startswith("*"), f"{who}: {acts} on {path}"
        assert "es:ESHttp*" not in acts and "es:*" not in acts


@pytest.mark.parametrize("flavour", DOMAINS)
def test_readers_may_only_search_the_read_alias_and_the_indexer_only_its_docs_indices(flavour, request):
    synth = request.getfixturevalue(flavour)
    cfg = synth.config
    prefix, model, dim = cfg.search.index_prefix, cfg.embedding.model, cfg.embedding.dimension
    reads = {
        f"/{t}/{e}"
        for t in (alias_name(prefix, model, dim), index_name(prefix, model, dim))
        for e in ("_search", "_msearch")
    }
    indexer = _role_of(synth, _fn_name(synth, "indexer"))
    readers = {_role_of(synth, _fn_name(synth, g)) for g in ("recall", "entity", "synthesize", "context_pack")}
    seen: dict[str, set[str]] = {}
    for who, acts, path in _es_grants(synth):
        seen.setdefault(who, set()).add(path)
        if who in readers:
            assert acts <= {"es:ESHttpGet", "es:ESHttpPost"} and path in reads
        elif who == indexer:
            assert path.startswith(f"/{prefix}-docs-")
            assert "es:ESHttpDelete" not in acts
            if "es:ESHttpPost" in acts:
                assert path.endswith(("/_bulk", "/_search"))
    assert all(seen[r] == reads for r in readers)
    assert indexer in seen


def test_the_production_preset_runs_multi_az_with_standby_fine_grained_access_and_audit_logs(
    production_synth, domain_synth
):
    (domain,) = production_synth.resources("AWS::OpenSearchService::Domain").values()
    p = domain["Properties"]
    assert p["ClusterConfig"]["MultiAZWithStandbyEnabled"] is True
    assert p["ClusterConfig"]["ZoneAwarenessConfig"] == {"AvailabilityZoneCount": 3}
    security = p["AdvancedSecurityOptions"]
    assert security["Enabled"] is True and security["InternalUserDatabaseEnabled"] is False
    master = security["MasterUserOptions"]
    assert set(master) == {"MasterUserARN"}  # an IAM role: no user name, no password
    (admin_id,) = [lid for lid in production_synth.resources("AWS::IAM::Role") if "SearchAdminRole" in lid]
    assert master["MasterUserARN"] == {"Fn::GetAtt": [admin_id, "Arn"]}
    assert "MasterUserPassword" not in production_synth.template_text
    audit = p["LogPublishingOptions"]["AUDIT_LOGS"]
    assert audit["Enabled"] is True
    (group_id,) = [lid for lid in production_synth.resources("AWS::Logs::LogGroup") if "AuditLogs" in lid]
    assert group_id in json.dumps(audit["CloudWatchLogsLogGroupArn"])
    outputs = production_synth.template["Outputs"]
    assert {"SearchAdminRoleArn", "SearchReaderRoleArns", "SearchIndexerRoleArns"} <= set(outputs)
    # the dev preset keeps one public node without any of it
    (dev,) = domain_synth.resources("AWS::OpenSearchService::Domain").values()
    d = dev["Properties"]
    assert not d["ClusterConfig"].get("MultiAZWithStandbyEnabled")
    assert "AdvancedSecurityOptions" not in d and "VPCOptions" not in d
    assert (
        "AUDIT_LOGS" not in d["LogPublishingOptions"] and "SearchAdminRoleArn" not in domain_synth.template["Outputs"]
    )


def test_search_vpc_places_the_domain_and_only_the_functions_that_reach_it(vpc_synth):
    (domain,) = vpc_synth.resources("AWS::OpenSearchService::Domain").values()
    assert domain["Properties"]["VPCOptions"] == {"SubnetIds": SUBNETS, "SecurityGroupIds": GROUPS}
    searching = {"recall", "entity", "synthesize", "context_pack", "indexer"}
    for group in (*searching, "mcp", "authorizer", "heartbeat"):
        _, fn = _function(vpc_synth, _fn_name(vpc_synth, group))
        vpc = fn["Properties"].get("VpcConfig")
        if group in searching:
            assert vpc == {"SubnetIds": SUBNETS, "SecurityGroupIds": GROUPS}, group
        else:
            assert vpc is None, group


@pytest.mark.parametrize("flavour", ["production_synth", "vpc_synth"])
def test_the_production_domain_passes_cdk_nag_without_waiving_fine_grained_access_or_vpc(flavour, request):
    synth = request.getfixturevalue(flavour)
    assert synth.violations == []
    (domain_path,) = [p for p in synth.metadata if p.endswith("/Search/Domain/Resource")]
    waived = {
        rule
        for path, entries in synth.metadata.items()
        if domain_path.startswith(path)
        for e in entries
        if e["type"] == "aws:cdk:acknowledged-rules"
        for rule in e["data"]
    }
    assert "AwsSolutions::AwsSolutions-OS5" not in waived  # fine-grained access control is on, not waived
    assert ("AwsSolutions::AwsSolutions-OS1" in waived) == (synth.config.search.vpc is None)


def test_snap_start_covers_the_edge_the_authorizer_and_every_verb_in_the_production_preset(vpc_synth, domain_synth):
    snapped = {"mcp", "authorizer", *vpc_synth.config.verb_groups()}
    for group in (*snapped, "indexer", "heartbeat", "signing_rotation"):
        fid, fn = _function(vpc_synth, _fn_name(vpc_synth, group))
        assert fn["Properties"]["Environment"]["Variables"]["FLEETMEM_FUNCTION_GROUP"] == group
        versions = [
            v
            for v in vpc_synth.resources("AWS::Lambda::Version").values()
            if v["Properties"]["FunctionName"] == {"Ref": fid}
        ]
        (version,) = versions
        # a replaced version (and its snapshot) is deleted when the deploy cleans up: none pile up
        assert version.get("DeletionPolicy", "Delete") == "Delete", group
        if group in snapped:
            assert fn["Properties"]["SnapStart"] == {"ApplyOn": "PublishedVersions"}, group
            assert fn["Properties"]["Runtime"] >= "python3.12"
        else:
            assert "SnapStart" not in fn["Properties"], group
    assert not any("SnapStart" in f["Properties"] for f in domain_synth.resources("AWS::Lambda::Function").values())


def test_config_refuses_what_lambda_or_opensearch_would_refuse_at_deploy():
    from infra.config import EXAMPLE, DeployConfig
    from pydantic import ValidationError

    raw = json.loads(EXAMPLE.read_text())
    bad = [
        # SnapStart and provisioned concurrency exclude each other
        {"cold_start": {"snap_start": ["mcp"]}, "functions": {"mcp": {"timeout_s": 28, "provisioned_concurrency": 2}}},
        {"cold_start": {"snap_start": ["no-such-group"]}},
        # Multi-AZ with Standby needs three zones and dedicated masters
        {"search": {"preset": "production", "availability_zones": 2, "instance_count": 4}},
        {"search": {"audit_logs": True}},  # audit logs go through fine-grained access control
        {"search": {"preset": "production", "vpc": {"subnet_ids": SUBNETS[:2], "security_group_ids": GROUPS}}},
    ]
    for overrides in bad:
        with pytest.raises(ValidationError):
            DeployConfig.model_validate(raw | overrides)
    ok = DeployConfig.model_validate(raw | {"cold_start": {"preset": "production"}})
    assert {"mcp", "authorizer", "recall"} <= ok.snap_start_groups() and "indexer" not in ok.snap_start_groups()
