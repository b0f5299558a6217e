"""The edge's web ACL (`api.waf`): per-IP rate rules that tell a request with a well-formed
credential from one without, then AWS's managed rule groups with their body rules set to count.
Its rule and metric names are what the monitoring's WAF alarms read."""

from __future__ import annotations

from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_wafv2 as wafv2

from constructs import Construct
from fleetmem.transport.aws_lambda.authorizer import credential_shape

from ..config import WAF_WINDOW_S, DeployConfig

#: WAF rule names (and their CloudWatch metric names, the `Rule` dimension of `AWS/WAFV2`).
RATE_RULE, RATE_METRIC = "rate-per-ip", "ratePerIp"
FLOOD_RULE, FLOOD_METRIC = "flood-per-ip", "floodPerIp"


#: AWS managed rule groups on the web ACL, each with the rules that inspect the request body set to
#: count: the body of an authenticated call is the caller's own memory text (code, HTML, log lines,
#: pages over 8 KB), which those rules would block as attacks. Headers, URI and query stay blocked.
MANAGED_RULE_GROUPS = {
    "AWSManagedRulesCommonRuleSet": (
        "SizeRestrictions_BODY",
        "CrossSiteScripting_BODY",
        "GenericLFI_BODY",
        "GenericRFI_BODY",
        "EC2MetaDataSSRF_BODY",
    ),
    "AWSManagedRulesKnownBadInputsRuleSet": ("Log4JRCE_BODY", "JavaDeserializationRCE_BODY"),
}


def _managed_rule_group(name: str, priority: int, body_rules: tuple[str, ...]) -> wafv2.CfnWebACL.RuleProperty:
    return wafv2.CfnWebACL.RuleProperty(
        name=name,
        priority=priority,
        override_action=wafv2.CfnWebACL.OverrideActionProperty(none={}),
        statement=wafv2.CfnWebACL.StatementProperty(
            managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                vendor_name="AWS",
                name=name,
                rule_action_overrides=[
                    wafv2.CfnWebACL.RuleActionOverrideProperty(
                        name=rule, action_to_use=wafv2.CfnWebACL.RuleActionProperty(count={})
                    )
                    for rule in body_rules
                ],
            )
        ),
        visibility_config=wafv2.CfnWebACL.VisibilityConfigProperty(
            cloud_watch_metrics_enabled=True, metric_name=name, sampled_requests_enabled=True
        ),
    )


def web_acl(scope: Construct, config: DeployConfig, stage: apigw.Stage) -> wafv2.CfnWebACL:
    """A regional web ACL on the stage: two rate-based rules per source IP first, then AWS's
    managed Common and KnownBadInputs rule groups.

    The low per-IP limit counts only requests WITHOUT a well-formed credential (no
    `Authorization` value of `credential_shape()`): probes, junk and the public routes. A
    request WITH one is counted by the flood guard only, at the stage's rate over WAF's window
    (`DeployConfig.waf_flood_limit`): a fleet behind one NAT address is throttled by its usage
    plans and the stage, never blocked by WAF first. The edge takes no usage-plan key header
    (the key comes from the authorizer, `ApiKeySourceType.AUTHORIZER`), so the credential is
    the `Authorization` header alone."""
    well_formed = wafv2.CfnWebACL.StatementProperty(
        regex_match_statement=wafv2.CfnWebACL.RegexMatchStatementProperty(
            regex_string=credential_shape(),
            field_to_match=wafv2.CfnWebACL.FieldToMatchProperty(single_header={"Name": "authorization"}),
            text_transformations=[wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")],
        )
    )
    not_well_formed = wafv2.CfnWebACL.StatementProperty(
        not_statement=wafv2.CfnWebACL.NotStatementProperty(statement=well_formed)
    )

    def per_ip(name: str, metric: str, priority: int, limit: int, scope) -> wafv2.CfnWebACL.RuleProperty:
        return wafv2.CfnWebACL.RuleProperty(
            name=name,
            priority=priority,
            action=wafv2.CfnWebACL.RuleActionProperty(block={}),
            statement=wafv2.CfnWebACL.StatementProperty(
                rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                    aggregate_key_type="IP",
                    limit=limit,
                    evaluation_window_sec=WAF_WINDOW_S,
                    scope_down_statement=scope,
                )
            ),
            visibility_config=wafv2.CfnWebACL.VisibilityConfigProperty(
                cloud_watch_metrics_enabled=True, metric_name=metric, sampled_requests_enabled=True
            ),
        )

    name = f"{config.prefix}-api"
    acl = wafv2.CfnWebACL(
        scope,
        "WebAcl",
        name=name,
        scope="REGIONAL",
        default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
        visibility_config=wafv2.CfnWebACL.VisibilityConfigProperty(
            cloud_watch_metrics_enabled=True, metric_name=name.replace("-", ""), sampled_requests_enabled=True
        ),
        rules=[
            per_ip(RATE_RULE, RATE_METRIC, 0, config.api.waf.rate_limit_per_5min, not_well_formed),
            per_ip(FLOOD_RULE, FLOOD_METRIC, 1, config.waf_flood_limit(), well_formed),
            *(
                _managed_rule_group(group, priority, body_rules)
                for priority, (group, body_rules) in enumerate(MANAGED_RULE_GROUPS.items(), start=2)
            ),
        ],
    )
    wafv2.CfnWebACLAssociation(scope, "WebAclAssociation", resource_arn=stage.stage_arn, web_acl_arn=acl.attr_arn)
    return acl
