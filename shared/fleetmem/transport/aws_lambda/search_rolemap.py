"""The search role mapping's custom resource: the onEvent handler the CDK Provider framework
invokes on every CloudFormation event of it (infra/constructs/search_rolemap.py).

Create and Update PUT fine-grained access control's two roles and their mappings
(`adapters.aws.search_roles`), signed as the search-admin role; a refusal raises, which the
framework reports to CloudFormation as the failure's reason, so the deploy fails and says why.
Delete does nothing: the mappings stay on the domain, which may be retained with its data.
The answer keeps one physical id for the life of the resource, so an update never looks like a
replacement (which would send CloudFormation a Delete of the old one).
"""

from __future__ import annotations

from typing import Any

from fleetmem.wiring import SecurityApiRefused, admin_client, put_roles

#: The physical id of the one mapping resource of a stage.
PHYSICAL_ID = "fleetmem-search-rolemap"


def on_event(event: dict[str, Any]) -> dict[str, Any]:
    """The Provider framework's onEvent: `{"PhysicalResourceId", "Data"}` or an exception."""
    kind = event["RequestType"]
    physical = event.get("PhysicalResourceId") or PHYSICAL_ID
    if kind == "Delete":
        return {"PhysicalResourceId": physical}
    if kind not in {"Create", "Update"}:
        raise ValueError(f"unknown CloudFormation request type {kind!r}")
    props = event["ResourceProperties"]
    readers, indexers = list(props["ReaderRoleArns"]), list(props["IndexerRoleArns"])
    if not readers or not indexers:
        raise SecurityApiRefused("the search role mapping needs at least one reader and one indexer role")
    client = admin_client(
        props["Endpoint"], admin_role_arn=props["AdminRoleArn"], domain_arn=props["DomainArn"], region=props["Region"]
    )
    written = put_roles(client, props["IndexPattern"], readers, indexers)
    return {"PhysicalResourceId": physical, "Data": {"Written": ",".join(written)}}
